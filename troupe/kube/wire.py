"""The list and watch envelopes of the API server's JSON, for ``Informer``.

The objects inside are ``troupe.api.objects`` models. A list page is one pydantic
validation of its whole body; a watch event one ``validate_json`` of its line into a
slotted envelope made per object model (``event_parser``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import make_dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

import pydantic.dataclasses
from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class _Envelope(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class ListMeta(_Envelope):
    resource_version: str = Field(default="", alias="resourceVersion")
    continue_: str = Field(default="", alias="continue")


class ObjectList(_Envelope, Generic[T]):
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[T] | None = None


class StatusObject(_Envelope):
    """The object of an ERROR watch event."""

    code: int = 0
    reason: str = ""
    message: str = ""


class ParsedEvent(Protocol[T_co]):
    """A watch event: its type and its object."""

    @property
    def type(self) -> str: ...

    @property
    def object(self) -> T_co: ...


def event_parser(model: type[T]) -> Callable[[bytes], ParsedEvent[T]]:
    """``validate_json`` of a watch event line of ``model`` objects, into a slotted
    pydantic dataclass: no ``BaseModel`` instance (its ``__dict__`` and set of fields
    given) for every event."""
    fields: list[tuple[str, Any]] = [("type", str), ("object", model)]
    envelope = pydantic.dataclasses.dataclass(
        make_dataclass("WatchEvent", fields, slots=True), config=ConfigDict(extra="ignore")
    )
    return cast("Callable[[bytes], ParsedEvent[T]]", envelope.__pydantic_validator__.validate_json)
