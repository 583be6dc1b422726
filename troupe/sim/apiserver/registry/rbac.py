"""The RBAC kinds' write rules and the bootstrap roles of a new cluster.

RoleBindings and ClusterRoleBindings need a ``roleRef`` naming a Role or ClusterRole
(a ClusterRoleBinding: a ClusterRole) and at least a kind and name on each subject;
the ``roleRef`` cannot change on update (``cannot change roleRef``), as upstream's
validation says. The objects are only stored: nothing authorizes requests with them,
SubjectAccessReviews are evaluated against them (``auth/authorizer.py``).

``create_bootstrap_policy`` creates the part of upstream's bootstrap policy that
delegating components rely on: ``cluster-admin`` (everything, bound to ``system:masters``),
``system:auth-delegator`` (create TokenReviews and SubjectAccessReviews) and
``system:discovery`` (discovery and ``/version``, bound to ``system:authenticated``).
"""

from __future__ import annotations

import copy
from typing import Any, Final

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.registry.generic import GenericStrategy
from troupe.sim.apiserver.storage.store import Obj, Store

GROUP: Final = "rbac.authorization.k8s.io"
_BOOTSTRAP_LABELS: Final = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_AUTOUPDATE: Final = {"rbac.authorization.kubernetes.io/autoupdate": "true"}

BOOTSTRAP_CLUSTER_ROLES: Final[tuple[tuple[str, list[dict[str, Any]]], ...]] = (
    (
        "cluster-admin",
        [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]},
        ],
    ),
    (
        "system:auth-delegator",
        [
            {
                "apiGroups": ["authentication.k8s.io"],
                "resources": ["tokenreviews"],
                "verbs": ["create"],
            },
            {
                "apiGroups": ["authorization.k8s.io"],
                "resources": ["subjectaccessreviews"],
                "verbs": ["create"],
            },
        ],
    ),
    (
        "system:discovery",
        [
            {
                "nonResourceURLs": [
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
                "verbs": ["get"],
            }
        ],
    ),
)
BOOTSTRAP_BINDINGS: Final = (
    ("cluster-admin", "cluster-admin", "system:masters"),
    ("system:discovery", "system:discovery", "system:authenticated"),
)


class BindingStrategy(GenericStrategy):
    """RoleBinding and ClusterRoleBinding validation."""

    def prepare_create(self, store: Store, rt: ResourceType, obj: Obj) -> None:
        self._validate(rt, obj)

    def prepare_update(
        self, store: Store, rt: ResourceType, new: Obj, old: Obj, subresource: str | None
    ) -> None:
        self._validate(rt, new)
        if new.get("roleRef") != old.get("roleRef"):
            raise errors.invalid(
                rt,
                new["metadata"]["name"],
                [("roleRef", "FieldValueInvalid", "Invalid value: cannot change roleRef")],
            )

    @staticmethod
    def _validate(rt: ResourceType, obj: Obj) -> None:
        name = obj["metadata"].get("name", "")
        ref = obj.get("roleRef")
        causes: list[tuple[str, str, str]] = []
        kinds = ("ClusterRole",) if rt.kind == "ClusterRoleBinding" else ("Role", "ClusterRole")
        if not isinstance(ref, dict):
            causes.append(("roleRef", "FieldValueRequired", "Required value"))
        else:
            if ref.get("kind") not in kinds:
                causes.append(
                    (
                        "roleRef.kind",
                        "FieldValueNotSupported",
                        f'Unsupported value: "{ref.get("kind", "")}": supported values: '
                        + ", ".join(f'"{k}"' for k in kinds),
                    )
                )
            if not ref.get("name"):
                causes.append(("roleRef.name", "FieldValueRequired", "Required value"))
            if ref.get("apiGroup", GROUP) != GROUP:
                causes.append(
                    (
                        "roleRef.apiGroup",
                        "FieldValueNotSupported",
                        f'Unsupported value: "{ref.get("apiGroup")}": supported values: "{GROUP}"',
                    )
                )
        for i, subject in enumerate(obj.get("subjects") or ()):
            if not isinstance(subject, dict) or not subject.get("name"):
                causes.append((f"subjects[{i}].name", "FieldValueRequired", "Required value"))
            elif subject.get("kind") not in ("User", "Group", "ServiceAccount"):
                causes.append(
                    (
                        f"subjects[{i}].kind",
                        "FieldValueNotSupported",
                        f'Unsupported value: "{subject.get("kind", "")}": supported values: '
                        '"Group", "ServiceAccount", "User"',
                    )
                )
        if causes:
            raise errors.invalid(rt, name, causes)


def create_bootstrap_policy(store: Store) -> None:
    """Create the bootstrap roles and bindings (the binding strategy is declared in
    ``kinds.py``)."""

    def meta(name: str) -> Obj:
        return {"name": name, "labels": dict(_BOOTSTRAP_LABELS), "annotations": dict(_AUTOUPDATE)}

    for name, rules in BOOTSTRAP_CLUSTER_ROLES:
        role = {"metadata": meta(name), "rules": copy.deepcopy(rules)}
        store.create(f"clusterroles.{GROUP}", role, copy=False)
    for name, role_name, group in BOOTSTRAP_BINDINGS:
        binding = {
            "metadata": meta(name),
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role_name},
            "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": group}],
        }
        store.create(f"clusterrolebindings.{GROUP}", binding, copy=False)
