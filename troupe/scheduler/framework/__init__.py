"""The framework runtime: a profile's plugins and the runners of its extension points.

- ``runtime``: ``Framework``, one per profile, built complete (it is the handle its
  plugins are built with); the specialised PreFilter..Score runners;
- ``runners``: the one runner shape of every other extension point;
- ``binding_points`` / ``group_points``: ``Framework``'s runners of Reserve to
  PostBind and of the pod-group points;
- ``nominated``: room promised to nominated pods, kept in Filter;
- ``waiting_pods``: pods held at Permit;
- ``diagnosis`` / ``messages``: why a pod fits nowhere, in upstream's words.
"""
