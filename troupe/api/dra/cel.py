"""DRA device selectors in CEL: compile once, evaluate per device, cache per
(device, expression).

The one module that talks to the CEL runtime (cel-expr-python, Google's cel-cpp; the
choice and its figures are in docs/dra.md). The DRA allocator
(``troupe.plugins.dynamicresources``) calls it; it follows upstream's
``k8s.io/dynamic-resource-allocation/cel`` (``compile.go``, ``cache.go``, ``errors.go``):

- one variable, ``device``, with ``driver``, ``allowMultipleAllocations``,
  ``attributes`` and ``capacity``; attributes and capacity are maps domain -> name ->
  value, a name without a domain takes the driver's; ints, bools and strings stay CEL
  values, versions become semvers, capacities quantities (``cel_library``);
- a domain the device lacks reads as an empty map; a missing key is the runtime error
  ``no such key: X`` with upstream's hint;
- an expression longer than 10 KiB, or one that does not type-check or does not yield a
  bool, is a ``CelCompileError`` (the claim or class is invalid); a failure while
  evaluating is a ``CelRuntimeError`` (the pod backs off; not "unschedulable");
- cost: upstream stops an evaluation past 1e6 cost units; cel-cpp stops one past 10,000
  comprehension iterations, reported with cel-go's message (docs/dra.md).

Caches: compiled programs by expression text; one ``CelDevice`` per device identity
(driver, pool, device, slice name and the slice's resourceVersion, which an API server
changes on every write, so a republished device starts afresh), holding its activation
and its result per expression. A device whose slice has no resourceVersion is not kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from troupe.api.dra import cel_library
from troupe.api.dra.cel_library import CelFunctionError, quantity_value, semver_value
from troupe.api.dra.objects import Device

MAX_EXPRESSION_BYTES: Final = 10 * 1024
"""``resourceapi.CELSelectorExpressionMaxLength``."""
COST_LIMIT: Final = 1_000_000
"""``resourceapi.CELSelectorExpressionMaxCost`` (upstream's runtime limit, for reference)."""

_NO_SUCH_KEY: Final = re.compile(r'Key not found in map : "(.*)"')
_STATUS_PREFIX: Final = re.compile(r"^[A-Z_]+: ")
_HINT: Final = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the"
    " check with has() for optional fields"
)
_COST_EXCEEDED: Final = "operation cancelled: actual cost limit exceeded"
_MAX_DEFAULTED_DOMAINS: Final = 16
_MAX_RESULTS_PER_DEVICE: Final = 256


class CelError(Exception):
    """A selector that cannot be used; ``expression`` is its text."""

    def __init__(self, expression: str, message: str) -> None:
        super().__init__(message)
        self.expression = expression
        self.message = message


class CelCompileError(CelError):
    """The expression is invalid: its claim or class has to change."""


class CelRuntimeError(CelError):
    """The expression failed on one device (a missing key, a bad argument, the cost
    limit). Deterministic for that device, so it is cached like a result."""


@dataclass(frozen=True, slots=True)
class DeviceIdentity:
    """A device as published: a new slice version is a new identity."""

    driver: str
    pool: str
    device: str
    slice_name: str = ""
    slice_version: str = ""


class CelDevice:
    """One device as CEL sees it: its activation and its result per expression.

    ``error`` is set when the device cannot be shown to CEL at all (a version attribute
    that is no semver): every evaluation on it fails with that message, as upstream's.
    """

    __slots__ = (
        "_attributes",
        "_capacity",
        "_driver",
        "_env",
        "_multi",
        "activation",
        "error",
        "results",
    )

    def __init__(self, env: Any, driver: str, device: Device) -> None:
        self._env = env
        self._driver = driver
        self._multi = bool(device.allow_multiple_allocations)
        self.results: dict[str, bool | CelRuntimeError] = {}
        self.error = ""
        self._attributes: dict[str, dict[str, Any]] = {}
        self._capacity: dict[str, dict[str, Any]] = {}
        try:
            for name, attribute in device.attributes.items():
                domain, ident = split_qualified_name(name, driver)
                self._attributes.setdefault(domain, {})[ident] = _attribute_value(name, attribute)
            for name, capacity in device.capacity.items():
                domain, ident = split_qualified_name(name, driver)
                self._capacity.setdefault(domain, {})[ident] = quantity_value(capacity.value)
        except CelFunctionError as exc:
            self.error = str(exc)
        self.activation = self.with_domains(frozenset())

    def with_domains(self, domains: frozenset[str]) -> Any:
        """An activation in which every domain of ``domains`` exists (empty if the
        device has none of it)."""
        empty: dict[str, dict[str, Any]] = {domain: {} for domain in domains}
        variables = {
            "driver": self._driver,
            "allowMultipleAllocations": self._multi,
            "attributes": {**empty, **self._attributes},
            "capacity": {**empty, **self._capacity},
        }
        return self._env.Activation({"device": variables})


def _attribute_value(name: str, attribute: Any) -> Any:
    if attribute.int_value is not None:
        return attribute.int_value
    if attribute.bool_value is not None:
        return attribute.bool_value
    if attribute.string_value is not None:
        return attribute.string_value
    if attribute.version_value is not None:
        try:
            return semver_value(attribute.version_value)
        except CelFunctionError as exc:
            raise CelFunctionError(f"attribute {name}: parse semantic version: {exc}") from None
    raise CelFunctionError(f"attribute {name}: unsupported attribute value")


