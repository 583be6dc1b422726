"""The real kubectl against the embedded API server: create, apply, get (table and JSON),
watch, delete, CRD kinds, and upstream's error wording. kubectl must be installed (CI
installs it); a missing binary fails these tests with a clear message."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from troupe.sim.apiserver import ApiServer
from troupe.sim.crds import POD_GROUP_CRD
from troupe.sim.nodespec import CONTAINER_RUNTIME, KERNEL_VERSION, OS_IMAGE, NodeSpec

from tests.sim.conftest import Http, kubectl, pod

POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: c
    image: nginx:1.27
"""


async def test_create_get_json_and_delete(kubeconfig: Path) -> None:
    assert await kubectl(kubeconfig, "create", "-f", "-", stdin=POD_YAML) == (
        0,
        "pod/web created\n",
        "",
    )
    code, out, err = await kubectl(kubeconfig, "get", "pods", "-o", "json")
    assert (code, err) == (0, "")
    listed = json.loads(out)
    assert [
        (i["kind"], i["metadata"]["name"], i["spec"]["schedulerName"]) for i in listed["items"]
    ] == [("Pod", "web", "default-scheduler")]
    assert await kubectl(kubeconfig, "delete", "pod", "web") == (0, 'pod "web" deleted\n', "")
    code, _, err = await kubectl(kubeconfig, "get", "pod", "web")
    assert (code, err.strip()) == (1, 'Error from server (NotFound): pods "web" not found')


async def test_apply_creates_then_configures(kubeconfig: Path) -> None:
    assert (await kubectl(kubeconfig, "apply", "-f", "-", stdin=POD_YAML))[1] == "pod/web created\n"
    changed = POD_YAML.replace("{app: web}", "{app: web, tier: fe}")
    assert (await kubectl(kubeconfig, "apply", "-f", "-", stdin=changed))[
        1
    ] == "pod/web configured\n"
    code, out, _ = await kubectl(
        kubeconfig, "get", "pod", "web", "-o", "jsonpath={.metadata.labels.tier}"
    )
    assert (code, out) == (0, "fe")
    unchanged = await kubectl(kubeconfig, "apply", "-f", "-", stdin=changed)
    assert unchanged[1] == "pod/web unchanged\n"


async def test_server_side_dry_run_is_refused_not_applied(kubeconfig: Path) -> None:
    code, _, err = await kubectl(
        kubeconfig, "create", "--dry-run=server", "-f", "-", stdin=POD_YAML
    )
    assert code == 1 and "dryRun is not supported" in err
    assert (await kubectl(kubeconfig, "get", "pod", "web"))[0] == 1


async def test_get_prints_a_table(kubeconfig: Path, http: Http) -> None:
    await http.post("/api/v1/namespaces/default/pods", pod("web"))
    code, out, err = await kubectl(kubeconfig, "get", "pods")
    assert (code, err) == (0, "")
    header, row = out.splitlines()
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split()[:4] == ["web", "0/1", "Pending", "0"]
    code, out, _ = await kubectl(kubeconfig, "get", "pods", "-o", "wide")
    assert out.splitlines()[0].split()[5:7] == ["IP", "NODE"]


async def test_get_watch_streams_changes(kubeconfig: Path, http: Http) -> None:
    await http.post("/api/v1/namespaces/default/pods", pod("first"))
    watching = asyncio.ensure_future(
        kubectl(kubeconfig, "get", "pods", "-w", "--request-timeout=2s", "-o", "name")
    )
    await asyncio.sleep(1.0)
    await http.post("/api/v1/namespaces/default/pods", pod("second"))
    _, out, _ = await watching
    assert out.splitlines()[:2] == ["pod/first", "pod/second"]


async def test_custom_resources_through_kubectl(kubeconfig: Path) -> None:
    assert (await kubectl(kubeconfig, "create", "-f", "-", stdin=json.dumps(POD_GROUP_CRD)))[0] == 0
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g"},
        "spec": {"minMember": 3},
    }
    assert await kubectl(kubeconfig, "create", "-f", "-", stdin=json.dumps(group)) == (
        0,
        "podgroup.scheduling.x-k8s.io/g created\n",
        "",
    )
    code, out, _ = await kubectl(kubeconfig, "get", "pg", "g", "-o", "jsonpath={.spec.minMember}")
    assert (code, out) == (0, "3")


async def test_imperative_generators_get_415_naming_protobuf(kubeconfig: Path) -> None:
    # kubectl's typed clients send protobuf whatever discovery says, and fall back to JSON
    # only after a 415 to CBOR: the server names the refused type instead of a parse error.
    code, _, err = await kubectl(kubeconfig, "create", "namespace", "team-a")
    assert code == 1
    assert err.strip() == (
        "Error from server (UnsupportedMediaType): the body of the request was in an unknown "
        "format (application/vnd.kubernetes.protobuf) - accepted media types include: "
        "application/json, application/yaml"
    )


async def test_generators_work_through_client_side_dry_run(kubeconfig: Path) -> None:
    # The documented workaround: generate YAML locally, create it from the file.
    generated = [
        (("namespace", "team-a"), "namespace/team-a created\n"),
        (
            ("priorityclass", "high", "--value=1000"),
            "priorityclass.scheduling.k8s.io/high created\n",
        ),
        (
            ("pdb", "web", "--selector=app=web", "--min-available=1"),
            "poddisruptionbudget.policy/web created\n",
        ),
        (("configmap", "settings", "--from-literal=a=b"), "configmap/settings created\n"),
    ]
    for args, created in generated:
        code, manifest, err = await kubectl(
            kubeconfig, "create", *args, "--dry-run=client", "-o", "yaml"
        )
        assert (code, err) == (0, "")
        assert await kubectl(kubeconfig, "create", "-f", "-", stdin=manifest) == (0, created, "")
    code, out, _ = await kubectl(
        kubeconfig, "get", "priorityclass", "high", "-o", "jsonpath={.value}"
    )
    assert (code, out) == (0, "1000")


async def test_get_nodes_wide_shows_addresses_and_os(kubeconfig: Path, server: ApiServer) -> None:
    server.store.create("nodes", NodeSpec(1).node(0, server.store.now()))
    code, out, err = await kubectl(kubeconfig, "get", "nodes", "-o", "wide")
    assert (code, err) == (0, "")
    header, row = out.splitlines()
    assert header.split() == [
        "NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP",
        "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME",
    ]  # fmt: skip
    cells = row.split()
    assert cells[:2] == ["node-0", "Ready"]
    assert cells[4:7] == ["v1.36.0-troupe-sim", "10.0.0.1", "<none>"]
    assert row.split("<none>")[-1].split() == [*OS_IMAGE.split(), KERNEL_VERSION, CONTAINER_RUNTIME]
