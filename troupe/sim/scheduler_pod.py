"""``troupe sim --serve``'s scheduler, shown to clients as a cluster shows one: a pod and
the leader Lease it holds.

In a cluster ``troupe explain`` finds the scheduler that serves by its leader Lease
(``holderIdentity`` ``<pod>_<uuid>``), reads that pod for its ``metrics`` port and
asks ``/debug/troupe/explain`` through the API server's pod proxy
(``troupe.kube.debug``). The embedded cluster's scheduler runs in the ``troupe sim``
process, with leader election off; ``SchedulerPod`` publishes it the same way so the
same client path works against it: a pod ``troupe-scheduler-sim`` in the Lease's
namespace, ``Running`` with ``podIP`` 127.0.0.1 and the endpoint's port as its
``metrics`` port, marked as a mirror pod and bound to ``troupe-sim-host`` — the host
the process runs on, which is no Node — so that nothing schedules it, no kubelet runs
it, and it is not one of the pending pods clients wait for; and the Lease
(``leaderElection.resourceNamespace``/``resourceName`` of the profile) held by
``troupe-scheduler-sim_<uuid>``, renewed by ``renew`` as a leader renews it. Written
through the store (in process), withdrawn on ``withdraw``. Called by
``troupe.cli.sim``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Final

from troupe.sim.apiserver.storage.store import Store

POD_NAME: Final = "troupe-scheduler-sim"
HOST: Final = "troupe-sim-host"  # the pod's spec.nodeName: no Node of that name exists
LEASE_SECONDS: Final = 15
RENEW_SECONDS: Final = 5.0
MIRROR: Final = "kubernetes.io/config.mirror"
LEASES: Final = "leases.coordination.k8s.io"


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SchedulerPod:
    def __init__(self, store: Store, *, namespace: str, lease: str, port: int) -> None:
        self.store = store
        self.namespace, self.lease, self.port = namespace, lease, port
        self.identity = f"{POD_NAME}_{uuid.uuid4()}"

    def _pod(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": POD_NAME,
                "namespace": self.namespace,
                "labels": {
                    "app.kubernetes.io/name": "troupe",
                    "app.kubernetes.io/component": "scheduler",
                },
                # A static pod's mirror: what troupe and the what-if engine never move.
                "annotations": {MIRROR: "troupe-sim"},
            },
            "spec": {
                "nodeName": HOST,
                "containers": [
                    {
                        "name": "troupe",
                        "image": "troupe",
                        "ports": [
                            {"name": "metrics", "containerPort": self.port, "protocol": "TCP"}
                        ],
                    }
                ],
            },
        }

    def publish(self) -> None:
        """Create (or replace) the pod and take the Lease."""
        store = self.store
        if store.find(store.resolve("pods"), self.namespace, POD_NAME) is not None:
            store.delete("pods", POD_NAME, self.namespace)
        store.create("pods", self._pod())
        now = _micro_time()
        status = {"phase": "Running", "podIP": "127.0.0.1", "hostIP": "127.0.0.1",
                  "startTime": now[:19] + "Z"}  # fmt: skip
        store.patch_status("pods", POD_NAME, status, self.namespace)
        lease: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.lease, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": LEASE_SECONDS,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        old = store.find(store.resolve(LEASES), self.namespace, self.lease)
        if old is None:
            store.create(LEASES, lease)
        else:
            lease["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            lease["spec"]["leaseTransitions"] = int(old["spec"].get("leaseTransitions") or 0) + 1
            store.update(LEASES, lease)

    def renew(self) -> None:
        store = self.store
        lease = store.find(store.resolve(LEASES), self.namespace, self.lease)
        if lease is None or lease["spec"].get("holderIdentity") != self.identity:
            return  # taken over or deleted: nothing of ours to renew
        lease = {**lease, "spec": {**lease["spec"], "renewTime": _micro_time()}}
        store.update(LEASES, lease)

    def withdraw(self) -> None:
        """Release the Lease (holder cleared, as a leader releasing it) and delete the pod."""
        store = self.store
        lease = store.find(store.resolve(LEASES), self.namespace, self.lease)
        if lease is not None and lease["spec"].get("holderIdentity") == self.identity:
            spec = {k: v for k, v in lease["spec"].items() if k != "holderIdentity"}
            store.update(LEASES, {**lease, "spec": spec})
        if store.find(store.resolve("pods"), self.namespace, POD_NAME) is not None:
            store.delete("pods", POD_NAME, self.namespace)
