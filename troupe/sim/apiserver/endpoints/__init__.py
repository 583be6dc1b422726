"""What answers HTTP in the embedded API server, as k8s.io/apiserver's endpoints do.

- ``request.py``: the parsed request, body decoding, selector parameters;
- ``handlers.py``: get, list, create, update, patch, delete, deletecollection and the
  pod subresources; ``watch.py``: watch streams;
- ``discovery.py``, ``openapi.py``: what clients learn about the served kinds;
- ``table.py``: server-side printing for kubectl;
- ``reviews.py``: TokenReviews and SubjectAccessReviews.

``server.ApiServer`` routes every request here.
"""
