"""Hostile and malformed requests: the embedded API server answers them as
kube-apiserver does (a 4xx Status with upstream's reason and message), stores nothing
invalid, and keeps serving: after every refusal the pods still list. One test per
problem found by probing the server (issue 25, item 4)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from troupe.sim.apiserver import ApiServer

from tests.sim.conftest import Http, pod

PODS = "/api/v1/namespaces/default/pods"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
DNS_SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
TOO_LARGE = "Request entity too large: limit is 3145728"


async def raw(
    http: Http, method: str, path: str, body: bytes, content_type: str = "application/json"
) -> tuple[int, Any]:
    headers = {"Content-Type": content_type}
    async with http.session.request(method, http.base + path, data=body, headers=headers) as r:
        text = await r.text()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, text


async def still_serving(http: Http, *absent: str) -> None:
    """Every stored pod lists, and none of ``absent`` was stored."""
    code, listed = await http.get(PODS)
    assert code == 200 and listed["kind"] == "PodList"
    names = {p["metadata"]["name"] for p in listed["items"]}
    assert not names & set(absent), names


def refused(answer: tuple[int, Any], code: int, reason: str) -> dict[str, Any]:
    """The Status of a refusal answered ``code``; its body."""
    status, body = answer
    assert isinstance(body, dict) and body["kind"] == "Status", body
    assert (status, body["code"], body["reason"], body["status"]) == (
        code,
        code,
        reason,
        "Failure",
    ), body
    return body


def laughs(levels: int, fanout: int) -> str:
    """A billion-laughs document: each anchor lists ``fanout`` aliases of the previous."""
    lines = ["apiVersion: v1", "kind: Pod", "metadata: {name: bomb}", "laughs:"]
    lines.append('  l0: &l0 ["lol"]')
    for level in range(1, levels):
        aliases = ", ".join([f"*l{level - 1}"] * fanout)
        lines.append(f"  l{level}: &l{level} [{aliases}]")
    return "\n".join(lines) + "\n"


async def test_a_yaml_alias_bomb_is_refused_as_excessive_aliasing(http: Http) -> None:
    bomb = laughs(9, 9).encode()
    assert len(bomb) < 700  # 9^8 = 43 million "lol"s from a few hundred bytes
    body = refused(await raw(http, "POST", PODS, bomb, "application/yaml"), 400, "BadRequest")
    assert body["message"].startswith(
        "the object provided is unrecognized (must be of type Pod): error converting YAML to "
        "JSON: yaml: document contains excessive aliasing ("
    )
    await still_serving(http, "bomb")


async def test_yaml_aliases_within_go_yamls_ratio_are_expanded(http: Http) -> None:
    document = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "anchored"}}
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: anchored, labels: &l {app: web}}\n"
        "spec:\n  nodeSelector: *l\n  containers: [{name: c, image: pause}]\n"
    )
    code, body = await raw(http, "POST", PODS, text.encode(), "application/yaml")
    assert code == 201, body
    assert body["spec"]["nodeSelector"] == body["metadata"]["labels"] == {"app": "web"}
    assert document["metadata"]["name"] == body["metadata"]["name"]


async def test_a_pod_nested_300_deep_is_refused_and_pods_keep_listing(http: Http) -> None:
    deep: Any = "x"
    for _ in range(300):
        deep = {"a": deep}
    body_pod = pod("deep")
    body_pod["spec"]["unknown"] = deep
    body = refused(await http.post(PODS, body_pod), 400, "BadRequest")
    assert "json parse error: exceeded max depth" in body["message"]
    await still_serving(http, "deep")
    assert (await http.get(f"{PODS}/deep"))[0] == 404


async def test_json_nested_50000_deep_is_a_400_not_a_500(http: Http) -> None:
    body = refused(
        await raw(http, "POST", PODS, b'{"a":' * 50000 + b"1" + b"}" * 50000), 400, "BadRequest"
    )
    assert "exceeded max depth" in body["message"]
    await still_serving(http)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        pytest.param(
            "labels",
            ["a"],
            "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of "
            "type map[string]string",
            id="labels as a list",
        ),
        pytest.param(
            "containers",
            "x",
            "json: cannot unmarshal string into Go struct field PodSpec.spec.containers of "
            "type []v1.Container",
            id="containers as a string",
        ),
    ],
)
async def test_values_of_the_wrong_type_are_the_decoders_400(
    http: Http, field: str, value: Any, message: str
) -> None:
    body_pod = pod("typed")
    if field == "labels":
        body_pod["metadata"]["labels"] = value
    else:
        body_pod["spec"]["containers"] = value
    body = refused(await http.post(PODS, body_pod), 400, "BadRequest")
    assert body["message"] == f'Pod in version "v1" cannot be handled as a Pod: {message}'
    await still_serving(http, "typed")


@pytest.mark.parametrize(
    ("name", "causes"),
    [
        pytest.param("a/b", [f'metadata.name: Invalid value: "a/b": {DNS_SUBDOMAIN}'], id="a/b"),
        pytest.param(
            "a" * 254,
            [f'metadata.name: Invalid value: "{"a" * 254}": must be no more than 253 characters'],
            id="254 characters",
        ),
    ],
)
async def test_names_a_real_server_refuses_are_refused(
    http: Http, name: str, causes: list[str]
) -> None:
    body = refused(await http.post(PODS, pod(name)), 422, "Invalid")
    assert body["message"] == f'Pod "{name}" is invalid: {", ".join(causes)}'
    assert [c["field"] for c in body["details"]["causes"]] == ["metadata.name"]
    await still_serving(http, name)


async def test_a_label_value_a_real_server_refuses_names_its_field(http: Http) -> None:
    body = refused(await http.post(PODS, pod("badlabel", {"app": "a b"})), 422, "Invalid")
    assert body["message"].startswith(
        'Pod "badlabel" is invalid: metadata.labels: Invalid value: "a b": a valid label must '
        "be an empty string or consist of alphanumeric characters"
    )
    await still_serving(http, "badlabel")


async def test_annotations_over_256_kib_are_refused(http: Http) -> None:
    big = pod("annotated")
    big["metadata"]["annotations"] = {"a": "x" * (256 * 1024)}
    body = refused(await http.post(PODS, big), 422, "Invalid")
    assert body["message"] == (
        'Pod "annotated" is invalid: metadata.annotations: Too long: must have at most 262144 bytes'
    )
    await still_serving(http, "annotated")


async def test_duplicate_container_names_are_refused(http: Http) -> None:
    twins = pod("twins")
    twins["spec"]["containers"].append({"name": "c", "image": "pause"})
    body = refused(await http.post(PODS, twins), 422, "Invalid")
    assert (
        body["message"] == 'Pod "twins" is invalid: spec.containers[1].name: Duplicate value: "c"'
    )
    await still_serving(http, "twins")


@pytest.mark.parametrize(
    "megabytes", [pytest.param(20, id="20 MB pod"), pytest.param(70, id="70 MB")]
)
async def test_a_body_over_3_mib_is_413(http: Http, megabytes: int) -> None:
    huge = pod("huge")
    huge["metadata"]["annotations"] = {"a": "x" * (megabytes * 1024 * 1024)}
    body = refused(
        await raw(http, "POST", PODS, json.dumps(huge).encode()), 413, "RequestEntityTooLarge"
    )
    assert body["message"] == TOO_LARGE
    await still_serving(http, "huge")


async def test_a_watch_with_timeout_seconds_abc_is_a_400(http: Http) -> None:
    body = refused(await http.get(PODS, watch="true", timeoutSeconds="abc"), 400, "BadRequest")
    assert body["message"] == 'strconv.ParseInt: parsing "abc": invalid syntax'


async def test_no_timeout_seconds_makes_a_watch_stream_forever(server: ApiServer) -> None:
    timeout = aiohttp.ClientTimeout(total=10)
    watch = f"{server.url}{PODS}?watch=true&resourceVersion=1&timeoutSeconds="
    async with aiohttp.ClientSession(timeout=timeout) as session:
        # A negative timeout ends the stream at once (upstream's timer fires at once).
        async with session.get(watch + "-1") as response:
            assert response.status == 200
            assert await asyncio.wait_for(response.read(), 5) == b""
        # What does not parse as an int64 is refused, not taken as "never".
        for text in ("nan", "inf", "1e9", "1.5"):
            async with session.get(watch + text) as response:
                body = await asyncio.wait_for(response.json(), 5)
                assert (response.status, body["reason"]) == (400, "BadRequest"), text
                assert body["message"] == f'strconv.ParseInt: parsing "{text}": invalid syntax'


async def test_a_watch_from_a_future_resource_version_is_too_large(http: Http) -> None:
    _, listed = await http.get(PODS)
    current = int(listed["metadata"]["resourceVersion"])
    events = await http.watch(PODS, resourceVersion=str(current + 1000), timeoutSeconds="5")
    assert events == [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"Too large resource version: {current + 1000}, current: {current}",
                "reason": "Timeout",
                "details": {
                    "causes": [
                        {
                            "reason": "ResourceVersionTooLarge",
                            "message": "Too large resource version",
                        }
                    ],
                    "retryAfterSeconds": 1,
                },
                "code": 504,
            },
        }
    ]


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        pytest.param(
            "a>x",
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' "
            "operators, the value must be an integer",
            id="a>x",
        ),
        pytest.param(
            "a<",
            "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' "
            "operators, the value must be an integer",
            id="a<",
        ),
    ],
)
async def test_malformed_label_selectors_are_400(http: Http, selector: str, message: str) -> None:
    for params in ({}, {"watch": "true"}):
        body = refused(await http.get(PODS, labelSelector=selector, **params), 400, "BadRequest")
        assert body["message"] == message


async def test_an_empty_set_selects_the_empty_value_as_upstream_parses_it(http: Http) -> None:
    # labels.Parse reads "a in ()" as a in (""): accepted, matching a="" only.
    assert (await http.post(PODS, pod("empty", {"a": ""})))[0] == 201
    assert (await http.post(PODS, pod("other", {"a": "x"})))[0] == 201
    code, listed = await http.get(PODS, labelSelector="a in ()")
    assert code == 200
    assert [p["metadata"]["name"] for p in listed["items"]] == ["empty"]


def lease(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "leader"},
        "spec": spec,
    }


async def test_a_lease_duration_that_is_not_an_integer_is_refused(http: Http) -> None:
    body = refused(
        await http.post(LEASES, lease({"leaseDurationSeconds": "abc"})), 400, "BadRequest"
    )
    assert body["message"] == (
        'Lease in version "v1" cannot be handled as a Lease: json: cannot unmarshal string into '
        "Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32"
    )
    body = refused(await http.post(LEASES, lease({"leaseDurationSeconds": 0})), 422, "Invalid")
    assert body["message"] == (
        'Lease.coordination.k8s.io "leader" is invalid: spec.leaseDurationSeconds: Invalid value: '
        "0: must be greater than 0"
    )
    body = refused(await http.post(LEASES, lease({"renewTime": "yesterday"})), 400, "BadRequest")
    assert (await http.get(f"{LEASES}/leader"))[0] == 404
    assert (await http.post(LEASES, lease({"leaseDurationSeconds": 15})))[0] == 201


async def test_status_values_the_server_reads_back_must_have_their_types(http: Http) -> None:
    # The disruption controller reads disruptedPods' times on every pod change, and
    # kubectl's table of pods adds up restartCount: stored wrong, every later pod write
    # or `kubectl get pods` would fail.
    pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
    pdb = {"metadata": {"name": "budget"}, "spec": {"minAvailable": 1, "selector": {}}}
    assert (await http.post(pdbs, pdb))[0] == 201
    assert (await http.post(PODS, pod("victim")))[0] == 201
    _, stored = await http.get(f"{pdbs}/budget")
    stored["status"] = {"disruptedPods": {"victim": "yesterday"}}
    body = refused(await http.put(f"{pdbs}/budget/status", stored), 400, "BadRequest")
    assert body["message"].startswith(
        'PodDisruptionBudget in version "v1" cannot be handled as a PodDisruptionBudget: '
        'status.disruptedPods: parsing time "yesterday"'
    )
    _, victim = await http.get(f"{PODS}/victim")
    victim["status"]["containerStatuses"] = [{"name": "c", "restartCount": "x"}]
    body = refused(await http.put(f"{PODS}/victim/status", victim), 400, "BadRequest")
    assert body["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go '
        "struct field ContainerStatus.status.containerStatuses.restartCount of type int32"
    )
    assert (await http.post(PODS, pod("after")))[0] == 201
    table = "application/json;as=Table;v=v1;g=meta.k8s.io"
    async with http.session.get(http.base + PODS, headers={"Accept": table}) as response:
        assert response.status == 200


async def test_an_unpaired_surrogate_is_replaced_as_gos_decoder_replaces_it(http: Http) -> None:
    # Python's decoder keeps "\ud800"; nothing could encode the object again, and every
    # list of its kind would fail.
    configmaps = "/api/v1/namespaces/default/configmaps"
    body = b'{"metadata": {"name": "odd"}, "data": {"k": "\\ud800x"}}'
    code, created = await raw(http, "POST", configmaps, body)
    assert code == 201 and created["data"] == {"k": "\ufffdx"}
    code, listed = await http.get(configmaps)
    assert code == 200 and [c["data"] for c in listed["items"]] == [{"k": "\ufffdx"}]
