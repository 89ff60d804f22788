"""``gpu-jobs sweep``: idle GPU pods and leaked VRAM (per cluster), untagged GPU instances (per account)."""
