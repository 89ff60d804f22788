"""Google Cloud, through the google-cloud client libraries over REST: ``session`` (credentials, endpoints, call
options, an authorised session for plain REST reads), ``errors`` (API errors as ``jobs.errors``), ``operations``
(long-running operations followed to DONE), and one module per job's use of it (``nodegroups``). Each use module
declares the IAM permissions it needs (``PERMISSIONS``, see ``jobs.adapters.permissions``)."""
