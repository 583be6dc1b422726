"""Gang API discovery, gang informers and group status writes against the embedded API
server over HTTP (the production client path), plus the PodGroup CRD manifest."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from troupe.api.client import ApiError
from troupe.api.clock import RealClock
from troupe.api.gangapi import (
    CoschedulingPodGroup,
    PodGroup,
    V1alpha3Workload,
)
from troupe.api.gangapi_kinds import GroupObject
from troupe.api.gangs import POD_GROUP_LABEL, GangApi, GroupRef
from troupe.api.objects import Node, Pod
from troupe.api.tasks import TaskSupervisor
from troupe.kube import (
    HttpTransport,
    Informer,
    InformerConfig,
    KubeClient,
    RetryPolicy,
    SharedInformers,
    connect,
)
from troupe.kube.discovery import (
    served_gang_apis,
    served_gang_versions,
    served_templates_version,
)
from troupe.kube.gang_informers import (
    GANG_PATHS,
    add_gang_informers,
    gang_informers,
    templates_informer,
)
from troupe.scheduler.gangs import (
    GangDirectory,
    PodGroupStatusController,
    conditions_patch,
    pod_group_scheduled_condition,
    status_path,
)
from troupe.sim.apiserver.server import ApiServer
from troupe.sim.crds import POD_GROUP_CRD

from tests.kube.fakes import FakeTransport, reply

NS = "team-a"
MANIFEST = Path(__file__).parents[2] / "manifests" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
FAST = InformerConfig(watch_timeout=30.0, initial_backoff=0.01, max_backoff=0.05)


def manifest() -> dict[str, Any]:
    return dict(yaml.safe_load(MANIFEST.read_text()))


# --- the CRD manifest ------------------------------------------------------------------------


def test_the_manifest_is_the_crd_the_embedded_cluster_installs() -> None:
    crd, sim = manifest(), POD_GROUP_CRD
    assert (
        crd["apiVersion"] == "apiextensions.k8s.io/v1" and crd["kind"] == "CustomResourceDefinition"
    )
    assert crd["metadata"]["name"] == sim["metadata"]["name"] == "podgroups.scheduling.x-k8s.io"
    spec, sim_spec = crd["spec"], sim["spec"]
    assert (spec["group"], spec["scope"]) == (sim_spec["group"], sim_spec["scope"])
    for key in ("kind", "listKind", "plural", "singular", "shortNames"):
        assert spec["names"][key] == sim_spec["names"][key], key
    assert "pg" in spec["names"]["shortNames"]
    [version], [sim_version] = spec["versions"], sim_spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    sim_schema = sim_version["schema"]["openAPIV3Schema"]["properties"]
    for part in ("spec", "status"):
        assert set(schema[part]["properties"]) == set(sim_schema[part]["properties"]), part
    assert schema["spec"]["properties"]["minMember"]["minimum"] == 1
    assert schema["spec"]["properties"]["minResources"]["additionalProperties"][
        "x-kubernetes-int-or-string"
    ]
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Phase": ".status.phase",
        "MinMember": ".spec.minMember",
        "Running": ".status.running",
        "Succeeded": ".status.succeeded",
        "Failed": ".status.failed",
        "Age": ".metadata.creationTimestamp",
    }


# --- discovery against scripted replies ----------------------------------------------------


def group_list(*group_versions: str) -> dict[str, Any]:
    return {
        "kind": "APIGroupList",
        "groups": [
            {
                "name": gv.split("/")[0],
                "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
            }
            for gv in group_versions
        ],
    }


def resource_list(*resources: tuple[str, str]) -> dict[str, Any]:
    return {"kind": "APIResourceList", "resources": [{"name": n, "kind": k} for n, k in resources]}


async def test_discovery_of_a_server_without_apis_finds_nothing() -> None:
    transport = FakeTransport()
    transport.script("GET", "/apis", reply(404))
    assert await served_gang_apis(transport) == set()


async def test_a_group_version_that_vanishes_or_lacks_the_kind_is_not_served() -> None:
    transport = FakeTransport()
    transport.script("GET", "/apis", reply(200, group_list(*(api.value for api in GangApi))))
    transport.script("GET", "/apis/scheduling.x-k8s.io/v1alpha1", reply(404))
    transport.script(
        "GET",
        "/apis/scheduling.k8s.io/v1alpha1",
        reply(200, resource_list(("workloads", "Workload"))),
    )
    transport.script(
        "GET",
        "/apis/scheduling.k8s.io/v1alpha2",
        reply(200, resource_list(("workloads", "Workload"), ("podgroups/status", "PodGroup"))),
    )
    assert await served_gang_apis(transport) == {GangApi.WORKLOAD}


async def test_failing_discovery_raises_instead_of_guessing() -> None:
    transport = FakeTransport()
    transport.script("GET", "/apis", reply(200, group_list(GangApi.WORKLOAD.value)))
    transport.script("GET", "/apis/scheduling.k8s.io/v1alpha1", reply(503))
    with pytest.raises(ApiError) as err:
        await served_gang_apis(transport)
    assert err.value.status == 503


V1ALPHA3 = "/apis/scheduling.k8s.io/v1alpha3"
V1BETA1 = "/apis/scheduling.k8s.io/v1beta1"


@pytest.mark.parametrize(
    ("v1alpha3", "v1beta1", "expected"),
    [
        pytest.param(
            reply(200, resource_list(("workloads", "Workload"), ("compositepodgroups", "X"))),
            reply(200, resource_list(("workloads", "Workload"))),
            "scheduling.k8s.io/v1alpha3",
            id="1.37 with v1alpha3 Workloads: v1alpha3, the superset",
        ),
        pytest.param(
            reply(404),
            reply(200, resource_list(("workloads", "Workload"))),
            "scheduling.k8s.io/v1beta1",
            id="no v1alpha3: v1beta1",
        ),
        pytest.param(
            reply(200, resource_list(("compositepodgroups", "CompositePodGroup"))),
            reply(200, resource_list(("workloads", "Workload"))),
            "scheduling.k8s.io/v1beta1",
            id="v1alpha3 without Workloads: v1beta1",
        ),
        pytest.param(reply(404), reply(404), None, id="no template Workloads at all"),
    ],
)
async def test_the_template_workloads_are_watched_at_v1alpha3_where_served(
    v1alpha3: Any, v1beta1: Any, expected: str | None
) -> None:
    transport = FakeTransport()
    transport.script("GET", V1ALPHA3, v1alpha3)
    transport.script("GET", V1BETA1, v1beta1)
    assert await served_templates_version(transport, "scheduling.k8s.io/v1beta1") == expected


async def test_beside_the_v1alpha2_pod_group_the_template_workloads_stay_at_v1alpha2() -> None:
    transport = FakeTransport()
    transport.script("GET", V1ALPHA3, reply(200, resource_list(("workloads", "Workload"))))
    transport.script(
        "GET",
        "/apis/scheduling.k8s.io/v1alpha2",
        reply(200, resource_list(("workloads", "Workload"))),
    )
    version = await served_templates_version(transport, "scheduling.k8s.io/v1alpha2")
    assert version == "scheduling.k8s.io/v1alpha2"
    assert transport.calls("GET", V1ALPHA3) == []


# --- the embedded cluster ----------------------------------------------------------------------


@dataclass
class Cluster:
    server: ApiServer
    http: HttpTransport
    client: KubeClient

    async def send(
        self, method: str, path: str, body: Any = None, merge: bool = False
    ) -> dict[str, Any]:
        resp = await self.http.request(
            method,
            path,
            body=None if body is None else json.dumps(body).encode(),
            content_type="application/merge-patch+json" if merge else "application/json",
        )
        assert resp.ok, resp.body
        return dict(json.loads(resp.body)) if resp.body else {}

    async def install_crd(self) -> None:
        await self.send("POST", CRDS, manifest())

    async def create(self, api: GangApi, name: str, spec: dict[str, Any]) -> None:
        kind = "Workload" if api is GangApi.WORKLOAD else "PodGroup"
        body = {"apiVersion": api.value, "kind": kind, "metadata": {"name": name}, "spec": spec}
        await self.send("POST", namespaced(GANG_PATHS[api]), body)

    async def get(self, api: GangApi, name: str) -> dict[str, Any]:
        return await self.send("GET", f"{namespaced(GANG_PATHS[api])}/{name}")

    async def create_pod(self, name: str, group: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {POD_GROUP_LABEL: group}},
            "spec": {
                "schedulerName": "troupe-scheduler",
                "containers": [{"name": "c", "image": "x"}],
            },
        }
        await self.send("POST", f"/api/v1/namespaces/{NS}/pods", body)

    async def set_phase(self, name: str, phase: str) -> None:
        path = f"/api/v1/namespaces/{NS}/pods/{name}/status"
        await self.send("PATCH", path, {"status": {"phase": phase}}, merge=True)


def namespaced(all_namespaces_path: str) -> str:
    head, plural = all_namespaces_path.rsplit("/", 1)
    return f"{head}/namespaces/{NS}/{plural}"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    server = ApiServer(bookmark_interval=0.2)
    await server.start()
    api = await connect(str(server.write_kubeconfig(tmp_path / "kubeconfig")), None, False)
    client = KubeClient(
        api,
        RealClock(),
        qps=-1,
        burst=100,
        scheduler_name="troupe-scheduler",
        instance="test",
        retry=RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.05),
    )
    c = Cluster(server, HttpTransport(api), client)
    await c.send(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
    )
    try:
        yield c
    finally:
        await api.close()
        await server.stop()


async def eventually(check: Callable[[], Any], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def test_the_native_kinds_are_served_and_the_crd_once_installed(cluster: Cluster) -> None:
    assert await served_gang_apis(cluster.http) == {GangApi.WORKLOAD, GangApi.POD_GROUP}
    await cluster.install_crd()
    assert await served_gang_apis(cluster.http) == set(GangApi)


@pytest.mark.parametrize(
    ("versions", "expected"),
    [
        pytest.param(
            ("v1alpha1", "v1alpha2", "v1beta1"),
            "scheduling.k8s.io/v1beta1",
            id="1.37 serves v1alpha2 and v1beta1: only v1beta1 is watched",
        ),
        pytest.param(
            ("v1alpha1", "v1alpha2"),
            "scheduling.k8s.io/v1alpha2",
            id="1.36 serves v1alpha2 only: it is watched",
        ),
    ],
)
async def test_one_version_of_the_native_pod_group_is_watched(
    tmp_path: Path, versions: tuple[str, ...], expected: str
) -> None:
    async with ApiServer(workload_versions=versions) as server:
        api = await connect(str(server.write_kubeconfig(tmp_path / "kubeconfig")), None, False)
        try:
            served = await served_gang_versions(HttpTransport(api))
        finally:
            await api.close()
    assert served == {GangApi.WORKLOAD: "scheduling.k8s.io/v1alpha1", GangApi.POD_GROUP: expected}


@pytest.mark.parametrize(
    ("versions", "expected"),
    [
        pytest.param(
            ("v1alpha1", "v1alpha2", "v1beta1", "v1alpha3"),
            "/apis/scheduling.k8s.io/v1alpha3/workloads",
            id="1.37 with v1alpha3: the Workload at v1alpha3 only",
        ),
        pytest.param(
            ("v1alpha1", "v1alpha2", "v1beta1"),
            "/apis/scheduling.k8s.io/v1beta1/workloads",
            id="1.37 without v1alpha3: the Workload at v1beta1",
        ),
        pytest.param(
            ("v1alpha1", "v1alpha2"),
            "/apis/scheduling.k8s.io/v1alpha2/workloads",
            id="1.36: the Workload at v1alpha2",
        ),
    ],
)
async def test_one_version_of_the_template_workload_is_watched(
    tmp_path: Path, versions: tuple[str, ...], expected: str
) -> None:
    async with ApiServer(workload_versions=versions) as server:
        api = await connect(str(server.write_kubeconfig(tmp_path / "kubeconfig")), None, False)
        try:
            transport = HttpTransport(api)
            shared = SharedInformers(transport, RealClock(), NoClusterHandlers())
            await add_gang_informers(shared, RealClock(), enabled=(GangApi.POD_GROUP,))
        finally:
            await api.close()
    workloads = [i.path for i in shared.informers if i.path.endswith("/workloads")]
    assert workloads == [expected]


async def test_gang_informers_keep_the_directory_current(cluster: Cluster) -> None:
    await cluster.install_crd()
    directory = GangDirectory()

    def upsert(api: GangApi, _old: GroupObject, new: GroupObject) -> None:
        directory.upsert(api, new)

    def remove(api: GangApi, obj: GroupObject) -> None:
        directory.remove(api, obj.metadata.namespace, obj.metadata.name)

    informers = gang_informers(
        await served_gang_apis(cluster.http),
        cluster.http,
        RealClock(),
        on_add=directory.upsert,
        on_update=upsert,
        on_delete=remove,
        config=FAST,
    )
    assert [i.path for i in informers] == [GANG_PATHS[api] for api in GangApi]
    await cluster.create(GangApi.COSCHEDULING, "pg", {"minMember": 3, "minResources": {"cpu": "2"}})
    await cluster.create(
        GangApi.WORKLOAD,
        "w",
        {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 4}}}]},
    )
    supervisor = TaskSupervisor("informers")
    for informer in informers:
        supervisor.spawn(informer.run())
    try:
        cosched = GroupRef(GangApi.COSCHEDULING, NS, "pg")
        workers = GroupRef(GangApi.WORKLOAD, NS, "w", "workers", "r0")
        native = GroupRef(GangApi.POD_GROUP, NS, "native")
        await eventually(
            lambda: directory.policy(cosched) is not None and directory.policy(workers) is not None
        )
        policy = directory.policy(cosched)
        assert policy is not None and (policy.min_count, policy.min_resources) == (3, {"cpu": 2000})
        assert directory.policy(native) is None

        await cluster.create(
            GangApi.POD_GROUP, "native", {"schedulingPolicy": {"gang": {"minCount": 2}}}
        )
        await eventually(lambda: directory.policy(native) is not None)

        # troupe's CRD refuses minMember 0; scheduler-plugins' own CRD (no minimum)
        # accepts it: written into the store, past the schema, as such a cluster holds it.
        store = cluster.server.store
        group = store.get("podgroups.scheduling.x-k8s.io", "pg", NS)
        group["spec"]["minMember"] = 0
        store.update("podgroups.scheduling.x-k8s.io", group, NS)
        await eventually(lambda: directory.problem(cosched) is not None)
        problem = directory.problem(cosched)
        assert problem is not None and problem.field == "spec.minMember"

        await cluster.send("DELETE", f"{namespaced(GANG_PATHS[GangApi.WORKLOAD])}/w")
        await eventually(lambda: directory.policy(workers) is None)
    finally:
        for informer in informers:
            informer.stop()
        await supervisor.drain(timeout=2.0)


class NoClusterHandlers:
    def on_pod_add(self, pod: Pod) -> None: ...
    def on_pod_update(self, old: Pod, new: Pod) -> None: ...
    def on_pod_delete(self, pod: Pod) -> None: ...
    def on_node_add(self, node: Node) -> None: ...
    def on_node_update(self, old: Node, new: Node) -> None: ...
    def on_node_delete(self, node: Node) -> None: ...


@pytest.mark.parametrize(
    ("install", "enabled", "expected"),
    [
        pytest.param(
            False,
            tuple(GangApi),
            {GangApi.WORKLOAD, GangApi.POD_GROUP},
            id="an absent CRD is not watched",
        ),
        pytest.param(True, tuple(GangApi), set(GangApi), id="every served kind is watched"),
        pytest.param(
            True,
            (GangApi.COSCHEDULING,),
            {GangApi.COSCHEDULING},
            id="only enabled kinds are watched",
        ),
    ],
)
async def test_add_gang_informers_adds_the_served_kinds(
    cluster: Cluster, install: bool, enabled: tuple[GangApi, ...], expected: set[GangApi]
) -> None:
    if install:
        await cluster.install_crd()
    shared = SharedInformers(cluster.http, RealClock(), NoClusterHandlers())
    before = len(shared.informers)
    watched = await add_gang_informers(shared, RealClock(), enabled=enabled)
    assert set(watched) == expected
    # One version per API: the newest served (the embedded cluster serves v1beta1).
    paths = {GANG_PATHS[api] for api in expected if api is not GangApi.POD_GROUP}
    if GangApi.POD_GROUP in expected:
        assert watched[GangApi.POD_GROUP] == "scheduling.k8s.io/v1beta1"
        # The PodGroups, the Workloads whose templates they may name (at v1alpha3,
        # with their composite templates), and the CompositePodGroups (v1alpha3) they
        # may be children of.
        paths |= {
            "/apis/scheduling.k8s.io/v1beta1/podgroups",
            "/apis/scheduling.k8s.io/v1alpha3/workloads",
            "/apis/scheduling.k8s.io/v1alpha3/compositepodgroups",
        }
    assert {i.path for i in shared.informers[before:]} == paths


async def test_the_status_controller_writes_podgroup_status_as_pods_move(cluster: Cluster) -> None:
    await cluster.install_crd()
    clock = RealClock()
    supervisor = TaskSupervisor("test")
    controller = PodGroupStatusController(cluster.client.merge_patch, clock, min_interval=0.05)
    pods: Informer[Pod] = Informer(
        cluster.http,
        "/api/v1/pods",
        Pod,
        clock,
        on_add=controller.on_pod_add,
        on_update=controller.on_pod_update,
        on_delete=controller.on_pod_delete,
        config=FAST,
    )

    def group_update(_: GangApi, old: GroupObject, new: GroupObject) -> None:
        assert isinstance(old, CoschedulingPodGroup) and isinstance(new, CoschedulingPodGroup)
        controller.on_group_update(old, new)

    def group_event(
        handler: Callable[[CoschedulingPodGroup], None],
    ) -> Callable[[GangApi, GroupObject], None]:
        def call(_: GangApi, obj: GroupObject) -> None:
            assert isinstance(obj, CoschedulingPodGroup)
            handler(obj)

        return call

    [groups] = gang_informers(
        {GangApi.COSCHEDULING},
        cluster.http,
        clock,
        on_add=group_event(controller.on_group_add),
        on_update=group_update,
        on_delete=group_event(controller.on_group_delete),
        config=FAST,
    )
    await cluster.create(GangApi.COSCHEDULING, "pg", {"minMember": 2})
    for informer in (pods, groups):
        supervisor.spawn(informer.run())

    async def phase_is(phase: str, **counts: int) -> bool:
        status = (await cluster.get(GangApi.COSCHEDULING, "pg")).get("status", {})
        return status.get("phase") == phase and all(status.get(k) == v for k, v in counts.items())

    try:
        await eventually(lambda: phase_is("Pending"))
        await cluster.create_pod("a", "pg")
        await cluster.create_pod("b", "pg")
        await eventually(lambda: phase_is("Scheduling"))
        started = (await cluster.get(GangApi.COSCHEDULING, "pg"))["status"]["scheduleStartTime"]
        await cluster.set_phase("a", "Running")
        await cluster.set_phase("b", "Running")
        await eventually(lambda: phase_is("Running", running=2))
        await cluster.set_phase("a", "Succeeded")
        await cluster.set_phase("b", "Succeeded")
        await eventually(lambda: phase_is("Finished", running=0, succeeded=2))
        status = (await cluster.get(GangApi.COSCHEDULING, "pg"))["status"]
        assert status["scheduleStartTime"] == started
        writes = controller.writes
        await asyncio.sleep(0.2)  # the informer's echo of our writes causes no more writes
        assert controller.writes == writes
    finally:
        pods.stop()
        groups.stop()
        await supervisor.drain(timeout=2.0)
        await controller.close()


async def test_pod_group_scheduled_is_written_and_never_regresses(cluster: Cluster) -> None:
    await cluster.create(
        GangApi.POD_GROUP, "native", {"schedulingPolicy": {"gang": {"minCount": 2}}}
    )
    path = status_path(GangApi.POD_GROUP, NS, "native")
    assert path == f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{NS}/podgroups/native/status"

    async def conditions() -> list[Any]:
        return PodGroup.model_validate(
            await cluster.get(GangApi.POD_GROUP, "native")
        ).status.conditions

    failed = pod_group_scheduled_condition(
        await conditions(), "Unschedulable", "0/3 nodes", time.time()
    )
    await cluster.client.merge_patch(path, conditions_patch(failed))
    [written] = await conditions()
    assert (written.status, written.reason, written.message) == (
        "False",
        "Unschedulable",
        "0/3 nodes",
    )

    scheduled = pod_group_scheduled_condition(await conditions(), "Scheduled", "", time.time())
    await cluster.client.merge_patch(path, conditions_patch(scheduled))
    [written] = await conditions()
    assert (written.status, written.reason) == ("True", "Scheduled")

    assert pod_group_scheduled_condition(
        await conditions(), "SchedulerError", "x", time.time()
    ) == [written]


@pytest.mark.parametrize("version", ["scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha2"])
async def test_a_workload_of_composite_templates_reaches_the_templates_informer_without_them(
    cluster: Cluster, version: str
) -> None:
    # compositePodGroupTemplates exist at v1alpha3 only: the watched version shows a
    # Workload with no templates, which parses and names none.
    composite_only = {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "Workload",
        "metadata": {"name": "job"},
        "spec": {
            "compositePodGroupTemplates": [
                {
                    "name": "job",
                    "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                    "podGroupTemplates": [
                        {"name": "driver", "schedulingPolicy": {"gang": {"minCount": 1}}}
                    ],
                }
            ]
        },
    }
    await cluster.send(
        "POST", f"/apis/scheduling.k8s.io/v1alpha3/namespaces/{NS}/workloads", composite_only
    )
    seen: list[Any] = []
    informer = templates_informer(
        cluster.http,
        RealClock(),
        on_add=lambda _api, obj: seen.append(obj),
        config=FAST,
        api_version=version,
    )
    supervisor = TaskSupervisor("informers")
    supervisor.spawn(informer.run())
    try:
        await eventually(lambda: bool(seen))
        assert seen[0].metadata.name == "job"
        assert seen[0].spec.pod_group_templates == []
        assert not hasattr(seen[0].spec, "composite_pod_group_templates")
    finally:
        informer.stop()
        await supervisor.drain(timeout=2.0)


async def test_at_v1alpha3_the_templates_informer_delivers_the_composite_templates(
    cluster: Cluster,
) -> None:
    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "Workload",
        "metadata": {"name": "job"},
        "spec": {
            "compositePodGroupTemplates": [
                {
                    "name": "root",
                    "schedulingPolicy": {"gang": {"minGroupCount": 1}},
                    "compositePodGroupTemplates": [
                        {
                            "name": "replica",
                            "schedulingPolicy": {"gang": {"minGroupCount": 1}},
                            "podGroupTemplates": [
                                {"name": "driver", "schedulingPolicy": {"gang": {"minCount": 1}}}
                            ],
                        }
                    ],
                }
            ]
        },
    }
    await cluster.send(
        "POST", f"/apis/scheduling.k8s.io/v1alpha3/namespaces/{NS}/workloads", workload
    )
    seen: list[Any] = []
    informer = templates_informer(
        cluster.http,
        RealClock(),
        on_add=lambda _api, obj: seen.append(obj),
        config=FAST,
        api_version="scheduling.k8s.io/v1alpha3",
    )
    supervisor = TaskSupervisor("informers")
    supervisor.spawn(informer.run())
    try:
        await eventually(lambda: bool(seen))
        assert isinstance(seen[0], V1alpha3Workload)
        (root,) = seen[0].spec.composite_pod_group_templates
        (replica,) = root.composite_pod_group_templates
        assert (root.name, replica.name) == ("root", "replica")
        assert [t.name for t in replica.pod_group_templates] == ["driver"]
        assert replica.pod_group_templates[0].scheduling_policy.gang is not None
    finally:
        informer.stop()
        await supervisor.drain(timeout=2.0)
