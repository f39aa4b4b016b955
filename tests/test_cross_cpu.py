"""benchmarks.cross_cpu: a model pre-trained on one CPU's dataset ranking another's tasks,
fine-tuned on k of them, against a model trained on the other tasks alone."""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "data", "networks_tiny")


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """The tiny dataset as CPU A, with a pre-trained cost model (one epoch) where A ships it."""
    from datasets.networks import PRETRAINED_NAME
    from simulator.checkpoint import CHECKPOINT_NAME

    folder = tmp_path_factory.mktemp("cpu_a") / "networks_tiny"
    shutil.copytree(TINY, folder)
    summary = json.loads((folder / "summary.json").read_text())
    summary["tasks"][0]["valid"] = 0              # A never measured it: B alone trains on it
    (folder / "summary.json").write_text(json.dumps(summary))
    run = folder.parent / "run"
    subprocess.run([sys.executable, "-m", "simulator.train", "--data", str(folder), "--split", "random",
                    "--epochs", "1", "--threads", "1", "--loss", "pairwise-hinge", "--out", str(run)],
                   check=True, cwd=ROOT, capture_output=True)
    (folder / PRETRAINED_NAME).parent.mkdir(exist_ok=True)
    shutil.copy(run / CHECKPOINT_NAME, folder / PRETRAINED_NAME)
    return str(folder)


def test_new_hardware_table_from_shared_tasks(source, tmp_path):
    from benchmarks import cross_cpu

    argv = ["--source", source, "--target", TINY, "--ks", "0", "2", "--seeds", "0", "1", "--min-records", "4",
            "--min-shared", "2", "--epochs", "1", "--runs", str(tmp_path / "runs"), "--results", str(tmp_path)]
    assert cross_cpu.main(argv) == 0
    written = list(tmp_path.glob("cross_cpu_*_*.json"))
    assert len(written) == 1
    res = json.loads(written[0].read_text())
    assert res["tasks"] == 2 and res["ks"] == [0, 2]
    assert {(r["model"], r["k"]) for r in res["summary"]} == {(m, k) for m in cross_cpu.MODELS for k in (0, 2)}
    for row in res["summary"]:
        tau, top1, top5 = row["kendall_tau"], row["top1_score"], row["top5_score"]
        assert -1 <= tau[0] <= 1 and 0 < top1[0] <= top5[0] <= 1 and tau[2] == 2
    # the test set is the same for every k: same tasks, same best latency
    by_k = {k: {(r["task"], r["seed"]): r["best_ms"] for r in res["rows"] if r["k"] == k} for k in (0, 2)}
    assert by_k[0] == by_k[2]
    text = "\n".join(cross_cpu.report_section(str(tmp_path)))
    assert "## New hardware: pre-trained on" in text and "B alone" in text


def test_too_few_shared_tasks_is_a_one_line_refusal(source, tmp_path):
    from benchmarks import cross_cpu

    with pytest.raises(SystemExit, match=r"share \d+ tasks with ≥ 4 records on the target; at least 40"):
        cross_cpu.main(["--source", source, "--target", TINY, "--ks", "0", "2", "--min-records", "4",
                        "--runs", str(tmp_path), "--results", str(tmp_path)])
    with pytest.raises(SystemExit, match="training on B alone failed .*needs at least one training"):
        cross_cpu.main(["--source", TINY, "--target", TINY, "--ks", "0", "2", "--min-records", "4",
                        "--min-shared", "1", "--epochs", "1", "--runs", str(tmp_path), "--results", str(tmp_path)])
    with pytest.raises(SystemExit, match="below --min-records"):
        cross_cpu.main(["--source", source, "--target", TINY, "--ks", "0", "8", "--min-records", "4"])
