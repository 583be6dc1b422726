"""The embedded API server's token file, TokenReviews, RBAC objects and
SubjectAccessReviews, over HTTP as a delegating component or kubectl sends them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from troupe.sim.apiserver import ApiServer
from troupe.sim.apiserver.auth.authenticator import TokenFileError, TokenUsers, parse_token_file

from tests.sim.conftest import Http, kubectl

TOKEN_FILE = """\
alice-token,alice,1001,"sre,oncall"
bob-token,bob,1002
,nobody,1003
carol-token,carol,1004,dev,extra-column
"""
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SARS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def test_the_token_file_format() -> None:
    users = parse_token_file(TOKEN_FILE)
    assert set(users) == {"alice-token", "bob-token", "carol-token"}  # an empty token: skipped
    assert users["alice-token"].groups == ("sre", "oncall")
    assert users["bob-token"].groups == ()
    assert users["carol-token"].groups == ("dev",)
    with pytest.raises(TokenFileError, match="at least 3 columns"):
        parse_token_file("short,line\n")


@pytest.fixture
async def authn_server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    token_file = tmp_path / "tokens.csv"
    token_file.write_text(TOKEN_FILE)
    async with ApiServer(token_users=TokenUsers.from_file(token_file)) as api:
        yield api


@pytest.fixture
async def client(authn_server: ApiServer) -> AsyncIterator[Http]:
    async with aiohttp.ClientSession() as session:
        yield Http(session, authn_server.url)


async def token_review(http: Http, token: str) -> tuple[int, Any]:
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    }
    return await http.post(TOKEN_REVIEWS, body)


async def test_token_reviews_answer_the_token_files_users(client: Http) -> None:
    code, review = await token_review(client, "alice-token")
    assert code == 201
    assert review["kind"] == "TokenReview"
    assert review["apiVersion"] == "authentication.k8s.io/v1"
    assert review["status"] == {
        "authenticated": True,
        "user": {
            "username": "alice",
            "uid": "1001",
            "groups": ["sre", "oncall", "system:authenticated"],
        },
    }
    code, review = await token_review(client, "nobody-has-this")
    assert code == 201 and review["status"] == {"authenticated": False, "user": {}}
    code, refused = await token_review(client, "")
    assert code == 400 and refused["reason"] == "BadRequest"
    code, _ = await client.get(TOKEN_REVIEWS)
    assert code == 405


async def test_requests_authenticate_with_the_token_files_tokens(
    authn_server: ApiServer,
) -> None:
    async with aiohttp.ClientSession() as session:

        async def get(token: str | None) -> int:
            headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
            async with session.get(authn_server.url + "/api/v1/pods", headers=headers) as r:
                return r.status

        assert await get("bob-token") == 200
        assert await get("not-a-token") == 401
        assert await get(None) == 200  # anonymous, as without a token file


async def test_the_admin_token_still_works_next_to_a_token_file() -> None:
    users = TokenUsers.of([("alice-token", "alice", "1", ["sre"])])
    async with (
        ApiServer(token="admin-secret", token_users=users) as api,
        aiohttp.ClientSession() as session,
    ):
        for token, expected in (("admin-secret", 200), ("alice-token", 200), ("x", 401)):
            headers = {"Authorization": f"Bearer {token}"}
            async with session.get(api.url + "/api/v1/nodes", headers=headers) as r:
                assert r.status == expected, token
        async with session.get(api.url + "/api/v1/nodes") as r:
            assert r.status == 401  # the admin token makes a token mandatory
        http = Http(session, api.url)
        session.headers["Authorization"] = "Bearer admin-secret"
        code, review = await token_review(http, "admin-secret")
        assert code == 201
        assert review["status"]["user"]["groups"] == ["system:masters", "system:authenticated"]


async def test_discovery_lists_the_review_and_rbac_kinds(client: Http) -> None:
    code, resources = await client.get("/apis/authentication.k8s.io/v1")
    assert code == 200
    assert [(r["name"], r["verbs"]) for r in resources["resources"]] == [
        ("tokenreviews", ["create"])
    ]
    code, resources = await client.get("/apis/authorization.k8s.io/v1")
    assert [(r["name"], r["verbs"]) for r in resources["resources"]] == [
        ("subjectaccessreviews", ["create"])
    ]
    code, resources = await client.get(RBAC)
    assert {(r["name"], r["namespaced"]) for r in resources["resources"]} == {
        ("roles", True),
        ("rolebindings", True),
        ("clusterroles", False),
        ("clusterrolebindings", False),
    }


def sar(user: str, groups: list[str], **attrs: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"user": user, "groups": groups}
    if "path" in attrs:
        spec["nonResourceAttributes"] = attrs
    else:
        spec["resourceAttributes"] = attrs
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


async def test_rbac_objects_are_stored_and_evaluated_by_subject_access_reviews(
    client: Http,
) -> None:
    explain = {
        "metadata": {"name": "troupe-explain"},
        "rules": [{"nonResourceURLs": ["/debug/troupe/explain"], "verbs": ["get"]}],
    }
    assert (await client.post(f"{RBAC}/clusterroles", explain))[0] == 201
    crb = {
        "metadata": {"name": "troupe-explain-sre"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "troupe-explain"},
        "subjects": [{"kind": "Group", "name": "sre"}],
    }  # fmt: skip
    assert (await client.post(f"{RBAC}/clusterrolebindings", crb))[0] == 201
    for namespace in ("team-a", "team-b"):
        assert (await client.post("/api/v1/namespaces", {"metadata": {"name": namespace}}))[
            0
        ] == 201
    reader = {
        "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
    }
    assert (await client.post(f"{RBAC}/namespaces/team-a/roles", reader))[0] == 201
    rb = {
        "metadata": {"name": "bob-reads"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [{"kind": "User", "name": "bob"}],
    }
    assert (await client.post(f"{RBAC}/namespaces/team-a/rolebindings", rb))[0] == 201

    async def decide(review: dict[str, Any]) -> dict[str, Any]:
        code, answer = await client.post(SARS, review)
        assert code == 201, answer
        assert answer["kind"] == "SubjectAccessReview"
        status: dict[str, Any] = answer["status"]
        return status

    path = {"path": "/debug/troupe/explain", "verb": "get"}
    assert await decide(sar("alice", ["sre", "system:authenticated"], **path)) == {
        "allowed": True,
        "reason": 'RBAC: allowed by ClusterRoleBinding "troupe-explain-sre" of ClusterRole '
        '"troupe-explain" to Group "sre"',
    }
    assert await decide(sar("bob", ["system:authenticated"], **path)) == {"allowed": False}
    pods = {"verb": "list", "resource": "pods", "namespace": "team-a"}
    assert (await decide(sar("bob", [], **pods)))["allowed"] is True
    assert (await decide(sar("bob", [], **{**pods, "namespace": "team-b"})))["allowed"] is False
    # The bootstrap policy: system:masters, and discovery for every authenticated user.
    assert (await decide(sar("root", ["system:masters"], verb="delete", resource="nodes")))[
        "allowed"
    ]
    assert (await decide(sar("bob", ["system:authenticated"], path="/version", verb="get")))[
        "allowed"
    ]

    # Deleting the binding revokes the access at once.
    code, _ = await client.delete(f"{RBAC}/clusterrolebindings/troupe-explain-sre")
    assert code == 200
    assert (await decide(sar("alice", ["sre"], **path)))["allowed"] is False

    code, invalid = await client.post(SARS, sar("", [], **path))
    assert code == 422 and "at least one of user or group" in invalid["message"]
    code, invalid = await client.post(
        SARS, {"kind": "SubjectAccessReview", "spec": {"user": "alice"}}
    )
    assert code == 422 and "exactly one of nonResourceAttributes" in invalid["message"]


async def test_a_binding_needs_a_role_ref_that_does_not_change(client: Http) -> None:
    crb = {"metadata": {"name": "b"}, "subjects": [{"kind": "User", "name": "alice"}]}
    code, refused = await client.post(f"{RBAC}/clusterrolebindings", crb)
    assert code == 422 and "roleRef" in refused["message"]
    crb["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "a"}
    code, created = await client.post(f"{RBAC}/clusterrolebindings", crb)
    assert code == 201
    created["roleRef"]["name"] = "other"
    code, refused = await client.put(f"{RBAC}/clusterrolebindings/b", created)
    assert code == 422 and "cannot change roleRef" in refused["message"]
    code, patched = await client.patch(
        f"{RBAC}/clusterrolebindings/b",
        {"subjects": [{"kind": "Group", "name": "sre"}]},
        "application/merge-patch+json",
    )
    assert code == 200 and patched["subjects"] == [{"kind": "Group", "name": "sre"}]


async def test_kubectl_creates_rbac_objects_and_reviews(
    authn_server: ApiServer, tmp_path: Path
) -> None:
    kubeconfig = authn_server.write_kubeconfig(tmp_path / "kubeconfig")
    # kubectl's generators send protobuf: generate locally, create from the manifest.
    for generate in (
        ["clusterrole", "troupe-explain", "--verb=get", "--non-resource-url=/debug/troupe/explain"],
        ["clusterrolebinding", "troupe-explain-alice", "--clusterrole=troupe-explain",
         "--user=alice"],
    ):  # fmt: skip
        code, manifest, err = await kubectl(
            kubeconfig, "create", *generate, "--dry-run=client", "-o", "yaml"
        )
        assert code == 0, err
        code, out, err = await kubectl(kubeconfig, "create", "-f", "-", stdin=manifest)
        assert code == 0, err
    code, out, err = await kubectl(kubeconfig, "get", "clusterrolebindings", "-o", "name")
    assert code == 0 and "clusterrolebinding.rbac.authorization.k8s.io/troupe-explain-alice" in out

    review = json.dumps(sar("alice", ["system:authenticated"], path="/debug/troupe/explain",
                            verb="get"))  # fmt: skip
    code, out, err = await kubectl(kubeconfig, "create", "-o", "json", "-f", "-", stdin=review)
    assert code == 0, err
    assert json.loads(out)["status"]["allowed"] is True
    token = json.dumps(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
         "spec": {"token": "carol-token"}}
    )  # fmt: skip
    code, out, err = await kubectl(kubeconfig, "create", "-o", "json", "-f", "-", stdin=token)
    assert code == 0, err
    assert json.loads(out)["status"]["user"]["username"] == "carol"
