"""``SimCluster``: the embedded API server, simulated nodes and their kubelets in one object.

``start`` serves the API on loopback, installs the scheduler-plugins PodGroup CRD (unless
``install_crds=False``), creates the nodes of every ``NodeSpec`` and starts the kubelet
task, which runs a kubelet for every node however it is created (``Kubelets``: a node
created through the API gets one too, unless annotated ``troupe.dev/kubelet: none``).
``add_nodes`` and ``remove_node`` change the cluster at runtime (removing a node also
deletes the pods bound to it, as the pod garbage collector would). Used by
``troupe sim``, integration tests and benchmarks; everything else talks to it over HTTP
(``url``, ``write_kubeconfig``) or in-process through ``store``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from troupe.api.clock import Clock, RealClock
from troupe.sim.apiserver.auth.authenticator import TokenUsers
from troupe.sim.apiserver.registry.bootstrap import WORKLOAD_VERSIONS
from troupe.sim.apiserver.server import ApiServer
from troupe.sim.apiserver.storage.store import Store
from troupe.sim.crds import POD_GROUP_CRD
from troupe.sim.kubelet import HEARTBEAT_SECONDS, Kubelets
from troupe.sim.nodespec import NodeSpec


class SimCluster:
    def __init__(
        self,
        nodes: Sequence[NodeSpec] = (),
        *,
        kubelet_delay: float = 0.0,
        heartbeat: float | None = HEARTBEAT_SECONDS,
        install_crds: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
        bookmark_interval: float = 60.0,
        history: int = 10000,
        clock: Clock | None = None,
        workload_versions: Iterable[str] = WORKLOAD_VERSIONS,
        token_users: TokenUsers | None = None,
    ) -> None:
        """``workload_versions``: the ``scheduling.k8s.io`` versions of Workload and
        PodGroup served (default: all three, as Kubernetes 1.37); ``heartbeat``: seconds
        between a node's status heartbeats (None: none); ``token_users``: the users of
        a ``--token-auth-file`` the API server authenticates
        (``apiserver/auth/authenticator.py``)."""
        self.clock: Clock = clock or RealClock()
        self.server = ApiServer(
            host,
            port,
            bookmark_interval=bookmark_interval,
            history=history,
            clock=self.clock,
            workload_versions=workload_versions,
            token_users=token_users,
        )
        self.kubelets = Kubelets(
            self.server.store, self.clock, delay=kubelet_delay, heartbeat=heartbeat
        )
        self.install_crds = install_crds
        self._specs = list(nodes)
        self._next_index: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def store(self) -> Store:
        return self.server.store

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def node_names(self) -> list[str]:
        """Every node of the cluster (with a kubelet or not), sorted."""
        return sorted(n["metadata"]["name"] for n in self.store.list("nodes", copy=False))

    async def start(self) -> str:
        """Serve, install CRDs, create the nodes and start the kubelets; returns the URL."""
        url = await self.server.start()
        if self.install_crds:
            self.store.create("customresourcedefinitions.apiextensions.k8s.io", POD_GROUP_CRD)
        for spec in self._specs:
            self.add_nodes(spec)
        self._task = asyncio.get_running_loop().create_task(self.kubelets.run())
        return url

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.server.stop()

    async def __aenter__(self) -> SimCluster:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def write_kubeconfig(self, path: str | Path, *, token: str = "") -> Path:
        return self.server.write_kubeconfig(path, token=token)

    def add_nodes(self, spec: NodeSpec) -> list[str]:
        """Create ``spec.count`` more nodes (numbering continues per name prefix)."""
        start = self._next_index.get(spec.name_prefix, 0)
        names = []
        for index in range(start, start + spec.count):
            node = spec.node(index, self.store.now(), self.kubelets.next_address())
            name = node["metadata"]["name"]
            self.store.create("nodes", node, copy=False)
            names.append(name)
        self._next_index[spec.name_prefix] = start + spec.count
        return names

    def remove_node(self, name: str) -> None:
        """Delete a node and, as the pod garbage collector would, the pods bound to it."""
        self.store.delete("nodes", name)
        for pod in self.store.list("pods", field_selector=f"spec.nodeName={name}", copy=False):
            meta = pod["metadata"]
            self.store.delete("pods", meta["name"], meta["namespace"], grace_period_seconds=0)
