"""The scheduler as a running service: the daemon (connection, informers, the loop,
leader election), cluster events in (``handlers``), log rendering and GC tuning.
"""
