"""DRA CEL selectors: the ``device`` variable, every Kubernetes function troupe adds,
each kind of error, and the caches (troupe/api/dra/cel.py, cel_library.py).

Expected values follow upstream's libraries (k8s.io/apiserver/pkg/cel/library) and
k8s.io/dynamic-resource-allocation/cel/compile.go."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.dra.cel import (
    MAX_EXPRESSION_BYTES,
    CelCompileError,
    CelDevice,
    CelEnvironment,
    CelRuntimeError,
    DeviceIdentity,
)
from troupe.api.dra.objects import Device

DRIVER = "gpu.example.com"


def make_device(
    attributes: dict[str, dict[str, Any]] | None = None,
    capacity: dict[str, str] | None = None,
    *,
    multi: bool | None = None,
    name: str = "gpu-0",
) -> Device:
    return Device.model_validate(
        {
            "name": name,
            "attributes": attributes or {},
            "capacity": {k: {"value": v} for k, v in (capacity or {}).items()},
            "allowMultipleAllocations": multi,
        }
    )


GPU = make_device(
    {
        "model": {"string": "h100"},
        "index": {"int": 3},
        "healthy": {"bool": True},
        "driverVersion": {"version": "1.2.3-rc.1+build.5"},
        "numa.example.com/node": {"int": 1},
    },
    {"memory": "80Gi", "cores": "1500m"},
)


@pytest.fixture(scope="module")
def env() -> CelEnvironment:
    return CelEnvironment()


def view(env: CelEnvironment, device: Device = GPU, driver: str = DRIVER) -> CelDevice:
    return env.device(DeviceIdentity(driver, "pool", device.name, "slice", "1"), device)


# (what it shows, expression) pairs that must be true on GPU.
TRUE_ON_GPU = [
    ("the driver", 'device.driver == "gpu.example.com"'),
    (
        "an unqualified attribute takes the driver's domain",
        'device.attributes["gpu.example.com"].model == "h100"',
    ),
    ("a qualified attribute keeps its domain", 'device.attributes["numa.example.com"].node == 1'),
    ("an int attribute", 'device.attributes["gpu.example.com"].index > 2'),
    ("a bool attribute", 'device.attributes["gpu.example.com"].healthy'),
    ("index syntax", 'device.attributes["gpu.example.com"]["model"] == "h100"'),
    ("a missing domain is an empty map", 'device.attributes["other.example.com"].size() == 0'),
    ("a missing capacity domain too", 'device.capacity["other.example.com"].size() == 0'),
    ("allowMultipleAllocations defaults to false", "!device.allowMultipleAllocations"),
    ("has() on a present key", 'has(device.attributes["gpu.example.com"].model)'),
    ("has() on a missing key", '!has(device.attributes["gpu.example.com"].vendor)'),
    ("optional chaining", 'device.attributes["gpu.example.com"].?vendor.orValue("x") == "x"'),
    (
        "cel.bind",
        'cel.bind(g, device.attributes["gpu.example.com"], g.model == "h100" && g.index == 3)',
    ),
    # quantity
    (
        "capacity is a quantity",
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
    ),
    ("compareTo equal", 'quantity("200M").compareTo(quantity("0.2G")) == 0'),
    ("compareTo less", 'quantity("50M").compareTo(quantity("50Mi")) == -1'),
    ("isGreaterThan", 'quantity("150Mi").isGreaterThan(quantity("100Mi"))'),
    ("isLessThan", 'quantity("50M").isLessThan(quantity("100M"))'),
    ("equality is by value", 'quantity("1") == quantity("1000m")'),
    ("isQuantity", 'isQuantity("1.3Gi") && !isQuantity("200K") && !isQuantity("Three")'),
    ("sign as a member", 'quantity("-5").sign() == -1 && quantity("0").sign() == 0'),
    ("sign as a function", 'sign(quantity("2k")) == 1'),
    ("asInteger", 'quantity("50k").asInteger() == 50000'),
    ("isInteger", 'quantity("50k").isInteger() && !quantity("1500m").isInteger()'),
    ("isInteger beyond int64", '!quantity("9999999999999999999999G").isInteger()'),
    ("asApproximateFloat", 'device.capacity["gpu.example.com"].cores.asApproximateFloat() == 1.5'),
    ("add a quantity", 'quantity("50k").add(quantity("20k")) == quantity("70k")'),
    ("add an int", 'quantity("50k").add(20) == quantity("50020")'),
    ("sub both ways", 'quantity("50k").sub(quantity("20k")).sub(10000) == quantity("20k")'),
    ("mul", 'quantity("2Gi").mul(2) == quantity("4Gi")'),
    # semver
    (
        "a version attribute is a semver",
        'device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("1.2.3"))',
    ),
    (
        "build metadata does not take part in ==",
        'device.attributes["gpu.example.com"].driverVersion == semver("1.2.3-rc.1")',
    ),
    (
        "major, minor, patch",
        'semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2'
        ' && semver("1.2.3").patch() == 3',
    ),
    (
        "semver compareTo",
        'semver("1.2.3").compareTo(semver("2.0.0")) == -1'
        ' && semver("1.2.3").compareTo(semver("0.1.2")) == 1',
    ),
    (
        "numeric pre-release identifiers sort numerically",
        'semver("1.0.0-alpha.2").isLessThan(semver("1.0.0-alpha.10"))',
    ),
    (
        "numeric identifiers rank below alphanumeric ones",
        'semver("1.0.0-1").isLessThan(semver("1.0.0-alpha"))',
    ),
    (
        "a release ranks above its pre-releases",
        'semver("1.0.0").isGreaterThan(semver("1.0.0-rc.1"))',
    ),
    ("normalize", 'semver("v01.2", true) == semver("1.2.0")'),
    ("isSemver", 'isSemver("1.0.0") && !isSemver("v1.0") && isSemver("v1.0", true)'),
    # lists, regex, sets, strings
    ("isSorted", "[1, 2, 3].isSorted() && ![2, 1].isSorted()"),
    ("sum", "[1, 2, 3].sum() == 6"),
    ("min and max", "[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3"),
    ("find", '"abc 123".find("[0-9]+") == "123" && "abc".find("[0-9]") == ""'),
    ("findAll", '"a1b22c333".findAll("[0-9]+") == ["1", "22", "333"]'),
    ("findAll with a limit", '"a1b22c333".findAll("[0-9]+", 2) == ["1", "22"]'),
    ("matches", 'device.attributes["gpu.example.com"].model.matches("^h[0-9]+$")'),
    ("sets.contains", "sets.contains([1, 2, 3], [3, 1])"),
    ("sets.equivalent", "sets.equivalent([1, 2], [2, 1, 1])"),
    ("sets.intersects", 'sets.intersects(["a", "b"], ["c", "b"])'),
    ("a bool is not a number in sets", "!sets.contains([1], [true])"),
    ("strings extension", '"A,B".lowerAscii().split(",") == ["a", "b"]'),
    ("macros", "[1, 2, 3].exists(x, x > 2) && [1, 2].all(x, x > 0)"),
]


@pytest.mark.parametrize(("what", "expression"), TRUE_ON_GPU, ids=[w for w, _ in TRUE_ON_GPU])
def test_true_on_the_gpu(env: CelEnvironment, what: str, expression: str) -> None:
    assert env.matches(expression, view(env)) is True
    # The negation is false: no expression here is true by accident of the harness.
    assert env.matches(f"!({expression})", view(env)) is False


RUNTIME_ERRORS = [
    (
        "a missing key",
        'device.attributes["gpu.example.com"].vendor == "x"',
        "no such key: vendor. consider using CEL optional chaining",
    ),
    (
        "a missing key in a missing domain",
        'device.attributes["other.example.com"].vendor == "x"',
        "no such key: vendor",
    ),
    (
        "a missing capacity",
        'device.capacity["gpu.example.com"].hbm.isInteger()',
        "no such key: hbm",
    ),
    (
        "a bad quantity",
        'quantity("1,5").sign() == 1',
        "quantities must match the regular expression",
    ),
    (
        "asInteger of a fraction",
        'quantity("1500m").asInteger() == 1',
        "cannot convert value to integer",
    ),
    ("a bad semver", 'semver("v1.0").major() == 1', "invalid semantic version 'v1.0'"),
    (
        "a short version with metadata",
        'semver("1-rc", true).major() == 1',
        "short version cannot contain PreRelease/Build meta data",
    ),
    ("min of an empty list", "[].min() == 1", "min called on empty list"),
    ("a bad regular expression", '"a".find("[") == ""', "invalid regular expression"),
    (
        "a dyn result that is not a bool",
        'device.attributes["gpu.example.com"].model',
        "CEL result of type string could not be converted to bool",
    ),
    (
        "the cost limit",
        "["
        + ",".join(map(str, range(100)))
        + "].all(a, ["
        + ",".join(map(str, range(100)))
        + "].all(b, true))",
        "operation cancelled: actual cost limit exceeded",
    ),
]


@pytest.mark.parametrize(
    ("what", "expression", "message"), RUNTIME_ERRORS, ids=[w for w, _, _ in RUNTIME_ERRORS]
)
def test_runtime_errors(env: CelEnvironment, what: str, expression: str, message: str) -> None:
    with pytest.raises(CelRuntimeError) as caught:
        env.matches(expression, view(env))
    assert message in caught.value.message
    assert caught.value.expression == expression


COMPILE_ERRORS = [
    ("a syntax error", "device.driver ==", "compilation failed: <input>:1:"),
    ("an undeclared reference", "noSuchVar", "undeclared reference to 'noSuchVar'"),
    (
        "a result that is not a bool",
        "device.attributes.size()",
        "must evaluate to bool or the unknown type, not int",
    ),
    ("a type error", 'quantity("1") < quantity("2")', "found no matching overload for '_<_'"),
    (
        "a quantity is not a semver",
        'quantity("1").compareTo(semver("1.0.0")) == 0',
        "found no matching overload for 'compareTo'",
    ),
    (
        "strings functions past version 2",
        '"abc".reverse() == "cba"',
        "undeclared reference to 'reverse'",
    ),
    ("too long", "true || " * 1400 + "true", f"more than the {MAX_EXPRESSION_BYTES} allowed"),
]


@pytest.mark.parametrize(
    ("what", "expression", "message"), COMPILE_ERRORS, ids=[w for w, _, _ in COMPILE_ERRORS]
)
def test_compile_errors(env: CelEnvironment, what: str, expression: str, message: str) -> None:
    with pytest.raises(CelCompileError) as caught:
        env.compile(expression)
    assert message in caught.value.message
    with pytest.raises(CelCompileError):  # a device never sees it: the claim is invalid
        env.matches(expression, view(env))


def test_ten_kib_exactly_is_allowed(env: CelEnvironment) -> None:
    expression = "true" + " " * (MAX_EXPRESSION_BYTES - 4)
    assert env.matches(expression, view(env)) is True
    with pytest.raises(CelCompileError):
        env.compile(expression + " ")


def test_a_version_attribute_that_is_no_semver_fails_every_evaluation(env: CelEnvironment) -> None:
    bad = make_device({"v": {"version": "1.0"}, "m": {"string": "x"}}, name="bad")
    with pytest.raises(CelRuntimeError) as caught:
        env.matches('device.attributes["gpu.example.com"].m == "x"', view(env, bad))
    assert "attribute v: parse semantic version" in caught.value.message


def test_allow_multiple_allocations_is_seen(env: CelEnvironment) -> None:
    shared = make_device(multi=True, name="shared")
    assert env.matches("device.allowMultipleAllocations", view(env, shared))


def test_a_program_is_compiled_once() -> None:
    env = CelEnvironment()
    expression = 'device.driver == "a"'
    assert env.compile(expression) is env.compile(expression)


def test_results_are_cached_per_device_and_expression() -> None:
    env = CelEnvironment()
    expression = 'device.attributes["gpu.example.com"].model == "h100"'
    first = view(env)
    assert env.matches(expression, first) and env.evaluations == 1
    assert view(env) is first  # same identity, same view
    assert env.matches(expression, view(env)) and env.evaluations == 1
    other = make_device({"model": {"string": "a100"}}, name="gpu-1")
    assert not env.matches(expression, view(env, other)) and env.evaluations == 2


def test_a_new_slice_version_is_evaluated_afresh() -> None:
    env = CelEnvironment()
    expression = 'device.attributes["gpu.example.com"].model == "h100"'
    old = env.device(DeviceIdentity(DRIVER, "pool", "gpu-0", "slice", "1"), GPU)
    new = env.device(
        DeviceIdentity(DRIVER, "pool", "gpu-0", "slice", "2"),
        make_device({"model": {"string": "a100"}}),
    )
    assert env.matches(expression, old) and not env.matches(expression, new)
    assert env.evaluations == 2


def test_a_device_without_slice_version_is_not_kept() -> None:
    env = CelEnvironment()
    identity = DeviceIdentity(DRIVER, "pool", "gpu-0")
    assert env.device(identity, GPU) is not env.device(identity, GPU)


def test_runtime_errors_are_cached_too() -> None:
    env = CelEnvironment()
    expression = 'device.attributes["gpu.example.com"].vendor == "x"'
    for _ in range(2):
        with pytest.raises(CelRuntimeError):
            env.matches(expression, view(env))
    assert env.evaluations == 1


def test_the_driver_is_the_default_domain_of_its_own_devices(env: CelEnvironment) -> None:
    other_driver = view(env, GPU, driver="tpu.example.com")
    assert env.matches('device.attributes["tpu.example.com"].model == "h100"', other_driver)
    assert env.matches('device.attributes["gpu.example.com"].size() == 0', other_driver)
