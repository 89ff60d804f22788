#!/usr/bin/env bash
# The pull-request check of a gpu-jobs policy, for any CI system (the reusable GitHub workflow
# .github/workflows/policy-check.yaml runs this script; docs/policy-repo.md). In a checkout of the change, with the
# base branch fetched:
#   1. installs the pinned gpu-jobs release with pip, from its git tag (nothing is published to PyPI);
#   2. gpu-jobs validate: one line per problem (GitHub annotations under GitHub Actions); a bad policy stops here;
#   3. gpu-jobs diff of the policy on the base branch against the change, as Markdown, written to
#      $POLICY_CHECK_OUT/policy-diff.md for the CI to post as a comment.
# Exit codes are gpu-jobs's: 0 the policy is valid, 2 it is not (or the check is misconfigured).
#
# Usage: scripts/policy-check.sh [POLICY]      POLICY: the policy file's path in the repository (gitops/policy.yaml)
# Environment:
#   GPU_JOBS_VERSION  the release to install, e.g. 0.1.0 (tag v0.1.0); required unless GPU_JOBS_SOURCE is set
#   GPU_JOBS_REPO     where the release lives (default https://github.com/example/gpu-jobs)
#   GPU_JOBS_SOURCE   a pip requirement to install instead of the tag: a local checkout (the tests, this repository's
#                     own check) or a mirror, e.g. "gpu-jobs @ git+https://git.internal/gpu-jobs@v0.1.0"
#   GPU_JOBS_INSTALL  "no": install nothing, use the gpu-jobs on PATH
#   PYTHON            the interpreter pip installs into (default python3; a venv's where python3 refuses pip)
#   BASE_REF          the base branch's ref (default origin/$GITHUB_BASE_REF, else origin/main)
#   VALIDATE_OUTPUT   text or github (default github under GitHub Actions, else text)
#   POLICY_CHECK_OUT  where policy-diff.md goes (default $RUNNER_TEMP, else $TMPDIR, else /tmp)
set -euo pipefail

policy=${1:-${POLICY:-gitops/policy.yaml}}
repo=${GPU_JOBS_REPO:-https://github.com/example/gpu-jobs}
python=${PYTHON:-python3}
base_ref=${BASE_REF:-origin/${GITHUB_BASE_REF:-main}}
out=${POLICY_CHECK_OUT:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}}
if [ "${GITHUB_ACTIONS:-}" = true ]; then validate_output=${VALIDATE_OUTPUT:-github}; else validate_output=${VALIDATE_OUTPUT:-text}; fi

say() { echo "policy-check: $*" >&2; }

if [ ! -f "$policy" ]; then
  say "no policy file at $policy (give its path in the repository as the first argument)"
  exit 2
fi

# 1. gpu-jobs, pinned.
if [ "${GPU_JOBS_INSTALL:-yes}" = no ]; then
  gpu_jobs=$(command -v gpu-jobs) || { say "GPU_JOBS_INSTALL=no, but no gpu-jobs on PATH"; exit 2; }
else
  if [ -n "${GPU_JOBS_SOURCE:-}" ]; then
    requirement=$GPU_JOBS_SOURCE
  elif [ -n "${GPU_JOBS_VERSION:-}" ]; then
    requirement="gpu-jobs @ git+$repo@v${GPU_JOBS_VERSION#v}"
  else
    say "set GPU_JOBS_VERSION to the release to install (e.g. 0.1.0), or GPU_JOBS_SOURCE"
    exit 2
  fi
  say "installing $requirement"
  "$python" -m pip install --quiet --disable-pip-version-check "$requirement" >&2
  gpu_jobs=$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/gpu-jobs
fi
installed=$("$gpu_jobs" --version)
say "$installed"
if [ -n "${GPU_JOBS_VERSION:-}" ] && [ "$installed" != "gpu-jobs ${GPU_JOBS_VERSION#v}" ]; then
  say "asked for gpu-jobs ${GPU_JOBS_VERSION#v}, got $installed: the check would not be the one pinned"
  exit 2
fi

# 2. Validate: a bad policy is the answer, and there is nothing to diff.
"$gpu_jobs" validate --output "$validate_output" "$policy"

# 3. What the change does, against the policy on the base branch.
mkdir -p "$out"
base_policy=$out/base-policy.yaml
if git show "$base_ref:$policy" > "$base_policy" 2>/dev/null; then
  "$gpu_jobs" diff "$base_policy" "$policy" --output markdown > "$out/policy-diff.md"
else
  say "$policy is not on $base_ref: nothing to diff against"
  printf '### `%s` is new\n\nThere is no policy on the base branch to compare it with.\n' "$policy" > "$out/policy-diff.md"
fi
say "wrote $out/policy-diff.md"
