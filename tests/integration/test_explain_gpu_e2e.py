"""``troupe explain`` on issue 30's GPU cluster (tests/integration/gpu_cluster.py), end to
end through the embedded API server: a rack gang of 8 members of 8 GPUs where the best
rack holds 4. The fixes buy no more than needed — 4 nodes like gpu-8 in the empty rack,
and ``troupe replay`` of a snapshot shows that this binds the gang while 3 nodes of
the GPU shape in any rack do not — the quorum line agrees with the headline, the
capacity section is a screenful that names no pseudo-domain, and amounts read as a
person writes them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml
from troupe.sim.cluster import SimCluster

from tests.integration.gpu_cluster import cluster_objects, create, gpu_node, rack_gang
from tests.integration.test_explain_e2e import troupe


async def replay_bound(snapshot: Path, template: dict[str, Any], count: int, tmp: Path) -> int:
    """How many of the gang's members ``troupe replay`` binds with ``count`` clones of
    ``template`` added."""
    node = tmp / f"node-{template['metadata']['labels']['example.com/rack']}-{count}.yaml"
    node.write_text(yaml.safe_dump(template))
    code, out, err = await troupe(
        "replay", str(snapshot), "--add-nodes", str(count), "--node-template", str(node),
        "-o", "json", "--timeout", "60",
    )  # fmt: skip
    assert code == 0, err
    gangs = {g["name"]: g for g in json.loads(out)["gangs"]}
    return int(gangs["pretrain-70b"]["bound"])


def template_in(rack: str) -> dict[str, Any]:
    node = copy.deepcopy(gpu_node(8, rack))
    node["metadata"]["name"] = f"bought-{rack}"
    node["metadata"]["labels"]["kubernetes.io/hostname"] = f"bought-{rack}"
    return node


async def test_the_fix_buys_four_nodes_in_the_empty_rack_and_no_fewer_bind(
    tmp_path: Path,
) -> None:
    async with SimCluster([], bookmark_interval=0.5) as cluster:
        create(cluster.store, cluster_objects() + rack_gang("pretrain-70b", 8, 8))
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        code, text, err = await troupe(
            "explain", "podgroup", "ml/pretrain-70b", "--kubeconfig", str(kubeconfig),
            "--offline",
        )  # fmt: skip
        assert code == 0, err
        print(text)
        code, out, err = await troupe(
            "explain", "podgroup", "ml/pretrain-70b", "--kubeconfig", str(kubeconfig),
            "--offline", "-o", "json",
        )  # fmt: skip
        assert code == 0, err
        report = json.loads(out)
        snapshot = tmp_path / "cluster.yaml"
        code, _, err = await troupe(
            "snapshot", "--kubeconfig", str(kubeconfig), "-o", str(snapshot)
        )
        assert code == 0, err

    # The headline, and a quorum line that agrees with it.
    assert "best rack r2: 4 of 8 pods fit" in text
    assert "would fit now: 4;" in text
    # Why freeing room cannot help: no rack is big enough.
    assert "no rack holds 64 nvidia.com/gpu: the largest has 32" in text
    # The fixes: the cheapest purchase, and the quorum that fits.
    fixes = {f["kind"]: f for f in report["fixes"]}
    assert fixes["addNodes"]["fix"] == "add 4 more nodes like gpu-8 in rack r2"
    assert fixes["addNodes"]["domain"] == "example.com/rack=r2"
    assert fixes["addNodes"]["bought"] == {"cpu": 384_000, "memory": 4 << 40, "nvidia.com/gpu": 32}
    assert fixes["lowerMinCount"]["minCount"] == 4
    assert "- add 4 more nodes like gpu-8 in rack r2  (checked: binds" in text
    assert "- lower minCount to 4 (spec.schedulingPolicy.gang.minCount)" in text
    # A screenful of capacity: the racks closest first, 12 nodes, the rest counted.
    section = text.split("CAPACITY", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(section) <= 24, section
    assert "(no label)" not in text
    assert "  20 nodes without the label example.com/rack: in no rack" in text
    assert "  ... 20 more nodes: 20 with no nvidia.com/gpu (--all lists them)" in text
    racks = [line.split(":")[0].strip() for line in section if "example.com/rack=" in line]
    assert racks == ["example.com/rack=r2", "example.com/rack=r1", "example.com/rack=r0"]
    assert "1Ti memory" in text and "640Gi memory" in text and "000m" not in text

    # The fix, replayed: 4 nodes like gpu-8 in rack r2 bind the gang ...
    assert await replay_bound(snapshot, template_in("r2"), 4, tmp_path) == 8
    # ... and no smaller purchase does: 3 nodes of the only GPU shape, in any rack (the
    # CPU-only shape adds no GPU at any count).
    for rack in ("r0", "r1", "r2"):
        assert await replay_bound(snapshot, template_in(rack), 3, tmp_path) == 0, rack


async def test_all_lists_every_node_and_the_unlabelled_nodes_as_asked(tmp_path: Path) -> None:
    async with SimCluster([], bookmark_interval=0.5) as cluster:
        create(cluster.store, cluster_objects() + rack_gang("pretrain-70b", 8, 8))
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        code, text, err = await troupe(
            "explain", "podgroup", "ml/pretrain-70b", "--kubeconfig", str(kubeconfig),
            "--offline", "--no-fixes", "--all",
        )  # fmt: skip
    assert code == 0, err
    assert "example.com/rack=(no label): 0 of 8 fit" in text
    assert "more nodes" not in text
    assert all(f"  cpu-{i} " in text for i in range(20))


def test_the_docs_example_is_this_cluster() -> None:
    """docs/explain.md shows this cluster (docs/examples/gpu-cluster.yaml): the same
    objects, so what the page shows is what these tests check."""
    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "examples" / "gpu-cluster.yaml").read_text()
    shown = [doc for doc in yaml.safe_load_all(text) if doc]
    assert shown == cluster_objects() + rack_gang("pretrain-70b", 8, 8) + rack_gang("six", 8, 6)
