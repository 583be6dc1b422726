"""Pod defaults, admission and graceful deletion in the embedded API server.

``PodStrategy.prepare_create`` applies the defaults the scheduler observes (schedulerName,
priority from the Priority admission plugin, requests defaulted from limits, the
DefaultTolerationSeconds tolerations, phase Pending) and refuses what upstream refuses
(403 for an unknown PriorityClass, 422 for a pod without containers); ``prepare_update``
defaults an update the same way and enforces spec immutability (``pod_update.py``).
A write through the API must also have the types of ``schemas.POD``, valid quantities
(``quantities.py``) and, on create, what ``pod_validation.py`` checks.
``grace_period`` is ``pod.Strategy.CheckGracefulDelete``: bound, non-terminal pods wait
``terminationGracePeriodSeconds`` with a deletionTimestamp; the simulated kubelet (or,
failing that, the server once the grace period is over) finishes the delete.
Binding and eviction are in ``binding.py`` and ``eviction.py``.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.field import Cause
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.registry.generic import GenericStrategy
from troupe.sim.apiserver.registry.pod_update import validate_pod_update
from troupe.sim.apiserver.registry.pod_validation import pod_create_causes
from troupe.sim.apiserver.registry.quantities import validate_pod
from troupe.sim.apiserver.registry.schemas import POD
from troupe.sim.apiserver.storage.store import Obj, Store
from troupe.sim.apiserver.storage.watchers import MODIFIED, WatchEvent

DEFAULT_SCHEDULER: Final = "default-scheduler"
DEFAULT_GRACE: Final = 30
TERMINAL_PHASES: Final = ("Succeeded", "Failed")
# plugin/pkg/admission/defaulttolerationseconds: 300 s for not-ready and unreachable.
_DEFAULT_TOLERATIONS: Final = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)
SYSTEM_PRIORITY_CLASSES: Final = (
    (
        "system-node-critical",
        2000001000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2000000000,
        "Used for system critical pods that must run in the cluster, but can be moved to "
        "another node if necessary.",
    ),
)


def _default_container(container: dict[str, Any]) -> None:
    image = str(container.get("image", ""))
    tag = image.rsplit("/", 1)[-1]
    if "imagePullPolicy" not in container:
        latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
        container["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    resources = container.get("resources")
    if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
        # SetDefaults_Pod: a limit without a request defaults the request to the limit.
        requests = dict(resources.get("requests") or {})
        for name, value in resources["limits"].items():
            requests.setdefault(name, value)
        resources["requests"] = requests
    elif resources is None:
        container["resources"] = {}


def _default_spec(spec: dict[str, Any]) -> None:
    """SetDefaults_PodSpec and the container defaults (not admission)."""
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", DEFAULT_GRACE)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or []:
            if isinstance(container, dict):
                _default_container(container)


def _default_tolerations(spec: dict[str, Any]) -> None:
    """The DefaultTolerationSeconds admission plugin (on create and update)."""
    tolerations = list(spec.get("tolerations") or [])
    for default in _DEFAULT_TOLERATIONS:
        if not any(
            t.get("key") == default["key"] and t.get("effect") in (None, "", "NoExecute")
            for t in tolerations
        ):
            tolerations.append(dict(default))
    spec["tolerations"] = tolerations


class PodStrategy(GenericStrategy):
    schema = POD

    def prepare_create(self, store: Store, rt: ResourceType, obj: Obj) -> None:
        spec = obj.get("spec")
        name = obj["metadata"]["name"]
        if not isinstance(spec, dict) or not spec.get("containers"):
            raise errors.invalid(
                rt, name, [("spec.containers", "FieldValueRequired", "Required value")]
            )
        _default_spec(spec)
        _default_tolerations(spec)
        _admit_priority(store, rt, obj)
        # pod.Strategy.PrepareForCreate: a new pod's status is reset to Pending.
        obj["status"] = {"phase": "Pending"}

    def prepare_update(
        self, store: Store, rt: ResourceType, new: Obj, old: Obj, subresource: str | None
    ) -> None:
        if subresource == "status":
            return
        spec = new.get("spec")
        if isinstance(spec, dict):
            # An update body is defaulted like a create; the Priority admission plugin
            # keeps the priority it resolved at creation when the update leaves it out.
            # (A patch may share sub-dicts with the stored object: default a copy.)
            spec = new["spec"] = copy.deepcopy(spec)
            _default_spec(spec)
            _default_tolerations(spec)
            for field in ("priority", "preemptionPolicy", "priorityClassName"):
                if field not in spec and field in old.get("spec", {}):
                    spec[field] = old["spec"][field]
        validate_pod_update(rt, new, old)

    def validate(
        self, store: Store, rt: ResourceType, obj: Obj, old: Obj | None, subresource: str | None
    ) -> None:
        if subresource != "status":  # the status strategy validates status only
            validate_pod(rt, obj)  # an unparsable quantity is the decoder's 400, first
        super().validate(store, rt, obj, old, subresource)

    def causes(
        self, store: Store, rt: ResourceType, obj: Obj, old: Obj | None, subresource: str | None
    ) -> list[Cause]:
        return pod_create_causes(obj.get("spec")) if old is None else []

    def grace_period(self, store: Store, rt: ResourceType, obj: Obj, requested: int | None) -> int:
        # pod.Strategy.CheckGracefulDelete: unscheduled or terminal pods go at once.
        spec = obj.get("spec") or {}
        if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return 0
        grace = (
            requested
            if requested is not None
            else spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE)
        )
        return max(0, int(grace if grace is not None else DEFAULT_GRACE))

    def after_write(self, store: Store, rt: ResourceType, event: WatchEvent) -> None:
        if event.type != MODIFIED:
            return
        meta = event.obj["metadata"]
        grace = meta.get("deletionGracePeriodSeconds")
        if grace and not (event.prev or {}).get("metadata", {}).get("deletionTimestamp"):
            store.spawn(
                _reap_after(store, rt, meta.get("namespace", ""), meta["name"], meta["uid"], grace)
            )


async def _reap_after(
    store: Store, rt: ResourceType, namespace: str, name: str, uid: str, grace: float
) -> None:
    """Finish a graceful delete nobody else finished (no kubelet running for the node)."""
    await store.clock.sleep(grace)
    pod = store.find(rt, namespace, name)
    if pod is not None and pod["metadata"]["uid"] == uid:
        store.delete(
            rt, name, namespace, grace_period_seconds=0, preconditions={"uid": uid}, copy=False
        )


def _admit_priority(store: Store, rt: ResourceType, obj: Obj) -> None:
    """plugin/pkg/admission/priority: resolve spec.priority from the PriorityClass."""
    spec = obj["spec"]
    meta = obj["metadata"]
    display = meta.get("name") or meta.get("generateName") or "Unknown"
    pcs = store.resolve("priorityclasses.scheduling.k8s.io")
    class_name = spec.get("priorityClassName") or ""
    priority, preemption = 0, "PreemptLowerPriority"
    if class_name:
        pc = store.find(pcs, "", class_name)
        if pc is None:
            raise errors.forbidden(
                rt, display, f"no PriorityClass with name {class_name} was found"
            )
        priority = int(pc.get("value", 0))
        preemption = pc.get("preemptionPolicy") or preemption
    else:
        default = min(
            (pc for pc in store.objects(pcs).values() if pc.get("globalDefault")),
            key=lambda pc: (pc["metadata"].get("creationTimestamp", ""), pc["metadata"]["name"]),
            default=None,
        )
        if default is not None:
            spec["priorityClassName"] = default["metadata"]["name"]
            priority = int(default.get("value", 0))
            preemption = default.get("preemptionPolicy") or preemption
    if spec.get("priority") is not None and spec["priority"] != priority:
        raise errors.forbidden(
            rt,
            display,
            f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
            f"priority admission controller computed {priority} from the given PriorityClass name",
        )
    if spec.get("preemptionPolicy") and spec["preemptionPolicy"] != preemption and class_name:
        raise errors.forbidden(
            rt,
            display,
            f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be "
            "provided in "
            f"pod spec; priority admission controller computed {preemption} from the given "
            "PriorityClass name",
        )
    spec["priority"] = priority
    spec["preemptionPolicy"] = spec.get("preemptionPolicy") or preemption


__all__ = ["DEFAULT_SCHEDULER", "SYSTEM_PRIORITY_CLASSES", "TERMINAL_PHASES", "PodStrategy"]
