"""Adapters: the only modules that import cloud and Kubernetes SDKs, each imported only when the policy uses it."""
