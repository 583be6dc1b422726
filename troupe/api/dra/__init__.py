"""Dynamic Resource Allocation (``resource.k8s.io/v1``) for the scheduler and the
embedded cluster: the API models (``objects``) and the CEL device selectors (``cel``,
with Kubernetes' functions in ``cel_library``).

The models are imported by both the DynamicResources plugin
(``troupe.plugins.dynamicresources``) and ``troupe.sim``; the CEL modules only by the
plugin side (they load the CEL runtime). Nothing is re-exported here, so importing the
models never loads the CEL runtime.
"""
