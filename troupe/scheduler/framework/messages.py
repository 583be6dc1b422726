"""User-facing scheduling messages, worded as kube-scheduler words them.

``fit_error_message`` builds the FitError text that goes into the
``FailedScheduling`` event and the ``PodScheduled`` condition:
``0/5 nodes are available: 2 node(s) had untolerated taint {dedicated: gpu}, 3 Insufficient cpu.``
"""

from __future__ import annotations

from collections.abc import Sequence

from troupe.api.framework import Diagnosis

NO_NODES_AVAILABLE = "no nodes available to schedule pods"


def fit_error_message(diagnosis: Diagnosis) -> str:
    # Upstream FitError.Error(): the PreFilter message replaces the per-node
    # histogram (every node carries the same status then); reasons are sorted as
    # plain strings ("<count> <reason>"); each part ends with ".".
    message = f"0/{diagnosis.num_nodes} nodes are available:"
    if diagnosis.pre_filter_message:
        message += f" {diagnosis.pre_filter_message}."
    else:
        reasons = sorted(f"{n} {reason}" for reason, n in diagnosis.reason_counts.items())
        if reasons:
            message += f" {', '.join(reasons)}."
    if diagnosis.post_filter_message:
        # Appended as it is (upstream no longer adds a period: preemption's own
        # message already ends with one).
        message += f" {diagnosis.post_filter_message}"
    return message


def pre_filter_excluded_reason(plugins: Sequence[str]) -> str:
    """The reason of the nodes a PreFilter result left out (upstream formats the
    sorted plugin list with Go's %v: ``[NodeAffinity]``, ``[A B]``)."""
    return f"node(s) didn't satisfy plugin(s) [{' '.join(plugins)}]"


def scheduled_message(namespace: str, name: str, node: str) -> str:
    return f"Successfully assigned {namespace}/{name} to {node}"
