"""gpu-jobs: Kubernetes CronJobs that enforce GPU cost controls declared in one policy file in Git."""

__version__ = "0.1.0"
