"""gpu-jobs: Kubernetes CronJobs that enforce GPU cost controls declared in one policy file in Git."""

# The one version source: the package metadata reads it (pyproject.toml, dynamic), `gpu-jobs --version` prints it,
# `make image` tags the image with it; a release tag is v<this> (docs/release.md).

__version__ = "0.1.0"
