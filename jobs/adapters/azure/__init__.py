"""azure adapters."""
