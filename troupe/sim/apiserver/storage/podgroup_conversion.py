"""The native PodGroup and Workload between ``scheduling.k8s.io/v1alpha2`` and ``v1beta1``.

Kubernetes 1.37 serves one PodGroup (and one Workload) at every enabled version of its
resource; the embedded cluster stores them in the ``v1beta1`` shape (the hub) and shows
``v1alpha2`` through these functions, called by ``conversion.py``:

- PodGroup ``spec.podGroupTemplateRef.workload {workloadName, podGroupTemplateName}``
  (v1alpha2) <-> ``spec.workloadRef {workloadName, templateName}`` (v1beta1). The flat
  ``podGroupTemplateRef {workloadName, podGroupTemplateName}`` that earlier troupe
  releases wrote is read too.
- PodGroup ``spec.disruptionMode`` ``Pod`` | ``PodGroup`` <-> ``{single: {}}`` |
  ``{all: {}}``.
- ``status.conditions`` are copied as they are, as upstream's generated conversion does
  (a ``metav1.Condition`` list is copied verbatim): a 1.37 scheduler's
  ``PodGroupInitiallyScheduled`` is what a v1alpha2 reader sees too.
- Workload: the ``podGroupTemplates[]`` shape is the same at every version. The stored
  object also holds ``spec.compositePodGroupTemplates[]``, which only ``v1alpha3`` has
  (KEP-6012): ``v1alpha3`` shows the stored object as it is, ``v1beta1`` and
  ``v1alpha2`` drop the field both ways, as upstream's conversion drops a field its
  peer version lacks (no annotation carries it). A write through those views keeps
  what is stored (``registry.workloads.WorkloadStrategy``).

Every function takes and returns a fresh dict and never changes its argument.
"""

from __future__ import annotations

from typing import Any, Final

Obj = dict[str, Any]

COMPOSITE_TEMPLATES: Final = "compositePodGroupTemplates"
_DISRUPTION_TO_BETA: Final = {"Pod": "single", "PodGroup": "all"}
_DISRUPTION_TO_ALPHA: Final = {beta: alpha for alpha, beta in _DISRUPTION_TO_BETA.items()}


def pod_group_to_v1beta1(obj: Obj) -> Obj:
    """A v1alpha2 PodGroup as the v1beta1 object stored for it."""
    out = dict(obj)
    spec = dict(obj.get("spec") or {})
    ref = spec.pop("podGroupTemplateRef", None)
    if isinstance(ref, dict):
        nested = ref.get("workload")
        inner: Obj = nested if isinstance(nested, dict) else ref
        workload_ref: Obj = {}
        if inner.get("workloadName"):
            workload_ref["workloadName"] = inner["workloadName"]
        if inner.get("podGroupTemplateName"):
            workload_ref["templateName"] = inner["podGroupTemplateName"]
        spec["workloadRef"] = workload_ref
    mode = spec.get("disruptionMode")
    if isinstance(mode, str):
        # An unknown value is kept as a one-member union so validation names it.
        spec["disruptionMode"] = {_DISRUPTION_TO_BETA.get(mode, mode): {}}
    if "spec" in obj:
        out["spec"] = spec
    return out


def pod_group_to_v1alpha2(obj: Obj) -> Obj:
    """A stored (v1beta1) PodGroup as v1alpha2 shows it."""
    out = dict(obj)
    spec = dict(obj.get("spec") or {})
    ref = spec.pop("workloadRef", None)
    if isinstance(ref, dict):
        workload: Obj = {}
        if ref.get("workloadName"):
            workload["workloadName"] = ref["workloadName"]
        if ref.get("templateName"):
            workload["podGroupTemplateName"] = ref["templateName"]
        spec["podGroupTemplateRef"] = {"workload": workload}
    mode = spec.get("disruptionMode")
    if isinstance(mode, dict):
        chosen = next((m for m in ("all", "single") if m in mode), None)
        if chosen is None:
            spec.pop("disruptionMode")
        else:
            spec["disruptionMode"] = _DISRUPTION_TO_ALPHA[chosen]
    if "spec" in obj:
        out["spec"] = spec
    return out


def workload_identity(obj: Obj) -> Obj:
    """The Workload's ``podGroupTemplates[]`` shape is the same at every version."""
    return dict(obj)


def workload_without_composites(obj: Obj) -> Obj:
    """A Workload as ``v1beta1`` and ``v1alpha2`` have it: no
    ``compositePodGroupTemplates``, which only ``v1alpha3`` has."""
    out = dict(obj)
    spec = obj.get("spec")
    if isinstance(spec, dict) and COMPOSITE_TEMPLATES in spec:
        out["spec"] = {k: v for k, v in spec.items() if k != COMPOSITE_TEMPLATES}
    return out
