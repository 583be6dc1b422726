"""VolumeBinding's decisions (upstream ``pkg/scheduler/framework/plugins/volumebinding``).

Pure functions and values the plugin class calls once the framework wires storage
informers, Reserve/PreBind through the API and the group cycle (docs/volumes.md):

* ``claims.pre_filter``: is every claim usable, and which are bound (PreFilter);
* ``binder.find_pod_volumes``: one node's verdict, upstream's reference algorithm;
  ``filter_batch.filter_volumes``: the same verdict for a mask of nodes at once;
* ``topology.eligible_node_names``: the nodes bound local PVs pin the pod to;
* ``scorer``: StorageCapacityScoring;
* ``caches``: the PV and PVC assume caches; ``assume``: Reserve and Unreserve;
* ``prebind``: the API writes PreBind makes and the check it polls;
* ``args.VolumeBindingArgs``.

No plugin is registered yet: nothing here runs in a scheduling cycle.
"""
