"""The ``nodegroups`` job: GPU node groups to zero outside working hours, and back."""
