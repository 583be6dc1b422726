"""Pod resource requests and node allocatable as integer vectors.

The scheduler cache calls ``pod_requests`` and ``pod_nonzero_requests`` once for
every pod it adds (assumed, bound or observed) and ``node_allocatable`` for every node;
the NodeTable columns and the NodeResourcesFit / BalancedAllocation plugins read the
results. The arithmetic is upstream's:

* ``k8s.io/component-helpers/resource`` ``PodRequests`` (``AggregateContainerRequests``):
  regular containers are summed; restartable init containers (sidecars,
  ``restartPolicy: Always``, KEP-753) are added to that sum and stay running while
  later init containers run; each regular init container needs its own request plus
  the sidecars started before it, and the pod needs the maximum of all of that and the
  sum; ``spec.overhead`` (KEP-688) is added last.
* the scheduler's ``calculateResource`` (``pkg/scheduler/framework/types.go``): the
  whole-pod sum is converted once, cpu with ``MilliValue`` and everything else with
  ``Value``, both rounding up. Sums are kept in exact nano-units until then, so two
  ``0.5m`` containers request 1 millicore, as upstream, not 2.
* for scoring, ``NonMissingContainerRequests``: a container with no cpu request counts
  ``DefaultMilliCPURequest`` (100m) and one with no memory request
  ``DefaultMemoryRequest`` (200Mi); an explicit zero stays zero.

Amounts are bounded by ``MAX_AMOUNT`` (10T cores, 10P of anything else;
docs/reliability.md): ``node_allocatable`` and ``pod_requests`` raise
``AmountTooLarge`` naming the object and field for more, and ``pod_requests(pod,
cap=True)`` (an assigned pod, which occupies its node whatever troupe thinks of it)
counts such a request as ``MAX_AMOUNT`` instead. Upstream's int64 conversions overflow
there, with an undefined result.

A request absent for a resource that has a limit defaults to the limit, as the API
server's ``SetDefaults_Pod`` does, so pods built without API defaulting (tests, the
embedded cluster) are counted like pods read from a real API server. Pod-level
``spec.resources`` (KEP-2837) is not modelled in ``troupe.api.objects`` and is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Final, TypeAlias

from troupe.api.objects import Container, Node, Pod
from troupe.api.quantity import (
    MAX_AMOUNT,
    NANOS_PER_MILLI,
    NANOS_PER_UNIT,
    AmountTooLarge,
    QuantityError,
    format_quantity,
    nanos_to_resource_int,
    parse_nanos,
)

ResourceVector: TypeAlias = dict[str, int]
"""Resource name -> amount: cpu in millicores, everything else in integer base units."""

CPU: Final = "cpu"
MEMORY: Final = "memory"
PODS: Final = "pods"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"

DEFAULT_MILLI_CPU_REQUEST: Final = 100
"""Upstream ``schedutil.DefaultMilliCPURequest``: cpu a request-less container scores as."""
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024
"""Upstream ``schedutil.DefaultMemoryRequest`` (200Mi), in bytes."""

_NONZERO_DEFAULTS_NANOS: Final = {
    CPU: DEFAULT_MILLI_CPU_REQUEST * NANOS_PER_MILLI,
    MEMORY: DEFAULT_MEMORY_REQUEST * NANOS_PER_UNIT,
}

_NanoVector: TypeAlias = dict[str, int]


_ERR_NEGATIVE: Final = "must be greater than or equal to 0"


def _parse_map(values: Mapping[str, str], where: str) -> _NanoVector:
    """Parse a resource map; a negative amount is refused as the API server's
    validation does (``ValidateNonnegativeQuantity``)."""
    parsed: _NanoVector = {}
    for name, text in values.items():
        try:
            nanos = parse_nanos(text)
        except QuantityError as err:
            raise QuantityError(err.value, err.reason, f"{where}[{name}]") from None
        if nanos < 0:
            raise QuantityError(text, _ERR_NEGATIVE, f"{where}[{name}]")
        parsed[name] = nanos
    return parsed


def _container_requests(
    container: Container, where: str, defaults: Mapping[str, int]
) -> _NanoVector:
    """Requests of one container in nano-units, after limit and non-zero defaulting."""
    resources = container.resources
    requests = _parse_map(resources.requests, f"{where}.resources.requests")
    if resources.limits:
        # SetDefaults_Pod: a limit without a request for the same resource is the request.
        limits = _parse_map(resources.limits, f"{where}.resources.limits")
        for name, nanos in limits.items():
            requests.setdefault(name, nanos)
    for name, nanos in defaults.items():
        # applyNonMissing: only an absent request is replaced; an explicit 0 stays 0.
        requests.setdefault(name, nanos)
    return requests


def _add(total: _NanoVector, extra: Mapping[str, int]) -> None:
    for name, nanos in extra.items():
        total[name] = total.get(name, 0) + nanos


def _max_into(total: _NanoVector, other: Mapping[str, int]) -> None:
    for name, nanos in other.items():
        if nanos > total.get(name, 0):
            total[name] = nanos


def _pod_request_nanos(pod: Pod, defaults: Mapping[str, int]) -> _NanoVector:
    where = f"pod {pod.key}: spec"
    total: _NanoVector = {}
    for i, container in enumerate(pod.spec.containers):
        _add(total, _container_requests(container, f"{where}.containers[{i}]", defaults))

    sidecars: _NanoVector = {}  # sidecars started so far; they keep running
    init_peak: _NanoVector = {}  # the most any init step needs at once
    for i, container in enumerate(pod.spec.init_containers):
        requests = _container_requests(container, f"{where}.initContainers[{i}]", defaults)
        if container.restart_policy == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            _max_into(init_peak, sidecars)
        else:
            step = dict(requests)
            _add(step, sidecars)
            _max_into(init_peak, step)
    _max_into(total, init_peak)

    if pod.spec.overhead:
        _add(total, _parse_map(pod.spec.overhead, f"{where}.overhead"))
    return total


def _to_vector(nanos_by_name: Mapping[str, int], pod: Pod, cap: bool) -> ResourceVector:
    vector: ResourceVector = {}
    for name, nanos in nanos_by_name.items():
        amount = nanos_to_resource_int(name, nanos)
        if amount > MAX_AMOUNT:
            if not cap:
                raise _too_large(pod, name, nanos)
            amount = MAX_AMOUNT
        if amount:
            vector[name] = amount
    return vector


def _too_large(pod: Pod, name: str, total_nanos: int) -> AmountTooLarge:
    """The error for a pod asking more than ``MAX_AMOUNT`` of ``name``: it names the
    first field that alone asks too much, or else the pod's total."""
    spec = pod.spec
    fields: list[tuple[str, str | None]] = []
    for kind, containers in (
        ("containers", spec.containers),
        ("initContainers", spec.init_containers),
    ):
        for i, c in enumerate(containers):
            where = f"spec.{kind}[{i}].resources"
            if name in c.resources.requests:
                fields.append((f"{where}.requests[{name}]", c.resources.requests[name]))
            else:  # the limit stands in for an absent request
                fields.append((f"{where}.limits[{name}]", c.resources.limits.get(name)))
    fields.append((f"spec.overhead[{name}]", (spec.overhead or {}).get(name)))
    for where, text in fields:
        if text is not None and nanos_to_resource_int(name, parse_nanos(text)) > MAX_AMOUNT:
            return AmountTooLarge(text, name, f"pod {pod.key}: {where}")
    total = format_quantity(Fraction(total_nanos, NANOS_PER_UNIT))
    where = "spec (containers, init containers and overhead together)"
    return AmountTooLarge(total, name, f"pod {pod.key}: {where}[{name}]")


