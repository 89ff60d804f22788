"""``gpu-jobs diff``: what a policy change does, rendered for a pull request, a terminal or a tool."""
