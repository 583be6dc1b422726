"""Pydantic models of ``resource.k8s.io/v1``: DeviceClass, ResourceSlice, ResourceClaim
(spec and status) and ResourceClaimTemplate.

Only the fields the DRA allocator (``troupe.plugins.dynamicresources``), the CEL
selectors (``troupe.api.dra.cel``) and the embedded cluster use are modelled; unknown
fields are ignored, as in ``troupe.api.objects``. Field names follow the Kubernetes JSON
(``staging/src/k8s.io/api/resource/v1/types.go``). Enumerations a newer API server may
extend (allocation modes, taint effects, toleration operators) stay plain strings: the
allocator rejects a value it does not know with upstream's message, where a ``Literal``
would make the whole object unparsable. Quantities stay strings
(``troupe.api.quantity`` reads them).

``load`` parses one object and turns a pydantic error into a ``DraObjectError`` that
names the object and the field.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

from pydantic import Field, ValidationError

from troupe.api.config_errors import validation_problems
from troupe.api.objects import (
    KubeModel,
    KubeObject,
    NodeSelector,
    ObjectMeta,
    QuantityStr,
    kube_model,
)

GROUP: Final = "resource.k8s.io"
API_VERSION: Final = "resource.k8s.io/v1"

ALLOCATION_RESULTS_MAX_SIZE: Final = 32
"""``resourceapi.AllocationResultsMaxSize``: devices one claim may be allocated."""

EXACT_COUNT: Final = "ExactCount"
ALL: Final = "All"
SOURCE_CLASS: Final = "FromClass"
SOURCE_CLAIM: Final = "FromClaim"

# --- shared pieces ---------------------------------------------------------------------


@kube_model
class CELDeviceSelector(KubeModel):
    expression: str = ""


@kube_model
class DeviceSelector(KubeModel):
    cel: CELDeviceSelector | None = None


@kube_model
class OpaqueDeviceConfiguration(KubeModel):
    driver: str = ""
    parameters: Any = None  # a RawExtension: any JSON, passed through untouched


@kube_model
class DeviceClassConfiguration(KubeModel):
    opaque: OpaqueDeviceConfiguration | None = None


# --- DeviceClass -----------------------------------------------------------------------


@kube_model
class DeviceClassSpec(KubeModel):
    selectors: list[DeviceSelector] = Field(default_factory=list)
    config: list[DeviceClassConfiguration] = Field(default_factory=list)
    extended_resource_name: str | None = None


@kube_model
class DeviceClass(KubeObject):
    api_version: str = API_VERSION
    kind: str = "DeviceClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeviceClassSpec = Field(default_factory=DeviceClassSpec)

    @property
    def name(self) -> str:
        return self.metadata.name


# --- ResourceSlice ---------------------------------------------------------------------


@kube_model
class DeviceAttribute(KubeModel):
    """Exactly one of the four values is set (API validation)."""

    int_value: int | None = Field(default=None, alias="int")
    bool_value: bool | None = Field(default=None, alias="bool")
    string_value: str | None = Field(default=None, alias="string")
    version_value: str | None = Field(default=None, alias="version")


@kube_model
class CapacityRequestPolicyRange(KubeModel):
    min: QuantityStr | None = None
    max: QuantityStr | None = None
    step: QuantityStr | None = None


@kube_model
class CapacityRequestPolicy(KubeModel):
    default: QuantityStr | None = None
    valid_values: list[QuantityStr] = Field(default_factory=list)
    valid_range: CapacityRequestPolicyRange | None = None


@kube_model
class DeviceCapacity(KubeModel):
    value: QuantityStr
    request_policy: CapacityRequestPolicy | None = None


@kube_model
class Counter(KubeModel):
    value: QuantityStr


@kube_model
class CounterSet(KubeModel):
    name: str
    counters: dict[str, Counter] = Field(default_factory=dict)


@kube_model
class DeviceCounterConsumption(KubeModel):
    counter_set: str
    counters: dict[str, Counter] = Field(default_factory=dict)


@kube_model
class DeviceTaint(KubeModel):
    key: str
    value: str = ""
    effect: str = ""  # NoSchedule | NoExecute | None | a future one (ignored)
    time_added: str | None = None


@kube_model
class Device(KubeModel):
    name: str
    attributes: dict[str, DeviceAttribute] = Field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = Field(default_factory=dict)
    consumes_counters: list[DeviceCounterConsumption] = Field(default_factory=list)
    # Per-device node selection (KEP-4815), when the slice sets perDeviceNodeSelection.
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    taints: list[DeviceTaint] = Field(default_factory=list)
    binds_to_node: bool | None = None
    binding_conditions: list[str] = Field(default_factory=list)
    binding_failure_conditions: list[str] = Field(default_factory=list)
    allow_multiple_allocations: bool | None = None


@kube_model
class ResourcePool(KubeModel):
    name: str
    generation: int = 0
    resource_slice_count: int = 1


@kube_model
class ResourceSliceSpec(KubeModel):
    driver: str
    pool: ResourcePool
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: list[Device] = Field(default_factory=list)
    shared_counters: list[CounterSet] = Field(default_factory=list)


@kube_model
class ResourceSlice(KubeObject):
    api_version: str = API_VERSION
    kind: str = "ResourceSlice"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceSliceSpec

    @property
    def name(self) -> str:
        return self.metadata.name


# --- ResourceClaim ---------------------------------------------------------------------


@kube_model
class DeviceToleration(KubeModel):
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


@kube_model
class CapacityRequirements(KubeModel):
    requests: dict[str, QuantityStr] = Field(default_factory=dict)


@kube_model
class ExactDeviceRequest(KubeModel):
    device_class_name: str = ""
    selectors: list[DeviceSelector] = Field(default_factory=list)
    allocation_mode: str = EXACT_COUNT
    count: int = 1
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] = Field(default_factory=list)
    capacity: CapacityRequirements | None = None


@kube_model
class DeviceSubRequest(KubeModel):
    name: str
    device_class_name: str = ""
    selectors: list[DeviceSelector] = Field(default_factory=list)
    allocation_mode: str = EXACT_COUNT
    count: int = 1
    tolerations: list[DeviceToleration] = Field(default_factory=list)
    capacity: CapacityRequirements | None = None


@kube_model
class DeviceRequest(KubeModel):
    """One of ``exactly`` and ``firstAvailable`` (KEP-4816) is set."""

    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] = Field(default_factory=list)


@kube_model
class DeviceConstraint(KubeModel):
    requests: list[str] = Field(default_factory=list)
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@kube_model
class DeviceClaimConfiguration(KubeModel):
    requests: list[str] = Field(default_factory=list)
    opaque: OpaqueDeviceConfiguration | None = None


@kube_model
class DeviceClaim(KubeModel):
    requests: list[DeviceRequest] = Field(default_factory=list)
    constraints: list[DeviceConstraint] = Field(default_factory=list)
    config: list[DeviceClaimConfiguration] = Field(default_factory=list)


@kube_model
class ResourceClaimSpec(KubeModel):
    devices: DeviceClaim = Field(default_factory=DeviceClaim)


@kube_model
class DeviceRequestAllocationResult(KubeModel):
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] = Field(default_factory=list)
    binding_conditions: list[str] = Field(default_factory=list)
    binding_failure_conditions: list[str] = Field(default_factory=list)
    share_id: str | None = Field(
        default=None, validation_alias="shareID", serialization_alias="shareID"
    )
    consumed_capacity: dict[str, QuantityStr] = Field(default_factory=dict)


@kube_model
class DeviceAllocationConfiguration(KubeModel):
    source: str
    requests: list[str] = Field(default_factory=list)
    opaque: OpaqueDeviceConfiguration | None = None


@kube_model
class DeviceAllocationResult(KubeModel):
    results: list[DeviceRequestAllocationResult] = Field(default_factory=list)
    config: list[DeviceAllocationConfiguration] = Field(default_factory=list)


@kube_model
class AllocationResult(KubeModel):
    devices: DeviceAllocationResult = Field(default_factory=DeviceAllocationResult)
    node_selector: NodeSelector | None = None
    allocation_timestamp: str | None = None


@kube_model
class ResourceClaimConsumerReference(KubeModel):
    api_group: str = ""
    resource: str = ""
    name: str = ""
    uid: str = ""


@kube_model
class ResourceClaimStatus(KubeModel):
    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] = Field(default_factory=list)


@kube_model
class ResourceClaim(KubeObject):
    api_version: str = API_VERSION
    kind: str = "ResourceClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = Field(default_factory=ResourceClaimStatus)

    @property
    def key(self) -> str:
        """``namespace/name``, as upstream's ``klog.KObj`` prints it."""
        return f"{self.metadata.namespace}/{self.metadata.name}"


@kube_model
class ResourceClaimTemplateSpec(KubeModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)


@kube_model
class ResourceClaimTemplate(KubeObject):
    api_version: str = API_VERSION
    kind: str = "ResourceClaimTemplate"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimTemplateSpec = Field(default_factory=ResourceClaimTemplateSpec)


# --- parsing with errors that name the object ------------------------------------------

DraObject = DeviceClass | ResourceSlice | ResourceClaim | ResourceClaimTemplate
D = TypeVar("D", DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate)


class DraObjectError(ValueError):
    """A DRA object that does not parse: ``ResourceClaim ns/c: spec.devices...: why``."""


def _object_name(data: object) -> str:
    meta = data.get("metadata") if isinstance(data, dict) else None
    if not isinstance(meta, dict):
        return "?"
    name = str(meta.get("name", "?"))
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else name


def load(model: type[D], data: object) -> D:
    """``model`` parsed from a JSON-like ``data``; a ``DraObjectError`` naming the object
    and every bad field otherwise."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(validation_problems(exc))
        raise DraObjectError(f"{model.__name__} {_object_name(data)}: {problems}") from exc
