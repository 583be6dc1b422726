"""``python -m bench chaos [--quick] [--seed N]``: troupe under faults, judged on invariants.

Two ``troupe run`` replicas with leader election schedule plain pods and gangs on the
embedded cluster while faults are injected at seeded moments: watch cuts and 410
Gone, 5xx and 429 bursts, binding 409s, slow responses (``ApiServer.faults``); the
leader killed (SIGKILL) mid-burst and mid-gang, and paused (SIGSTOP) past its Lease;
a node deleted mid-gang; a PodGroup deleted mid-cycle; malformed objects; pod
updates during a gang's binding; pods and gangs deleted and recreated under the same
names; the Lease deleted, given to the standby or set to a duration of 0 while the
leader binds. After the faults stop and the system settles, the run is judged from the
cluster and the server's write ledger: ``lost``, ``double_bound``, ``partial_gangs``
and ``writes_without_lease`` must all be 0 (docs/reliability.md).

- ``plan``: quick and long settings, the seeded fault order;
- ``replicas``: the two ``troupe run`` processes and their supervisor;
- ``workload``: pods, gangs, the controllers a cluster would run, binding tracking;
- ``malformed``: objects no scheduler can use;
- ``lease``: who held the Lease when, the replicas' fence closures, the Lease edits;
- ``faults``: one method per fault kind;
- ``verdict``: the invariants;
- ``run``: the run from start to JSON.
"""

from bench.chaos.run import add_arguments, run

__all__ = ["add_arguments", "run"]
