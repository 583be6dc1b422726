"""The what-if engine: troupe run offline on a copy of a cluster.

One engine under the offline commands (``troupe explain --offline`` and explain's
fixes, ``troupe snapshot``, ``troupe replay`` with ``--compare``, ``--add-nodes``,
``--remove-nodes`` and ``--add``), layered ``cli > whatif > scheduler``; it may use
``troupe.sim`` (the embedded cluster) and ``troupe.kube`` (reading a real one):

- ``read``: reading a cluster into a ``Snapshot`` (paged lists; the gang versions the
  server serves, through API discovery);
- ``state``: the snapshot as explain sees it (the target, its pods, modified copies);
- ``load``: a snapshot into an embedded cluster, and the replay's changes there;
- ``run``: a scheduler daemon on it, and the one loop that waits until it settles;
- ``replay``: one replay of a snapshot with one profile;
- ``attempt``: one attempt at explain's target, and the check of a fix;
- ``diagnosis``: the only reader of the scheduler's explain record;
- ``fit``: the fit check (what is free per node and domain against a member);
- ``fixes`` and ``free``: the fix search.

The engine never imports a plugin: the scheduler it runs builds them from the profile.
"""
