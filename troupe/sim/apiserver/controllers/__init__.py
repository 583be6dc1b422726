"""What runs beside the embedded API server's store, as kube-controller-manager would.

- ``disruption.py``: keeps every PodDisruptionBudget's status current as pods and PDBs
  change (the eviction subresource reads it).

The simulated kubelets and the other actors of the embedded cluster live in
``troupe/sim/`` and talk to the store the same way.
"""
