"""The ``cloud-quotas`` job: cloud GPU quotas raised before they are needed, on AWS, GCP and Azure."""
