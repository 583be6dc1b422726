"""The one reader of the scheduler's explain record (``troupe.whatif.diagnosis``)."""

from __future__ import annotations

from typing import Any

from troupe.whatif.diagnosis import Quorum, Rejection, parse_diagnosis

GROUP: dict[str, Any] = {
    "kind": "podgroup",
    "name": "default/train",
    "message": "gang default/train: 3 of 4 required pods fit",
    "quorum": {
        "minCount": 4,
        "minCountField": "spec.minMember",
        "alreadyPlaced": 1,
        "fit": 3,
        "pending": 3,
        "state": "3 of 4 required pods fit",
    },
    "minResourcesShortfall": "",
    "topology": {"required": "troupe.dev/rack", "preferred": []},
    "members": [
        {"pod": "default/train-0", "reason": "CoschedulingNotMeetMinMember", "fitsOn": "n1",
         "requests": {"cpu": 3000}},
        {"pod": "default/train-1", "reason": "Unschedulable", "code": "UNSCHEDULABLE",
         "nodes": 3, "rejections": [{"extensionPoint": "Filter", "plugin": "NodeResourcesFit",
                                      "nodes": 3}],
         "reasons": {"Insufficient cpu": 2, "node(s) were unschedulable": 1},
         "requests": {"cpu": 3000}},
    ],
    "preemption": {"result": "never", "message": "not eligible", "victims": []},
    "time": 1795799652.1,
}  # fmt: skip


def test_a_gang_s_record_reads_into_values_and_back_as_it_came() -> None:
    d = parse_diagnosis({**GROUP, "found": True})
    assert d.quorum == Quorum(4, "spec.minMember", 1, 3, 3)
    assert d.required_level == "troupe.dev/rack"
    waits, rejected = d.members
    assert waits.waits_for_quorum and waits.fits_on == "n1"
    assert not rejected.waits_for_quorum
    assert rejected.rejections == (Rejection("Filter", "NodeResourcesFit", 3),)
    assert list(rejected.reasons) == ["Insufficient cpu", "node(s) were unschedulable"]
    assert d.preemption is not None and d.preemption.result == "never"
    assert d.time == 1795799652.1
    assert d.to_json() == GROUP  # -o json prints the record, without "found"


def test_a_lone_pod_s_record_has_no_quorum_topology_or_preemption() -> None:
    d = parse_diagnosis(
        {
            "kind": "pod",
            "name": "default/big",
            "message": "0/3 nodes are available: 3 Insufficient cpu.",
            "members": [{"pod": "default/big", "reason": "Unschedulable", "postFilter": "x"}],
            "nominatedNodeName": "",
        }
    )
    assert d.quorum is None and d.preemption is None and d.required_level == ""
    assert d.members[0].post_filter == "x" and d.members[0].rejections == ()
    assert d.nominated_node == "" and d.time is None


def test_a_topology_gang_s_quorum_counts_the_members_of_its_best_domain() -> None:
    # The scheduler's record of a rack gang: 4 members fit in the best rack, but the
    # cycle kept nothing placed, so the record's own count is 0. The quorum line must
    # agree with the headline ("best rack r2: 4 of 8 pods fit").
    record = {
        **GROUP,
        "message": "gang ml/big: best rack r2: 4 of 8 pods fit; 0/4 nodes are available",
        "quorum": {"minCount": 8, "minCountField": "spec.schedulingPolicy.gang.minCount",
                   "alreadyPlaced": 0, "fit": 0, "pending": 8},
        "members": [
            *({"pod": f"ml/big-{i}", "reason": "CoschedulingNotMeetMinMember"} for i in range(4)),
            *({"pod": f"ml/big-{i}", "reason": "Unschedulable"} for i in range(4, 8)),
        ],
    }  # fmt: skip
    d = parse_diagnosis(record)
    assert d.quorum is not None and d.quorum.fit == 4
    assert d.to_json() == record  # the record itself is printed as it came
