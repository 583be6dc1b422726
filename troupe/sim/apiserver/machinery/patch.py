"""The three patch formats of the API server.

* ``merge_patch``: JSON merge patch, RFC 7386 (``application/merge-patch+json``).
* ``strategic_merge_patch``: ``application/strategic-merge-patch+json`` as
  ``k8s.io/apimachinery/pkg/util/strategicpatch`` applies it for the fields the scheduler
  and kubectl touch: lists merged by their ``patchMergeKey`` (conditions by ``type``,
  containers by ``name``, ports by ``containerPort``, ...), primitive ``patchStrategy:merge``
  lists (finalizers) unioned, ``$patch: replace|delete|merge`` directives on maps and list
  items, ``$deleteFromPrimitiveList/<f>``, ``$setElementOrder/<f>`` and ``$retainKeys``.
  Lists without a merge key are replaced, as upstream.
* ``json_patch``: RFC 6902 (``application/json-patch+json``); failures raise ``PatchError``
  with upstream's (evanphx/json-patch) wording, answered 422 by the server (400 for an
  undecodable patch). As kube-apiserver configures it, a patch has at most 10000
  operations (413) and its ``copy`` operations add at most 3 MiB in all
  (``AccumulatedCopySizeLimit``), so a few bytes of patch cannot double an object
  until memory runs out.

The server's PATCH handler calls these on a private copy of the stored object.
"""

from __future__ import annotations

from typing import Any, Final

from troupe.sim.apiserver.machinery.encoding import dumps
from troupe.sim.apiserver.machinery.meta import clone

MAX_JSON_PATCH_OPERATIONS: Final = 10000
MAX_COPY_BYTES: Final = 3 * 1024 * 1024

# Field name -> patchMergeKey, from the k8s.io/api struct tags of the types served here.
MERGE_KEYS: Final = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "ports": "containerPort",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "addresses": "type",
    "readinessGates": "conditionType",
}
# Primitive lists with patchStrategy "merge" (set union).
MERGED_PRIMITIVE_LISTS: Final = frozenset({"finalizers"})


class PatchError(ValueError):
    """A patch that cannot be applied; ``code`` is the HTTP status to answer."""

    def __init__(self, message: str, code: int = 422) -> None:
        super().__init__(message)
        self.code = code


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 MergePatch (returns a new value; ``target`` is not changed)."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- strategic merge patch ---------------------------------------------------------------


def strategic_merge_patch(original: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object", 400)
    return _merge_map(original if isinstance(original, dict) else {}, patch)


def _merge_map(original: dict[str, Any], patch: dict[str, Any]) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    result = dict(original)
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            drop = value if isinstance(value, list) else []
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in drop]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            merged = _merge_map(current if isinstance(current, dict) else {}, value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = value
    if isinstance(retain, list):
        keep = set(retain)
        result = {k: v for k, v in result.items() if k in keep}
    return result


def _merge_list(field: str, original: Any, patch: list[Any]) -> list[Any]:
    original_list = original if isinstance(original, list) else []
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [
            clone(i) for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")
        ]
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(i, dict) for i in patch):
        if field in MERGED_PRIMITIVE_LISTS:
            merged = list(original_list)
            merged.extend(v for v in patch if v not in merged)
            return merged
        return [clone(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    result = [clone(i) for i in original_list]
    for item in patch:
        directive = item.get("$patch")
        if key not in item:
            if directive is None:
                raise PatchError(f"map: {item} does not contain declared merge key: {key}", 400)
            continue
        position = next(
            (
                i
                for i, existing in enumerate(result)
                if isinstance(existing, dict) and existing.get(key) == item[key]
            ),
            None,
        )
        if directive == "delete":
            if position is not None:
                del result[position]
            continue
        if position is None:
            result.append(_merge_map({}, item))
        else:
            result[position] = _merge_map(result[position], item)
    return result


# --- JSON patch ---------------------------------------------------------------------------


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"add operation does not apply: doc is missing path: {path}")
    return [_unescape(t) for t in path[1:].split("/")]


def _container(doc: Any, tokens: list[str], op: str, path: str) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise PatchError(
                f'{op} operation does not apply: doc is missing path: "{path}": missing value'
            )
    return node


def _get(doc: Any, path: str, op: str) -> Any:
    node = doc
    for token in _split(path):
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise PatchError(
                f'{op} operation does not apply: doc is missing path: "{path}": missing value'
            )
    return node


def _add(doc: Any, path: str, value: Any, op: str = "add") -> Any:
    tokens = _split(path)
    if not tokens:
        return value
    parent = _container(doc, tokens, op, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise PatchError(
                f'{op} operation does not apply: doc is missing path: "{path}": missing value'
            )
    else:
        raise PatchError(
            f'{op} operation does not apply: doc is missing path: "{path}": missing value'
        )
    return doc


def _remove(doc: Any, path: str, op: str = "remove") -> tuple[Any, Any]:
    tokens = _split(path)
    parent = _container(doc, tokens, op, path)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return doc, parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return doc, parent.pop(int(last))
    raise PatchError(f'{op} operation does not apply: doc is missing path: "{path}": missing value')


def json_patch(doc: Any, operations: Any) -> Any:
    """Apply an RFC 6902 patch to a copy of ``doc``."""
    if not isinstance(operations, list):
        raise PatchError("json: cannot unmarshal object into Go value of type jsonpatch.Patch", 400)
    if len(operations) > MAX_JSON_PATCH_OPERATIONS:
        raise PatchError(
            f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, "
            f"got {len(operations)}",
            413,
        )
    doc = clone(doc)
    copied = 0
    for operation in operations:
        if not isinstance(operation, dict):
            raise PatchError(
                "json: cannot unmarshal into Go value of type jsonpatch.Operation", 400
            )
        op = operation.get("op")
        path = operation.get("path")
        if not isinstance(path, str):
            raise PatchError(
                f'{op} operation does not apply: doc is missing path: "": missing value'
            )
        if op in ("add", "replace", "test") and "value" not in operation:
            raise PatchError(f"{op} operation does not apply: doc is missing value", 422)
        if op == "add":
            doc = _add(doc, path, clone(operation["value"]))
        elif op == "remove":
            doc, _ = _remove(doc, path)
        elif op == "replace":
            _get(doc, path, "replace")
            if _split(path):
                doc, _ = _remove(doc, path, "replace")
            doc = _add(doc, path, clone(operation["value"]), "replace")
        elif op in ("move", "copy"):
            source = operation.get("from")
            if not isinstance(source, str):
                raise PatchError(
                    f'{op} operation does not apply: doc is missing from path: "": missing value'
                )
            if op == "move":
                doc, value = _remove(doc, source, "move")
            else:
                value = _get(doc, source, "copy")
                copied += len(dumps(value))
                if copied > MAX_COPY_BYTES:
                    raise PatchError(
                        "Unable to complete the copy, the accumulated size increase of copy "
                        f"is {copied}, exceeding the limit {MAX_COPY_BYTES}"
                    )
                value = clone(value)
            doc = _add(doc, path, value, op)
        elif op == "test":
            try:
                current = _get(doc, path, "test")
            except PatchError:
                current = None
            if current != operation["value"]:
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"Unexpected kind: {op}")
    return doc