def pod_requests(pod: Pod, *, cap: bool = False) -> ResourceVector:
    """What ``pod`` requests of each resource, as upstream ``PodRequests`` computes it.

    cpu in millicores, other resources in base units (bytes, devices); zero entries
    are omitted. Raises QuantityError naming the pod and field of a malformed quantity,
    and AmountTooLarge for more than ``MAX_AMOUNT`` of a resource unless ``cap``, which
    counts that as ``MAX_AMOUNT``.
    """
    return _to_vector(_pod_request_nanos(pod, {}), pod, cap)


def pod_nonzero_requests(pod: Pod) -> tuple[int, int]:
    """(milliCPU, memory bytes) of ``pod`` for scoring, with upstream's non-zero defaults.

    Containers without a cpu request count 100m and without a memory request 200Mi, so
    that spreading and balanced-allocation scores see best-effort pods. Each is at
    most ``MAX_AMOUNT`` (the defaults may lift a request at the limit past it).
    """
    total = _pod_request_nanos(pod, _NONZERO_DEFAULTS_NANOS)
    return (
        min(nanos_to_resource_int(CPU, total.get(CPU, 0)), MAX_AMOUNT),
        min(nanos_to_resource_int(MEMORY, total.get(MEMORY, 0)), MAX_AMOUNT),
    )


def node_allocatable(node: Node) -> ResourceVector:
    """What ``node`` offers to pods: ``status.allocatable``, with ``status.capacity``
    standing in for a resource that allocatable does not list. Zero entries are kept
    (a node that reports ``nvidia.com/gpu: 0`` has none). Raises QuantityError naming
    the node and field of an amount that does not parse, is negative, or is more than
    ``MAX_AMOUNT`` (``AmountTooLarge``)."""
    status = node.status
    where = f"node {node.metadata.name}: status"
    allocatable = _parse_map(status.allocatable, f"{where}.allocatable")
    missing = {name: text for name, text in status.capacity.items() if name not in allocatable}
    capacity = _parse_map(missing, f"{where}.capacity")
    vector: ResourceVector = {}
    for field, texts, parsed in (
        ("allocatable", status.allocatable, allocatable),
        ("capacity", missing, capacity),
    ):
        for name, nanos in parsed.items():
            amount = nanos_to_resource_int(name, nanos)
            if amount > MAX_AMOUNT:
                raise AmountTooLarge(texts[name], name, f"{where}.{field}[{name}]")
            vector[name] = amount
    return vector
