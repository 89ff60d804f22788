"""gcp adapters."""
