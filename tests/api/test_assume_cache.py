"""AssumeCache (troupe/api/assume_cache.py): upstream assumecache's semantics, and a
hypothesis model check that restore always gives back the informer's object."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.assume_cache import AssumeCache, AssumeCacheError
from troupe.api.storage import PersistentVolume
from troupe.api.volumes import volume_class

from tests.plugins.storage_builders import make_pv


def pv_cache() -> AssumeCache[PersistentVolume]:
    return AssumeCache("v1.PersistentVolume", metadata=lambda pv: pv.metadata, index=volume_class)


def pv(name: str, version: int, cls: str = "local", claim: str | None = None) -> PersistentVolume:
    builder = make_pv(name).cls(cls).version(str(version))
    if claim is not None:
        builder.claim_ref(claim)
    return builder.obj()


def test_an_assumption_shows_in_get_and_list_but_not_in_get_api() -> None:
    cache = pv_cache()
    informer = pv("pv-1", 5)
    cache.add(informer)
    assumed = pv("pv-1", 5, claim="data")
    cache.assume(assumed)
    assert cache.get("pv-1") is assumed
    assert cache.get_api("pv-1") is informer
    assert cache.list("local") == [assumed]
    assert cache.is_assumed("pv-1")


def test_restore_puts_the_informer_object_back() -> None:
    cache = pv_cache()
    informer = pv("pv-1", 5)
    cache.add(informer)
    cache.assume(pv("pv-1", 5, claim="data"))
    cache.restore("pv-1")
    assert cache.get("pv-1") is informer
    assert not cache.is_assumed("pv-1")
    cache.restore("gone")  # an object deleted meanwhile: nothing to do


def test_an_informer_resync_with_the_same_version_keeps_the_assumption() -> None:
    cache = pv_cache()
    cache.add(pv("pv-1", 5))
    assumed = pv("pv-1", 5, claim="data")
    cache.assume(assumed)
    assert not cache.update(None, pv("pv-1", 5))
    assert cache.get("pv-1") is assumed


def test_a_newer_informer_object_replaces_the_assumption() -> None:
    cache = pv_cache()
    cache.add(pv("pv-1", 5))
    cache.assume(pv("pv-1", 5, claim="data"))
    newer = pv("pv-1", 6, claim="data")
    assert cache.update(None, newer)
    assert cache.get("pv-1") is newer and cache.get_api("pv-1") is newer
    cache.restore("pv-1")
    assert cache.get("pv-1") is newer


def test_an_older_informer_object_is_ignored() -> None:
    cache = pv_cache()
    current = pv("pv-1", 5)
    cache.add(current)
    assert not cache.add(pv("pv-1", 4))
    assert cache.get_api("pv-1") is current


@pytest.mark.parametrize(
    ("existing", "assumed", "message"),
    [
        pytest.param(
            None, pv("pv-1", 5), 'could not find v1.PersistentVolume "pv-1"', id="unknown"
        ),
        pytest.param(
            pv("pv-1", 5),
            pv("pv-1", 4),
            'v1.PersistentVolume "pv-1" is out of sync (stored: 5, assume: 4)',
            id="older than the stored object",
        ),
        pytest.param(
            pv("pv-1", 5),
            make_pv("pv-1").version("x").obj(),
            'error parsing ResourceVersion "x" for v1.PersistentVolume "pv-1"',
            id="a version that is not a number",
        ),
    ],
)
def test_assume_refuses(
    existing: PersistentVolume | None, assumed: PersistentVolume, message: str
) -> None:
    cache = pv_cache()
    if existing is not None:
        cache.add(existing)
    with pytest.raises(AssumeCacheError) as raised:
        cache.assume(assumed)
    assert str(raised.value) == message


def test_assuming_a_newer_version_is_allowed() -> None:
    cache = pv_cache()
    cache.add(pv("pv-1", 5))
    written = pv("pv-1", 9, claim="data")  # what an API write returned
    cache.assume(written)
    assert cache.get("pv-1") is written


def test_delete_forgets_object_and_assumption() -> None:
    cache = pv_cache()
    cache.add(pv("pv-1", 5))
    cache.assume(pv("pv-1", 5, claim="data"))
    cache.delete(pv("pv-1", 5))
    assert cache.get("pv-1") is None and cache.list("local") == [] and len(cache) == 0


def test_the_index_follows_the_latest_object() -> None:
    cache = pv_cache()
    cache.add(pv("a", 1, cls="fast"))
    cache.add(pv("b", 1, cls="slow"))
    cache.assume(pv("a", 1, cls="slow"))
    assert [p.metadata.name for p in cache.list("slow")] == ["a", "b"]
    assert cache.list("fast") == []
    cache.restore("a")
    assert [p.metadata.name for p in cache.list("fast")] == ["a"]
    assert [p.metadata.name for p in cache.list()] == ["a", "b"]


def test_namespaced_objects_are_keyed_namespace_slash_name() -> None:
    cache: AssumeCache[PersistentVolume] = AssumeCache(
        "v1.PersistentVolumeClaim", metadata=lambda obj: obj.metadata
    )
    obj = pv("data", 1)
    obj.metadata.namespace = "ml"
    cache.add(obj)
    assert cache.get("ml/data") is obj
    with pytest.raises(AssumeCacheError, match="has no index"):
        cache.list("local")


# --- the model check ----------------------------------------------------------------------

NAMES = ("pv-a", "pv-b")
operations = st.lists(
    st.one_of(
        st.tuples(st.just("informer"), st.sampled_from(NAMES), st.integers(1, 6)),
        st.tuples(st.just("assume"), st.sampled_from(NAMES), st.integers(1, 6)),
        st.tuples(st.just("restore"), st.sampled_from(NAMES), st.just(0)),
        st.tuples(st.just("delete"), st.sampled_from(NAMES), st.just(0)),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_restore_always_gives_back_what_the_informer_last_stored(
    ops: list[tuple[str, str, int]],
) -> None:
    """A reference model (informer object, assumed object or none, per name) agrees with
    the cache after every step; after a restore, get is the informer's object."""
    cache = pv_cache()
    api: dict[str, PersistentVolume] = {}
    latest: dict[str, PersistentVolume] = {}
    for step, (op, name, version) in enumerate(ops):
        obj = pv(name, version, claim=f"claim-{step}")
        if op == "informer":
            if name not in latest or version > int(latest[name].metadata.resource_version):
                api[name] = latest[name] = obj
            cache.add(obj)
        elif op == "assume":
            refused = name not in latest or version < int(latest[name].metadata.resource_version)
            if refused:
                with pytest.raises(AssumeCacheError):
                    cache.assume(obj)
            else:
                cache.assume(obj)
                latest[name] = obj
        elif op == "restore":
            cache.restore(name)
            if name in api:
                latest[name] = api[name]
                assert cache.get(name) is api[name]
        else:
            cache.delete(obj)
            api.pop(name, None)
            latest.pop(name, None)
        for each in NAMES:
            assert cache.get(each) is latest.get(each)
            assert cache.get_api(each) is api.get(each)
        assert cache.list("local") == [latest[n] for n in sorted(latest)]
