"""Every kind the embedded API server serves, and the rules its writes follow.

To add a built-in resource, add a ``Served`` entry to ``kinds.py``: its
``ResourceType`` and, if it has rules of its own, a ``GenericStrategy`` subclass in a
module of its own here (defaults, validation, update and delete rules). Nothing else
needs an edit: routing, discovery, OpenAPI and the store read the table.

- ``kinds.py``: the table; ``bootstrap.py``: ``new_store``, a new cluster's store;
- ``generic.py``: what every kind's API writes pass (custom resources: their CRD's
  schema, ``crd_schema.py``);
- one module per kind with rules: ``pods.py`` (with ``pod_update.py``,
  ``quantities.py``, and the subresources ``binding.py`` and ``eviction.py``),
  ``nodes.py``, ``namespaces.py``, ``events.py``, ``podgroups.py``, ``workloads.py``,
  ``composites.py``, ``rbac.py``, ``crds.py``.

Upstream's counterparts: pkg/registry/<group>/<kind>/strategy.go and
pkg/apis/<group>/validation.
"""
