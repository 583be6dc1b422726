"""Resource amounts as a person reads them, for ``troupe explain``'s text output.

troupe counts resources in integers (cpu in millicores, memory in bytes, devices and
extended resources in units; ``troupe.api.resources``). A report that says
``187900m cpu`` or ``18944Gi`` makes its reader do arithmetic, so the text shows cpu in
cores with at most three decimals (``187.9 cpu``, ``0.25 cpu``) and byte amounts in
the largest binary unit they reach, with at most one decimal (``18.5Ti``, ``384Gi``,
``1.3Gi``). ``-o json`` keeps the exact integers. Called by ``troupe.whatif.fit``
(``fmt_vector``) and through it by the fixes and ``troupe.cli.explain_render``.
"""

from __future__ import annotations

from typing import Final

# Binary units, largest first (kube's BinarySI suffixes).
_BINARY: Final = (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30),
                  ("Mi", 1 << 20), ("Ki", 1 << 10))  # fmt: skip


def is_bytes(resource: str) -> bool:
    """Whether ``resource`` is counted in bytes."""
    return resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")


def _decimal(value: float, places: int) -> str:
    text = f"{value:.{places}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def cores(millis: int) -> str:
    """``187900`` -> ``187.9``; ``250`` -> ``0.25``; ``4000`` -> ``4``."""
    sign = "-" if millis < 0 else ""
    whole, rest = divmod(abs(millis), 1000)
    if not rest:
        return f"{sign}{whole}"
    return f"{sign}{whole}.{rest:03d}".rstrip("0")


def binary(amount: int) -> str:
    """``19864223744000`` (18944Gi) -> ``18.5Ti``; ``412316860416`` -> ``384Gi``;
    below 1Ki the plain number."""
    sign = "-" if amount < 0 else ""
    magnitude = abs(amount)
    for i, (suffix, size) in enumerate(_BINARY):
        if magnitude >= size:
            if magnitude % size == 0:
                return f"{sign}{magnitude // size}{suffix}"
            text = _decimal(magnitude / size, 1)
            if text == "1024" and i > 0:  # rounded up into the next unit
                return f"{sign}1{_BINARY[i - 1][0]}"
            return f"{sign}{text}{suffix}"
    return f"{sign}{magnitude}"


def number_text(resource: str, amount: int) -> str:
    """An amount of ``resource`` without its name: ``187.9``, ``18.5Ti``, ``8``."""
    if resource == "cpu":
        return cores(amount)
    if is_bytes(resource):
        return binary(amount)
    return str(amount)


def amount_text(resource: str, amount: int) -> str:
    """One amount with its resource: ``187.9 cpu``, ``18.5Ti memory``, ``8 nvidia.com/gpu``."""
    return f"{number_text(resource, amount)} {resource}"
