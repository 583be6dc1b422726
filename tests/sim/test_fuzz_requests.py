"""Random requests cannot crash or wedge the embedded API server (hypothesis).

Bodies are random JSON values, valid objects with one part replaced by a random value,
objects nested past the depth limit, YAML (dumped with anchors and aliases, alias
bombs, or random text), sent as any content type, to create, replace, patch, delete,
bind and evict, with random query parameters. After every request: the answer is not a
5xx, a refusal is a Status carrying its own code, the server still answers its health
probe, and every stored object of every kind touched still lists (200, JSON that
parses, the kind's list). One server takes all the examples, so whatever one example
stored is there for the next to trip over.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Final

import aiohttp
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from troupe.sim.apiserver import ApiServer

from tests.sim.conftest import pod

COLLECTIONS = {
    "pods": "/api/v1/namespaces/default/pods",
    "configmaps": "/api/v1/namespaces/default/configmaps",
    "leases": "/apis/coordination.k8s.io/v1/namespaces/default/leases",
    "events": "/apis/events.k8s.io/v1/namespaces/default/events",
    "coreevents": "/api/v1/namespaces/default/events",
    "pdbs": "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
    "priorityclasses": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "nodes": "/api/v1/nodes",
}
CONTENT_TYPES = (
    "application/json",
    "application/yaml",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
    "application/vnd.kubernetes.protobuf",
    "text/plain",
)
TABLE: Final = "application/json;as=Table;v=v1;g=meta.k8s.io"
KEYS = [
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "generateName",
    "namespace",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "spec",
    "status",
    "containers",
    "initContainers",
    "image",
    "resources",
    "requests",
    "limits",
    "cpu",
    "memory",
    "nodeName",
    "priority",
    "tolerations",
    "affinity",
    "nodeSelector",
    "leaseDurationSeconds",
    "holderIdentity",
    "minAvailable",
    "disruptedPods",
    "containerStatuses",
    "restartCount",
    "lastTimestamp",
    "count",
    "series",
    "renewTime",
    "target",
    "deleteOptions",
    "gracePeriodSeconds",
    "data",
    "op",
    "path",
    "value",
    "from",
]

keys = st.sampled_from(KEYS) | st.text(max_size=6)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=3)
    | st.sampled_from(["", "a/b", "-1", "1Gi", "x" * 300, "default", "Exists", "0"])
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=20,
)


def nested(depth: int) -> Any:
    value: Any = "x"
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


def valid(kind: str, name: str) -> dict[str, Any]:
    if kind == "pods":
        return pod(name, {"app": "web"})
    if kind == "leases":
        return {
            "metadata": {"name": name},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 5},
        }
    if kind == "nodes":
        return {"metadata": {"name": name}, "status": {"capacity": {"cpu": "4"}}}
    if kind == "priorityclasses":
        return {"metadata": {"name": name}, "value": 10}
    if kind == "events":
        return {"metadata": {"name": name}, "note": "hi"}
    if kind == "coreevents":
        return {
            "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": "a", "namespace": "default"},
            "lastTimestamp": "2026-01-01T00:00:00Z",
            "count": 2,
        }
    if kind == "pdbs":
        return {
            "metadata": {"name": name},
            "spec": {"minAvailable": 1, "selector": {}},
            "status": {"disruptedPods": {"a": "2026-01-01T00:00:00Z"}, "disruptionsAllowed": 0},
        }
    return {"metadata": {"name": name}, "data": {"k": "v"}}


@st.composite
def mutated(draw: st.DrawFn, kind: str) -> Any:
    """A valid object of ``kind`` with one part replaced by a random value."""
    names = st.sampled_from(["a", "b", "c"]) | st.sampled_from(["a/b", "A", "x" * 260, ""])
    obj = valid(kind, draw(names))
    node: Any = obj
    for _ in range(draw(st.integers(0, 3))):
        if not isinstance(node, dict) or not node:
            break
        child = node[draw(st.sampled_from(sorted(node)))]
        if not isinstance(child, dict):
            break
        node = child
    if isinstance(node, dict):
        node[draw(keys)] = draw(st.one_of(json_values, st.integers(90, 400).map(nested)))
    return obj


@st.composite
def yaml_bodies(draw: st.DrawFn, kind: str) -> bytes:
    choice = draw(st.integers(0, 2))
    if choice == 0:
        shared = draw(json_values)
        doc = draw(mutated(kind))
        if isinstance(doc, dict):
            doc["x"] = [shared] * draw(st.integers(1, 5))  # dumped with an anchor and aliases
        return yaml.safe_dump(doc).encode()
    if choice == 1:
        levels, fanout = draw(st.integers(2, 9)), draw(st.integers(2, 10))
        lines = ["apiVersion: v1", "metadata: {name: bomb}", "l0: &l0 [x]"]
        for level in range(1, levels):
            lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * fanout)}]")
        return ("\n".join(lines) + "\n").encode()
    alphabet = "ab: &*[]{},-!|>#'\"\n\t0.9@%`?<=~^\\"
    return draw(st.text(alphabet=alphabet, max_size=80)).encode()


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, bytes, str, dict[str, str]]:
    kind = draw(st.sampled_from(sorted(COLLECTIONS)))
    collection = COLLECTIONS[kind]
    name = draw(st.sampled_from(["a", "b", "c", "zz"]))
    method, path = draw(
        st.sampled_from(
            [
                ("POST", collection),
                ("POST", collection),
                ("POST", collection),
                ("PUT", f"{collection}/{name}"),
                ("PATCH", f"{collection}/{name}"),
                ("PUT", f"{collection}/{name}/status"),
                ("PATCH", f"{collection}/{name}/status"),
                ("DELETE", f"{collection}/{name}"),
                ("DELETE", collection),
                ("GET", collection),
                ("POST", f"{COLLECTIONS['pods']}/{name}/binding"),
                ("POST", f"{COLLECTIONS['pods']}/{name}/eviction"),
            ]
        )
    )
    content_type = draw(st.sampled_from(CONTENT_TYPES))
    if content_type == "application/yaml":
        body = draw(yaml_bodies(kind))
    else:
        brackets = st.integers(101, 50000).map(lambda d: b"[" * d + b"]" * d)
        values = st.one_of(mutated(kind), mutated(kind), json_values)
        body = draw(st.one_of(values.map(lambda v: json.dumps(v).encode()), brackets))
    params = draw(
        st.dictionaries(
            st.sampled_from(
                [
                    "labelSelector",
                    "fieldSelector",
                    "limit",
                    "timeoutSeconds",
                    "resourceVersion",
                    "watch",
                    "continue",
                    "gracePeriodSeconds",
                    "allowWatchBookmarks",
                ]
            ),
            st.sampled_from(["", "1", "-1", "abc", "a in ()", "a>x", "a<", "a=b", "9" * 30])
            | st.text(max_size=8),
            max_size=3,
        )
    )
    return method, path, body, content_type, params


async def answer(
    session: aiohttp.ClientSession, base: str, request: tuple[str, str, bytes, str, dict[str, str]]
) -> tuple[int, bytes]:
    method, path, body, content_type, params = request
    async with session.request(
        method, base + path, data=body, headers={"Content-Type": content_type}, params=params
    ) as response:
        if params.get("watch") and response.status == 200:
            return 200, b""  # a stream: that it opened is the answer
        return response.status, await response.read()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batch=st.lists(requests(), min_size=1, max_size=4))
async def test_random_requests_never_get_a_5xx_and_everything_stored_lists(
    server: ApiServer, batch: list[tuple[str, str, bytes, str, dict[str, str]]]
) -> None:
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for request in batch:
            code, raw = await answer(session, server.url, request)
            assert code < 500, (request[:2], request[3], request[4], code, raw[:300])
            if code >= 400 and raw.startswith(b"{"):
                status = json.loads(raw)
                assert (status["kind"], status["code"]) == ("Status", code), status
            async with session.get(f"{server.url}/healthz") as health:
                assert health.status == 200
        for collection in COLLECTIONS.values():
            async with session.get(server.url + collection) as listed:
                assert listed.status == 200
                body = json.loads(await listed.read())
                assert body["kind"].endswith("List") and isinstance(body["items"], list)
            # kubectl's view of the same list: every stored object prints.
            async with session.get(server.url + collection, headers={"Accept": TABLE}) as table:
                assert table.status == 200
                assert json.loads(await table.read())["kind"] == "Table"
    await asyncio.sleep(0)
