"""``troupe explain`` and ``kubectl troupe explain`` with no flag but the cluster's,
against ``troupe sim --serve`` (a process of its own, driven with the real kubectl):
the scheduler that serves is found by its leader Lease and asked through the API
server's pod proxy with the kubeconfig's own token, which its delegated debug endpoint
reviews; a gang held back is told at once; without a token, or without a scheduler,
one line says why and the diagnosis is recomputed offline. ``kubectl troupe`` (the
``kubectl-troupe`` plugin, found by kubectl on PATH) does the same with kubectl's
``-n``, ``--kubeconfig`` and ``--context``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.gpu_cluster import as_yaml, cluster_objects, rack_gang
from tests.integration.served import Served, kubectl, run, troupe_sim_serve

TROUPE = ("python", "-m", "troupe")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The GPU cluster of issue 30 with two gangs: pretrain-70b (8 members, the best
    rack holds 4) and six (minCount 8, 6 pods)."""
    with troupe_sim_serve(tmp_path_factory.mktemp("served"), "--nodes", "0") as s:
        objects = cluster_objects() + rack_gang("pretrain-70b", 8, 8) + rack_gang("six", 8, 6)
        kubectl(s, "apply", "-f", "-", stdin=as_yaml(objects))
        deadline = time.monotonic() + 60
        while "gang ml/pretrain-70b: best rack" not in kubectl(
            s, "get", "pod", "-n", "ml", "pretrain-70b-7", "-o", "jsonpath={.status}"
        ):
            assert time.monotonic() < deadline, "the scheduler never tried the gang"
            time.sleep(0.2)
        yield s


def troupe(served: Served, *args: str) -> tuple[int, str, str]:
    import sys

    done = run(served, sys.executable, "-m", "troupe", *args)
    return done.returncode, done.stdout, done.stderr


def test_the_scheduler_is_found_by_its_lease_and_asked_with_the_kubeconfigs_token(
    served: Served,
) -> None:
    code, text, err = troupe(
        served, "explain", "podgroup", "ml/pretrain-70b", "--kubeconfig", str(served.kubeconfig)
    )
    assert code == 0, err
    print(text)
    assert err == ""
    assert text.startswith("podgroup ml/pretrain-70b (diagnosis: scheduler), last attempt ")
    assert "best rack r2: 4 of 8 pods fit" in text and "would fit now: 4;" in text
    assert "no rack holds 64 nvidia.com/gpu: the largest has 32" in text
    assert "- add 4 more nodes like gpu-8 in rack r2  (checked: binds" in text
    assert "- lower minCount to 4 (spec.schedulingPolicy.gang.minCount)" in text
    section = text.split("CAPACITY", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(section) <= 24 and "(no label)" not in text
    code, out, err = troupe(
        served, "explain", "podgroup", "ml/pretrain-70b", "--no-fixes", "-o", "json"
    )  # KUBECONFIG from the environment
    assert code == 0, err
    report = json.loads(out)
    assert report["source"] == "scheduler"
    assert report["scheduler"] == (
        "pod kube-system/troupe-scheduler-sim, holder of the Lease kube-system/troupe-scheduler"
    )
    assert report["diagnosis"]["quorum"]["minCount"] == 8


def test_kubectl_troupe_explain_in_a_namespace(served: Served) -> None:
    done = run(served, "kubectl", "troupe", "explain", "podgroup", "pretrain-70b", "-n", "ml")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("podgroup ml/pretrain-70b (diagnosis: scheduler), ")
    assert "- add 4 more nodes like gpu-8 in rack r2  (checked: binds" in done.stdout
    # kubectl's --kubeconfig and --context, after the plugin's name.
    context = kubectl(served, "config", "current-context").strip()
    done = run(
        served, "kubectl", "troupe", "explain", "podgroup", "ml/pretrain-70b", "--no-fixes",
        "--kubeconfig", str(served.kubeconfig), "--context", context,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "(diagnosis: scheduler)" in done.stdout
    done = run(served, "kubectl", "troupe", "explain", "podgroup", "x", "--context", "nope")
    assert done.returncode == 1 and "nope" in done.stderr


def test_a_gang_with_fewer_pods_than_its_quorum_is_told_at_once(served: Served) -> None:
    code, text, err = troupe(served, "explain", "podgroup", "ml/six")
    assert code == 0, err
    assert text.splitlines()[:2] == [
        "podgroup ml/six (held before any attempt; read from the group objects)",
        "  gang ml/six: waiting for minCount pods from a gang to appear in scheduling queue "
        "(spec.schedulingPolicy.gang.minCount is 8; 6 of its pods are ready to schedule or "
        "placed)",
    ]
    assert "To release it: create 2 more of its pods, or lower" in text
    assert "made no attempt" not in text + err


def test_without_a_token_one_line_says_so_and_the_diagnosis_is_offline(
    served: Served, tmp_path: Path
) -> None:
    anonymous = tmp_path / "anonymous"
    text = served.kubeconfig.read_text()
    start = text.index("  user:\n    token:")
    end = text.index("\n", text.index("token:", start)) + 1
    anonymous.write_text(text[:start] + "  user: {}\n" + text[end:])
    code, out, err = troupe(
        served, "explain", "podgroup", "ml/pretrain-70b", "--kubeconfig", str(anonymous),
        "--no-fixes",
    )  # fmt: skip
    assert code == 0, err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("troupe explain: the scheduler refused: ")
    assert "no bearer token" in err and err.rstrip().endswith("diagnosing offline instead")
    assert out.startswith(
        "podgroup ml/pretrain-70b (diagnosis: offline, because the scheduler refused)"
    )
    assert "best rack r2: 4 of 8 pods fit" in out


def test_without_a_scheduler_to_ask_one_line_and_offline(served: Served) -> None:
    code, out, err = troupe(
        served, "explain", "podgroup", "ml/pretrain-70b", "--lease", "ml/nobody", "--no-fixes"
    )
    assert code == 0, err
    assert err == (
        "troupe explain: the scheduler was not reached: no leader Lease ml/nobody: is troupe "
        "running in this cluster?; diagnosing offline instead\n"
    )
    assert "(diagnosis: offline, because the scheduler was not reached)" in out
