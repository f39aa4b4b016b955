"""benchmarks.learning_curves: leave-one-network-out runs on shares of the training tasks or
records, the full point shared with benchmarks.networks."""
import argparse
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "data" / "networks_tiny"


def _args(argv):
    from benchmarks import learning_curves as curves, networks

    ap = argparse.ArgumentParser()
    curves.add_arguments(ap)
    networks.add_arguments(ap.add_argument_group("networks"))
    ap.add_argument("--runs", default="runs")
    return ap.parse_args(argv)


def test_the_full_point_is_the_networks_benchmark_run():
    from benchmarks import learning_curves as curves, networks

    args = _args(["--networks-data", "d", "--curve-networks", "bert", "--curve-models", "gcn", "tenset-mlp",
                  "--task-fractions", "0.25", "--record-fractions", "0.5", "--held-networks", "bert",
                  "--held-kinds", "--combined-models", "--networks-epochs", "10", "--networks-seeds", "0", "--networks-models", "gcn",
                  "tenset-mlp"])
    planned = curves.jobs(args)
    assert [(j["model"], j["share"], j["fraction"]) for j in planned] == [
        (m, s, f) for m in ("gcn", "tenset-mlp") for s, f in (("full", 1.0), ("tasks", 0.25), ("records", 0.5))]
    full = {j["out"]: j["argv"] for j in planned if j["share"] == "full"}
    assert full == {j["out"]: j["argv"] for j in networks.jobs(args, {"tasks": []})}
    tasks = next(j for j in planned if j["share"] == "tasks" and j["model"] == "gcn")
    assert tasks["out"].endswith("leave-network-out-bert-gcn-seed0-tasks0.25")
    assert tasks["argv"][-2:] == ["--train-task-fraction", "0.25"]
    with pytest.raises(SystemExit):
        _args(["--task-fractions", "1"])            # the full point is not a share


def test_curves_run_report_and_resume(tmp_path):
    from benchmarks import learning_curves as curves, networks

    out = tmp_path / "results"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TPSIM_CACHE=str(tmp_path / "cache"), TQDM_DISABLE="1")
    cmd = [sys.executable, "-m", "benchmarks.learning_curves", "--networks-data", str(TINY), "--curve-models", "mlp",
           "--curve-networks", "bert", "--task-fractions", "0.5", "--record-fractions", "0.5", "--curve-epochs", "1",
           "--runs", str(tmp_path / "runs"), "--results", str(out), "--parallel", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads((out / "learning_curves_networks_tiny.json").read_text())
    kept = [json.loads(gzip.open(f).read()) for f in (out / "learning_curves_networks_tiny_runs").glob("*.json.gz")]
    assert len(kept) == 3 and {k["data"] for k in kept} == {networks.dataset_digest(str(TINY))}
    by_share = {r["share"]: r for r in res["rows"]}
    assert set(by_share) == {"full", "tasks", "records"}
    full = by_share["full"]["train_samples"]
    assert 0 < by_share["records"]["train_samples"] < full and 0 < by_share["tasks"]["train_samples"] < full
    assert len({r["tasks"] for r in res["rows"]}) == 1          # the same held-out tasks at every point
    text = "\n".join(curves.report_section(res))
    assert "| mlp | all |" in text and "| mlp | 0.5 of the tasks |" in text and "nan" not in text.lower()
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    assert again.returncode == 0 and "learning curves: 3 training runs" in again.stderr
    assert json.loads((out / "learning_curves_networks_tiny.json").read_text())["rows"] == res["rows"]
