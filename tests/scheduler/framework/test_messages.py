"""FitError messages as kube-scheduler words them."""

from __future__ import annotations

import pytest
from troupe.api.framework import Diagnosis
from troupe.scheduler.framework.messages import fit_error_message


@pytest.mark.parametrize(
    ("diagnosis", "message"),
    [
        pytest.param(
            Diagnosis(
                5, {"Insufficient cpu": 3, "node(s) had untolerated taint {dedicated: gpu}": 2}
            ),
            "0/5 nodes are available: 2 node(s) had untolerated taint {dedicated: gpu}, "
            "3 Insufficient cpu.",
            id="reasons are sorted as plain strings with their counts",
        ),
        pytest.param(
            Diagnosis(3, {"Insufficient cpu": 3, "Insufficient memory": 1}),
            "0/3 nodes are available: 1 Insufficient memory, 3 Insufficient cpu.",
            id="a node with two reasons counts in both",
        ),
        pytest.param(
            Diagnosis(4, {"Insufficient cpu": 4}, pre_filter_message="pod has unbound claims"),
            "0/4 nodes are available: pod has unbound claims.",
            id="a PreFilter rejection replaces the per-node histogram",
        ),
        pytest.param(
            Diagnosis(
                2,
                {"Too many pods": 2},
                post_filter_message=(
                    "preemption: 0/2 nodes are available: "
                    "2 No preemption victims found for incoming pod."
                ),
            ),
            "0/2 nodes are available: 2 Too many pods. preemption: 0/2 nodes are available: "
            "2 No preemption victims found for incoming pod.",
            id="the PostFilter message is appended",
        ),
        pytest.param(Diagnosis(0), "0/0 nodes are available:", id="no reasons at all"),
    ],
)
def test_fit_error_message(diagnosis: Diagnosis, message: str) -> None:
    assert fit_error_message(diagnosis) == message
