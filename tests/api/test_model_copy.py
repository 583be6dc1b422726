"""KubeModel.model_copy (troupe/api/objects.py): a shallow copy shares every field's
value, applies updates, and leaves the original alone, for every model class."""

from __future__ import annotations

import pytest
import troupe.api.storage  # noqa: F401  (registers the storage models' classes)
from troupe.api.objects import KubeModel, Pod


def _model_classes() -> list[type[KubeModel]]:
    found: list[type[KubeModel]] = []
    todo = [KubeModel]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            todo.append(sub)
            if "_field_names" in sub.__dict__:
                found.append(sub)
    return sorted(found, key=lambda c: c.__qualname__)


@pytest.mark.parametrize("cls", _model_classes(), ids=lambda c: c.__qualname__)
def test_a_shallow_copy_shares_every_field(cls: type[KubeModel]) -> None:
    original = _instance(cls)
    copied = original.model_copy()
    assert copied is not original and type(copied) is cls
    for name in cls._field_names:
        assert getattr(copied, name) is getattr(original, name), name


def _instance(cls: type[KubeModel]) -> KubeModel:
    """An instance built without calling the validator (some models have required
    fields): every field set to a distinct object."""
    obj = object.__new__(cls)
    for name in cls._field_names:
        object.__setattr__(obj, name, object())
    return obj


def test_updates_apply_to_the_copy_only() -> None:
    pod = Pod()
    pod.metadata.name = "p"
    bound = pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": "n1"})})
    assert bound.spec.node_name == "n1" and pod.spec.node_name == ""
    assert bound.metadata is pod.metadata
    deep = pod.model_copy(deep=True)
    assert deep.metadata == pod.metadata and deep.metadata is not pod.metadata
