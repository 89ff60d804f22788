"""Azure Resource Manager, through the azure-mgmt SDKs: ``auth`` (credentials and client options, including an
overridden endpoint), ``errors`` (azure-core errors as ``jobs.errors``), ``operations`` (long-running operations
followed to the end), and one module per job's use of it (``nodegroups``). Each use module declares the ARM actions
it calls (``PERMISSIONS``, see ``jobs.adapters.permissions``)."""
