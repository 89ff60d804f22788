"""aws adapters."""