def split_qualified_name(name: str, default_domain: str) -> tuple[str, str]:
    """``domain/id`` -> (domain, id); a bare ``id`` takes ``default_domain``."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (default_domain, name)


class CompiledSelector:
    """A checked CEL program over ``device``, compiled once."""

    __slots__ = ("expression", "program")

    def __init__(self, expression: str, program: Any) -> None:
        self.expression = expression
        self.program = program


class CelEnvironment:
    """The DRA CEL environment with its caches; one per scheduler (not thread-safe)."""

    def __init__(self, *, max_programs: int = 1024, max_devices: int = 262_144) -> None:
        self.env = cel.NewEnv(
            descriptor_pool=cel_library.POOL,
            variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)},
            extensions=[
                ext_bindings.ExtBindings(),
                ext_strings.ExtStrings(2),
                ext_optional.ExtOptional(),
            ],
            functions=cel_library.kubernetes_functions(),
        )
        self.env.compile("true")  # the runtime reports a bad declaration on first use
        self._programs: dict[str, CompiledSelector | CelCompileError] = {}
        self._devices: dict[DeviceIdentity, CelDevice] = {}
        self._max_programs = max_programs
        self._max_devices = max_devices
        self.evaluations = 0  # runtime evaluations (cache misses), for tests and benches

    # -- compile -----------------------------------------------------------------------

    def compile(self, expression: str) -> CompiledSelector:
        """The program for ``expression``, compiled on first use; raises
        ``CelCompileError`` (also cached) for an invalid one."""
        cached = self._programs.get(expression)
        if cached is None:
            cached = self._compile(expression)
            if len(self._programs) >= self._max_programs:
                self._programs.clear()
            self._programs[expression] = cached
        if isinstance(cached, CelCompileError):
            raise cached
        return cached

    def _compile(self, expression: str) -> CompiledSelector | CelCompileError:
        size = len(expression.encode())
        if size > MAX_EXPRESSION_BYTES:
            return CelCompileError(
                expression,
                f"compilation failed: expression is {size} bytes, more than the "
                f"{MAX_EXPRESSION_BYTES} allowed",
            )
        try:
            program = self.env.compile(expression)
        except RuntimeError as exc:
            return CelCompileError(expression, f"compilation failed: {_clean(str(exc))}")
        kind = program.return_type().name()
        if kind not in ("BOOL", "DYN"):
            return CelCompileError(
                expression, f"must evaluate to bool or the unknown type, not {kind.lower()}"
            )
        return CompiledSelector(expression, program)

    # -- devices -----------------------------------------------------------------------

    def device(self, identity: DeviceIdentity, device: Device) -> CelDevice:
        """The CEL view of ``device`` (published by ``identity.driver``), kept across
        calls for the same identity so its results are reused. An identity without a
        slice version (an object that did not come from an API server) is not kept."""
        if not identity.slice_version:
            return CelDevice(self.env, identity.driver, device)
        found = self._devices.get(identity)
        if found is None:
            if len(self._devices) >= self._max_devices:
                self._devices.clear()
            found = CelDevice(self.env, identity.driver, device)
            self._devices[identity] = found
        return found

    # -- evaluate ----------------------------------------------------------------------

    def matches(self, expression: str, device: CelDevice) -> bool:
        """Whether ``device`` satisfies ``expression``: cached per (device, expression).
        Raises ``CelCompileError`` or ``CelRuntimeError``."""
        result = device.results.get(expression)
        if result is None:
            result = self._evaluate(self.compile(expression), device)
            if len(device.results) >= _MAX_RESULTS_PER_DEVICE:
                device.results.clear()
            device.results[expression] = result
        if isinstance(result, CelRuntimeError):
            raise result
        return result

    def _evaluate(self, selector: CompiledSelector, device: CelDevice) -> bool | CelRuntimeError:
        self.evaluations += 1
        expression = selector.expression
        if device.error:
            return CelRuntimeError(expression, device.error)
        activation = device.activation
        defaulted: frozenset[str] = frozenset()
        while True:
            try:
                value = selector.program.eval(activation)
            except RuntimeError as exc:  # cel-cpp's iteration budget
                message = _COST_EXCEEDED if "budget" in str(exc) else _clean(str(exc))
                return CelRuntimeError(expression, message)
            result = value.value()
            if result is True or result is False:
                return result
            kind = value.type().name()
            if kind != "ERROR":
                return CelRuntimeError(
                    expression, f"CEL result of type {kind.lower()} could not be converted to bool"
                )
            message = _clean(str(result))
            missing = _NO_SUCH_KEY.search(message)
            if missing is None:
                return CelRuntimeError(expression, message)
            key = missing.group(1)
            # Upstream: a domain the device lacks is an empty map, not a missing key.
            # Retry with that domain present; if it still fails, the key is missing.
            if key in defaulted or len(defaulted) >= _MAX_DEFAULTED_DOMAINS:
                return CelRuntimeError(expression, f"no such key: {key}{_HINT}")
            defaulted = defaulted | {key}
            activation = device.with_domains(defaulted)


def _clean(message: str) -> str:
    """cel-cpp's status text without its code prefix and suffix."""
    message = _STATUS_PREFIX.sub("", message.strip())
    message = re.sub(r" \[[A-Z_]+\]$", "", message)
    return message.removeprefix("ERROR: ").strip()
