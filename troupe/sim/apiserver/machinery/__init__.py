"""What every part of the embedded API server shares, as k8s.io/apimachinery does.

- ``resources.py``: ``ResourceType`` (one served group/version/resource) and
  ``Registry``, the live index of served types (CRDs add and remove theirs);
- ``errors.py``: ``metav1.Status`` failures (``ApiError``) with upstream's wording;
- ``meta.py``: timestamps, UIDs, generated names, deep copies of JSON values;
- ``selectors.py``: label and field selectors from query strings;
- ``patch.py``: JSON merge, strategic merge and JSON patches;
- ``encoding.py``: the JSON every response and watch event is written in.

Nothing here imports another part of the server.
"""
