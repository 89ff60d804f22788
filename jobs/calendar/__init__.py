"""``gpu-jobs calendar``: desired states, next changes and a week grid per node group, rendered for a terminal, a
pull request or a tool."""
