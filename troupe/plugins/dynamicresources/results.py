"""The ``status.allocation`` of a claim from what the search picked.

Follows the tail of upstream's ``Allocate`` and ``createNodeSelector``
(``structured/internal/incubating/allocator_incubating.go``):

- one result per device in the order picked: request (``r`` or ``r/sub``), driver, pool,
  device, ``adminAccess`` when asked, the request's tolerations, the device's binding
  conditions, and for a shared device its ``shareID`` and ``consumedCapacity``;
- configs: each class's ``config`` once (listing every request of that class), then the
  claim's ``config`` entries that name an allocated request or subrequest (or none); a
  config whose requests cover every request of the claim lists none ("applies to all");
- ``nodeSelector``: ``metadata.name In [node]`` when a device is local to the node (its
  slice or itself names a node, or it binds to the node), else the union of the slices'
  one-term selectors, else none (the devices are reachable from anywhere).

The allocation timestamp is the caller's to set. Called by ``allocator.py``.
"""

from __future__ import annotations

from troupe.api.dra.objects import (
    SOURCE_CLAIM,
    SOURCE_CLASS,
    AllocationResult,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
)
from troupe.api.objects import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from troupe.plugins.dynamicresources.errors import AllocationError
from troupe.plugins.dynamicresources.requests import ClaimPlan
from troupe.plugins.dynamicresources.search import Picked


def allocation_result(plan: ClaimPlan, picked: list[Picked], node_name: str) -> AllocationResult:
    results = [_device_result(p) for p in picked]
    return AllocationResult(
        devices=DeviceAllocationResult(results=results, config=_configs(plan)),
        node_selector=_node_selector(plan, picked, node_name),
    )


def _device_result(p: Picked) -> DeviceRequestAllocationResult:
    device = p.entry.device
    return DeviceRequestAllocationResult(
        request=p.request.full_name,
        driver=p.entry.id.driver,
        pool=p.entry.id.pool,
        device=p.entry.id.device,
        admin_access=True if p.request.admin_access else None,
        tolerations=list(p.request.tolerations),
        binding_conditions=list(device.binding_conditions),
        binding_failure_conditions=list(device.binding_failure_conditions),
        share_id=p.share_id,
        consumed_capacity={k: a.text for k, a in (p.consumed or {}).items()},
    )


def _configs(plan: ClaimPlan) -> list[DeviceAllocationConfiguration]:
    chosen = [alternatives[plan.selected[i]] for i, alternatives in enumerate(plan.requests)]
    configs: list[DeviceAllocationConfiguration] = []
    by_class: dict[str, list[DeviceAllocationConfiguration]] = {}
    for rd in chosen:
        name = rd.device_class.name
        if name in by_class:
            for config in by_class[name]:
                config.requests.append(rd.full_name)
            continue
        by_class[name] = [
            DeviceAllocationConfiguration(
                source=SOURCE_CLASS, requests=[rd.full_name], opaque=config.opaque
            )
            for config in rd.device_class.spec.config
        ]
        configs += by_class[name]
    names = [(rd.parent or rd.name, rd.full_name) for rd in chosen]
    for claim_config in plan.claim.spec.devices.config:
        wanted = claim_config.requests
        if not wanted or any(request in wanted or full in wanted for request, full in names):
            configs.append(
                DeviceAllocationConfiguration(
                    source=SOURCE_CLAIM, requests=list(wanted), opaque=claim_config.opaque
                )
            )
    for config in configs:
        if config.requests and all(
            request in config.requests or full in config.requests for request, full in names
        ):
            config.requests = []  # empty means all
    return configs


def _local(node_name: str) -> NodeSelector:
    requirement = NodeSelectorRequirement(key="metadata.name", operator="In", values=[node_name])
    return NodeSelector(node_selector_terms=[NodeSelectorTerm(match_fields=[requirement])])


def _node_selector(plan: ClaimPlan, picked: list[Picked], node_name: str) -> NodeSelector | None:
    term = NodeSelectorTerm()
    for p in picked:
        name, _all_nodes, selector = p.entry.node_selection()
        if name or p.entry.device.binds_to_node:
            return _local(node_name)
        if selector is None or not selector.node_selector_terms:
            continue
        if len(selector.node_selector_terms) > 1:
            raise AllocationError(
                f"create NodeSelector for claim {plan.claim.metadata.name}: unsupported"
                f" ResourceSlice.NodeSelector with {len(selector.node_selector_terms)} terms"
            )
        only = selector.node_selector_terms[0]
        _merge(only.match_fields, term.match_fields)
        _merge(only.match_expressions, term.match_expressions)
    if term.match_fields or term.match_expressions:
        return NodeSelector(node_selector_terms=[term])
    return None


def _merge(source: list[NodeSelectorRequirement], into: list[NodeSelectorRequirement]) -> None:
    for requirement in source:
        if not any(
            r.key == requirement.key
            and r.operator == requirement.operator
            and set(r.values) == set(requirement.values)
            for r in into
        ):
            into.append(requirement)
