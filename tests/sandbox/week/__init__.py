"""The simulated week (test infrastructure, moved by time): a seeded workload (:mod:`.workload`), a small scheduler
and Cluster Autoscaler model (:mod:`.model`), the strategies it is run under (:mod:`.strategies`: always-on, a naive
20:00/08:00 schedule, and gpu-jobs' real jobs against the sandbox's emulators) and the figures (:mod:`.figures`).
``bench/week.py`` runs them side by side over the same week and workload.
"""
