"""The Kubernetes side of the jobs, split by concern: ``client`` (one API client per cluster, error translation),
``lease`` (one run at a time), ``records`` (durable state), ``events``, ``workloads`` (nodes, GPU pods, drains),
``quotas`` (namespace ResourceQuotas), ``pods`` (the sweep's GPU pods) and ``owners`` (scaling them to zero).
Each module declares the RBAC it needs (``RBAC``, see ``rbac``)."""
