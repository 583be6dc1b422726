"""Who a request to the embedded API server comes from, and what RBAC allows them.

- ``authenticator.py``: bearer tokens (the admin token and a ``--token-auth-file``);
- ``authorizer.py``: RBAC evaluation over the stored Roles and bindings, for
  SubjectAccessReviews (requests themselves are not authorized).

The review endpoints are in ``endpoints/reviews.py``; the RBAC kinds' write rules and
bootstrap roles in ``registry/rbac.py``.
"""
