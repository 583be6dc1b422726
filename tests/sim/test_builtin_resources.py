"""The built-in kinds a kube-scheduler lists besides pods and nodes (services, the
workload controllers, volumes and storage, dynamic resource allocation): served for
storage only, with the scope, short names, status subresources, discovery and OpenAPI
entries of a real API server, checked with kubectl, raw HTTP and the typed client."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Final

import pytest
from kubernetes_asyncio import client, watch

from tests.sim.conftest import Http, kubectl

TEMPLATE: Final = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
}
SELECTOR: Final = {"matchLabels": {"app": "web"}}
CLAIM_SPEC: Final = {
    "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}
}


class Kind:
    def __init__(
        self,
        api_version: str,
        kind: str,
        plural: str,
        namespaced: bool,
        body: dict[str, Any],
        short: str = "",
        status: bool = False,
    ) -> None:
        self.api_version, self.kind, self.plural = api_version, kind, plural
        self.namespaced, self.body, self.short, self.status = namespaced, body, short, status
        self.name = f"{kind.lower()}-1"

    @property
    def collection(self) -> str:
        prefix = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        scope = "/namespaces/default" if self.namespaced else ""
        return f"{prefix}{scope}/{self.plural}"

    @property
    def printed(self) -> str:
        """How kubectl names the kind in its output: ``service``, ``deployment.apps``."""
        group = self.api_version.rpartition("/")[0]
        return f"{self.kind.lower()}.{group}" if group else self.kind.lower()

    def manifest(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "labels": {"app": "web"}}
        if self.namespaced:
            meta["namespace"] = "default"
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": meta, **self.body}


KINDS: Final = (
    Kind(
        "v1",
        "Service",
        "services",
        True,
        {"spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}},
        "svc",
        True,
    ),
    Kind(
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        True,
        {"spec": {"replicas": 1, "selector": {"app": "web"}, "template": TEMPLATE}},
        "rc",
        True,
    ),
    Kind(
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        False,
        {
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/tmp/pv"},
                "storageClassName": "standard",
            }
        },
        "pv",
        True,
    ),
    Kind(
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        True,
        {
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "storageClassName": "standard",
            }
        },
        "pvc",
        True,
    ),
    Kind(
        "apps/v1",
        "Deployment",
        "deployments",
        True,
        {"spec": {"replicas": 1, "selector": SELECTOR, "template": TEMPLATE}},
        "deploy",
        True,
    ),
    Kind(
        "apps/v1",
        "ReplicaSet",
        "replicasets",
        True,
        {"spec": {"replicas": 1, "selector": SELECTOR, "template": TEMPLATE}},
        "rs",
        True,
    ),
    Kind(
        "apps/v1",
        "StatefulSet",
        "statefulsets",
        True,
        {
            "spec": {
                "replicas": 1,
                "serviceName": "web",
                "selector": SELECTOR,
                "template": TEMPLATE,
            }
        },
        "sts",
        True,
    ),
    Kind(
        "storage.k8s.io/v1",
        "StorageClass",
        "storageclasses",
        False,
        {"provisioner": "example.com/fake", "volumeBindingMode": "WaitForFirstConsumer"},
        "sc",
    ),
    Kind(
        "storage.k8s.io/v1",
        "CSINode",
        "csinodes",
        False,
        {"spec": {"drivers": [{"name": "example.com/csi", "nodeID": "node-0"}]}},
    ),
    Kind(
        "storage.k8s.io/v1", "CSIDriver", "csidrivers", False, {"spec": {"attachRequired": False}}
    ),
    Kind(
        "storage.k8s.io/v1",
        "CSIStorageCapacity",
        "csistoragecapacities",
        True,
        {"storageClassName": "standard", "capacity": "10Gi"},
    ),
    Kind(
        "storage.k8s.io/v1",
        "VolumeAttachment",
        "volumeattachments",
        False,
        {
            "spec": {
                "attacher": "example.com/csi",
                "nodeName": "node-0",
                "source": {"persistentVolumeName": "persistentvolume-1"},
            }
        },
        status=True,
    ),
    Kind(
        "resource.k8s.io/v1",
        "DeviceClass",
        "deviceclasses",
        False,
        {"spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}},
    ),
    Kind(
        "resource.k8s.io/v1",
        "ResourceClaim",
        "resourceclaims",
        True,
        {"spec": CLAIM_SPEC},
        status=True,
    ),
    Kind(
        "resource.k8s.io/v1",
        "ResourceClaimTemplate",
        "resourceclaimtemplates",
        True,
        {"spec": {"spec": CLAIM_SPEC}},
    ),
    Kind(
        "resource.k8s.io/v1",
        "ResourceSlice",
        "resourceslices",
        False,
        {
            "spec": {
                "driver": "gpu.example.com",
                "pool": {"name": "node-0", "generation": 1, "resourceSliceCount": 1},
                "nodeName": "node-0",
                "devices": [{"name": "gpu-0"}],
            }
        },
    ),
)
ALL_PLURALS: Final = ",".join(k.plural for k in KINDS)


def by_id(kind: Kind) -> str:
    return kind.plural


async def test_api_resources_lists_scope_and_short_names(kubeconfig: Path) -> None:
    code, out, err = await kubectl(kubeconfig, "api-resources")
    assert code == 0, err
    rows = {" ".join(line.split()) for line in out.splitlines()}
    for k in KINDS:
        cells = [k.plural, k.short, k.api_version, str(k.namespaced).lower(), k.kind]
        assert " ".join(c for c in cells if c) in rows


async def test_get_every_kind_on_a_fresh_cluster(kubeconfig: Path) -> None:
    short = "sc,pv,pvc,svc,rs,sts,deploy,rc,csinodes,csidrivers,csistoragecapacities,"
    short += "volumeattachments,deviceclasses,resourceclaims,resourceclaimtemplates,resourceslices"
    assert await kubectl(kubeconfig, "get", short, "-A") == (0, "", "No resources found\n")


async def test_kubectl_create_get_list_patch_delete(kubeconfig: Path) -> None:
    # YAML documents (each in JSON flow style): kubectl validates a List's items only
    # client-side, against /openapi/v2, which the server does not publish.
    manifests = "".join(f"---\n{json.dumps(k.manifest())}\n" for k in KINDS)
    code, out, err = await kubectl(kubeconfig, "create", "-f", "-", stdin=manifests)
    assert code == 0, err
    assert out.splitlines() == [f"{k.printed}/{k.name} created" for k in KINDS]

    refs = [f"{k.plural}/{k.name}" for k in KINDS]
    code, out, err = await kubectl(kubeconfig, "get", *refs, "-o", "json")
    assert code == 0, err
    items = json.loads(out)["items"]
    assert [(i["apiVersion"], i["kind"], i["metadata"]["name"]) for i in items] == [
        (k.api_version, k.kind, k.name) for k in KINDS
    ]
    for item in items:
        meta = item["metadata"]
        assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"]
    phases = {i["kind"]: i.get("status", {}).get("phase") for i in items}
    assert phases["PersistentVolume"] == phases["PersistentVolumeClaim"] == "Pending"

    code, out, err = await kubectl(kubeconfig, "get", ALL_PLURALS, "-A", "-o", "name")
    assert code == 0, err
    assert len(out.splitlines()) == len(KINDS)
    code, out, err = await kubectl(kubeconfig, "get", ALL_PLURALS, "-A")
    assert code == 0, err
    assert all(k.name in out for k in KINDS)

    for k in KINDS:
        code, out, err = await kubectl(
            kubeconfig, "patch", k.plural, k.name, "-p", '{"metadata":{"labels":{"tier":"x"}}}'
        )
        assert (code, out) == (0, f"{k.printed}/{k.name} patched\n"), err
    code, out, err = await kubectl(
        kubeconfig, "get", ALL_PLURALS, "-A", "-l", "tier=x", "-o", "name"
    )
    assert (code, len(out.splitlines())) == (0, len(KINDS)), err

    code, out, err = await kubectl(kubeconfig, "delete", "-f", "-", stdin=manifests)
    assert code == 0, err
    assert out.splitlines() == [f'{k.printed} "{k.name}" deleted' for k in KINDS]
    assert await kubectl(kubeconfig, "get", ALL_PLURALS, "-A") == (0, "", "No resources found\n")


@pytest.mark.parametrize("kind", KINDS, ids=by_id)
async def test_watch_sees_added_modified_deleted(http: Http, kind: Kind) -> None:
    _, listed = await http.get(kind.collection)
    assert listed["kind"] == f"{kind.kind}List" and listed["items"] == []
    since = listed["metadata"]["resourceVersion"]
    code, created = await http.post(kind.collection, kind.manifest())
    assert code == 201, created
    path = f"{kind.collection}/{kind.name}"
    patch = {"metadata": {"labels": {"tier": "x"}}}
    assert (await http.patch(path, patch, "application/strategic-merge-patch+json"))[0] == 200
    assert (await http.delete(path))[0] == 200
    events = await http.watch(kind.collection, resourceVersion=since, timeoutSeconds="1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", kind.name),
        ("MODIFIED", kind.name),
        ("DELETED", kind.name),
    ]
    assert events[1]["object"]["metadata"]["labels"] == {"app": "web", "tier": "x"}


@pytest.mark.parametrize("kind", [k for k in KINDS if k.status], ids=by_id)
async def test_status_subresource(http: Http, kind: Kind) -> None:
    manifest = kind.manifest()
    await http.post(kind.collection, {**manifest, "status": {"observedGeneration": 7}})
    path = f"{kind.collection}/{kind.name}"
    _, stored = await http.get(path)
    assert stored.get("status", {}).get("observedGeneration") is None
    patch = {"status": {"observedGeneration": 3}}
    code, patched = await http.patch(f"{path}/status", patch, "application/merge-patch+json")
    assert (code, patched["status"]["observedGeneration"]) == (200, 3)
    # The main resource ignores status; the status subresource ignores everything else.
    code, updated = await http.put(path, {**patched, "status": {"observedGeneration": 9}})
    assert (code, updated["status"]["observedGeneration"]) == (200, 3)
    relabelled = {**updated, "metadata": {**updated["metadata"], "labels": {"app": "db"}}}
    code, updated = await http.put(f"{path}/status", relabelled)
    assert (code, updated["metadata"]["labels"]) == (200, {"app": "web"})


async def test_discovery_documents(http: Http) -> None:
    _, core = await http.get("/api/v1")
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["persistentvolumes"]["namespaced"] is False
    assert by_name["services"]["categories"] == ["all"]
    for name in ("services", "replicationcontrollers", "persistentvolumes"):
        assert by_name[f"{name}/status"]["verbs"] == ["get", "patch", "update"]
    _, groups = await http.get("/apis")
    names = {g["name"]: g for g in groups["groups"]}
    for group in ("apps", "storage.k8s.io", "resource.k8s.io"):
        assert names[group]["preferredVersion"] == {
            "groupVersion": f"{group}/v1",
            "version": "v1",
        }
        _, doc = await http.get(f"/apis/{group}")
        assert doc["kind"] == "APIGroup" and doc["name"] == group
    _, resource = await http.get("/apis/resource.k8s.io/v1")
    assert [(r["name"], r["namespaced"], r["kind"]) for r in resource["resources"]] == [
        ("deviceclasses", False, "DeviceClass"),
        ("resourceclaims", True, "ResourceClaim"),
        ("resourceclaims/status", True, "ResourceClaim"),
        ("resourceclaimtemplates", True, "ResourceClaimTemplate"),
        ("resourceslices", False, "ResourceSlice"),
    ]
    _, storage = await http.get("/apis/storage.k8s.io/v1")
    assert {r["name"] for r in storage["resources"]} == {
        "csidrivers",
        "csinodes",
        "csistoragecapacities",
        "storageclasses",
        "volumeattachments",
        "volumeattachments/status",
    }
    _, index = await http.get("/openapi/v3")
    for gv in ("api/v1", "apis/apps/v1", "apis/storage.k8s.io/v1", "apis/resource.k8s.io/v1"):
        _, doc = await http.get(index["paths"][gv]["serverRelativeURL"].split("?")[0])
        kinds = {
            op["x-kubernetes-group-version-kind"]["kind"]
            for ops in doc["paths"].values()
            for op in ops.values()
        }
        assert {k.kind for k in KINDS if k.collection.startswith(f"/{gv}/")} <= kinds


async def test_aggregated_discovery_scopes(http: Http) -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    scopes: dict[str, str] = {}
    for path in ("/api", "/apis"):
        async with http.session.get(http.base + path, headers={"Accept": accept}) as response:
            body = await response.json(content_type=None)
        for item in body["items"]:
            for version in item["versions"]:
                for r in version["resources"]:
                    scopes[r["resource"]] = r["scope"]
    for k in KINDS:
        assert scopes[k.plural] == ("Namespaced" if k.namespaced else "Cluster")


async def test_field_selectors_follow_upstream(http: Http) -> None:
    slices = next(k for k in KINDS if k.plural == "resourceslices")
    await http.post(slices.collection, slices.manifest())
    _, listed = await http.get(slices.collection, fieldSelector="spec.nodeName=node-0")
    assert [i["metadata"]["name"] for i in listed["items"]] == [slices.name]
    _, listed = await http.get(slices.collection, fieldSelector="spec.driver=other")
    assert listed["items"] == []
    code, refused = await http.get(slices.collection, fieldSelector="spec.pool.name=x")
    assert (code, refused["message"]) == (
        400,
        "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.pool.name",
    )
    code, refused = await http.get("/api/v1/services", fieldSelector="spec.ports=x")
    assert (code, refused["message"]) == (400, "field label not supported: spec.ports")
    code, _ = await http.get("/api/v1/services", fieldSelector="spec.type=ClusterIP")
    assert code == 200


async def test_typed_client_watches(kube: client.ApiClient, http: Http) -> None:
    apps = client.AppsV1Api(kube)
    resource = client.ResourceV1Api(kube)
    deployment = next(k for k in KINDS if k.plural == "deployments")
    claim = next(k for k in KINDS if k.plural == "resourceclaims")

    async def collect(func: Any, **kw: Any) -> list[tuple[str, str, str]]:
        seen = []
        # The client derives "V1ResourceClaim" from the list's return type: name it.
        watcher = watch.Watch(return_type=kw.pop("return_type", None))
        async with watcher.stream(func, "default", timeout_seconds=1, **kw) as stream:
            async for event in stream:
                obj = event["object"]
                seen.append((event["type"], type(obj).__name__, obj.metadata.name))
        return seen

    watching = asyncio.gather(
        collect(apps.list_namespaced_deployment),
        collect(resource.list_namespaced_resource_claim, return_type="ResourceV1ResourceClaim"),
    )
    await asyncio.sleep(0.3)
    for k in (deployment, claim):
        await http.post(k.collection, k.manifest())
        path = f"{k.collection}/{k.name}"
        await http.patch(path, {"metadata": {"labels": {"x": "1"}}}, "application/merge-patch+json")
        await http.delete(path)
    deployments, claims = await watching
    assert deployments == [
        (t, "V1Deployment", deployment.name) for t in ("ADDED", "MODIFIED", "DELETED")
    ]
    assert claims == [
        (t, "ResourceV1ResourceClaim", claim.name) for t in ("ADDED", "MODIFIED", "DELETED")
    ]
