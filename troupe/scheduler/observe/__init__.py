"""What the scheduler reports about itself: Prometheus metrics with kube-scheduler's
names (``metrics``, the only place a metric is defined; ``fastmetrics`` for the hot
ones) and in-process attempt statistics (``stats``) for benchmarks and ``troupe sim``.
"""
