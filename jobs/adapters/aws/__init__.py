"""AWS, through botocore: ``session`` (one process-wide session, per-region clients, translated calls and paging),
``errors`` (AWS error codes as ``jobs.errors``), and one module per job's use of it (``nodegroups``). Each use
module declares the IAM actions it calls (``PERMISSIONS``, see ``jobs.adapters.permissions``)."""
