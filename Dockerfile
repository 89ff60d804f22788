# syntax=docker/dockerfile:1
# gpu-jobs: one image for every job (`gpu-jobs nodegroups`, ...); the CronJob picks the command via args.
#
# Two stages: the first installs the locked dependencies and the package's wheel into a venv, then shrinks and
# byte-compiles it (.ci/slim-venv); the final stage copies only that venv, so no compiler, pip, pip cache or source
# tree ships. At most 300 MB (docs/release.md; tests/integration/test_image.py builds it where a builder runs).
#
# Reproducible: the dependencies come from requirements.lock (`make lock`: every package the runtime needs, pinned,
# with its PyPI hashes), installed with --require-hashes --no-deps, so a build never resolves a range afresh; the
# package itself is built without build isolation, with the pinned setuptools, and installed with --no-deps.

ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/gpu-jobs \
 && /opt/gpu-jobs/bin/pip install --no-cache-dir "pip==24.3.1" "setuptools==80.9.0"
# The dependencies first, in their own layer: a change to jobs/ does not download them again.
COPY requirements.lock ./
RUN /opt/gpu-jobs/bin/pip install --no-cache-dir --require-hashes --no-deps -r requirements.lock
# Only what the wheel needs: the package and its metadata (see .dockerignore).
COPY pyproject.toml README.md LICENSE ./
COPY jobs ./jobs
COPY .ci/slim-venv /usr/local/bin/slim-venv
# `pip check` fails the build if the lock misses a requirement; pip and setuptools are removed from the venv
# afterwards: the runtime never installs anything. Then the venv is shrunk and compiled (the root filesystem is
# read-only in the pod: nothing could be compiled there).
RUN /opt/gpu-jobs/bin/pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels . \
 && /opt/gpu-jobs/bin/pip install --no-cache-dir --no-deps /wheels/gpu_jobs-*.whl \
 && /opt/gpu-jobs/bin/pip check \
 && /opt/gpu-jobs/bin/pip uninstall --yes pip setuptools \
 && slim-venv /opt/gpu-jobs

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="gpu-jobs" \
      org.opencontainers.image.description="Kubernetes CronJobs that enforce GPU cost controls from one policy file" \
      org.opencontainers.image.source="https://github.com/example/gpu-jobs" \
      org.opencontainers.image.licenses="Apache-2.0"
# org.opencontainers.image.version is given by `make image` (from jobs/__init__.py, the one version source).
# HOME=/tmp: the root filesystem is read-only in the pod; SDKs that want a home or a temp dir get the /tmp emptyDir.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/gpu-jobs/bin:$PATH \
    HOME=/tmp
# 65532 is the conventional "nonroot" uid/gid (distroless); the CronJob's runAsNonRoot checks the numeric uid.
# The base image's own pip and setuptools go too: nothing installs anything at run time.
RUN groupadd --system --gid 65532 nonroot \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nonroot \
 && python -m pip uninstall --no-cache-dir --yes pip setuptools wheel
COPY --from=build /opt/gpu-jobs /opt/gpu-jobs
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["gpu-jobs"]
CMD ["--help"]
