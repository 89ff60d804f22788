"""The pure core: policy model, schedule engine and planners. No I/O, no clock, no SDKs (import-linter)."""
