"""What the scheduler reports about itself: Prometheus metrics with kube-scheduler's
names (``metrics``, the only place a metric is defined; ``fastmetrics`` for the hot
ones; ``scrape_state`` reads the state gauges from the queue and the cache) and
in-process attempt statistics (``stats``) for benchmarks and ``troupe sim``.
"""
