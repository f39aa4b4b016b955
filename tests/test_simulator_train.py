"""The train / evaluate / predict CLIs end to end, on small synthetic data."""
import json
import math
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from extract.provenance import code_version
from simulator import evaluate, predict, train
from simulator.checkpoint import load_checkpoint
from simulator.data.splits import DEFAULT_TEST

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--threads", "1", "--epochs", "3", "--width", "16", "--depth", "2", "--batch-size", "16"]


def train_args(data, out, *extra):
    return ["--data", data, "--out", str(out)] + TINY + list(extra)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="module")
def trained(tmp_path_factory, dataset_path):
    """One finished gcn run, shared by the tests that only read it."""
    out = tmp_path_factory.mktemp("runs") / "gcn"
    assert train.main(train_args(dataset_path, out)) == 0
    return out


def test_metrics_json_shape_and_no_leakage(trained):
    metrics = json.loads(read(trained / "metrics.json"))
    assert set(metrics) >= {"test", "val", "config"}
    assert set(metrics["test"]["kendall_tau"]["per_workload"]) == set(DEFAULT_TEST)
    assert metrics["config"]["model"] == "gcn" and "out" not in metrics["config"]
    assert metrics["code"] == code_version()                    # the checkout's commit (None when installed)
    for name in ("l1_log", "l1_ms", "mape", "kendall_tau", "opa", "top1_slowdown", "top5_slowdown",
                 "top10_slowdown", "top1_ape"):
        assert math.isfinite(metrics["test"][name]["mean"])
    state = load_checkpoint(str(trained))
    seen = {name.split("/")[0] for part in ("train", "val") for name in state["split"][part]}
    assert not seen & set(DEFAULT_TEST)
    assert {name.split("/")[0] for name in state["split"]["test"]} == set(DEFAULT_TEST)
    # the checkpoint carries what predicting needs
    assert {"normalization", "info", "config", "best_model", "optimizer", "rng"} <= set(state)
    assert len(state["normalization"]["feature_mean"]) == state["info"]["feature_dim"]


def test_same_seed_gives_identical_metrics_json(tmp_path, dataset_path, trained):
    assert train.main(train_args(dataset_path, tmp_path / "again")) == 0
    assert read(tmp_path / "again" / "metrics.json") == read(trained / "metrics.json")
    assert train.main(train_args(dataset_path, tmp_path / "seed1", "--seed", "1")) == 0
    assert read(tmp_path / "seed1" / "metrics.json") != read(trained / "metrics.json")


def test_determinism_is_set_without_loading_torch_compile():
    # a fresh process: torch.compile's stack loaded there is what every training process pays
    code = ("import sys, torch; from simulator.engine import setup_determinism; setup_determinism(0, 1); "
            "print(torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(), "
            "'torch._inductor' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "False"]


def kill_after_first_epoch(cmd, env, out, attempts=3):
    """Run `cmd` and SIGKILL it from outside as soon as it prints epoch 1's line (the loop
    saves an epoch's checkpoint before printing its line): killed during epoch 2, as a job
    killed by its scheduler would be. On a loaded machine epoch 2 (~40 ms here) may end
    before the kill lands; then the run is started again. (returncode, stderr)."""
    for _ in range(attempts):
        shutil.rmtree(out, ignore_errors=True)
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        err = []
        for line in proc.stderr:
            err.append(line)
            if line.startswith("epoch   1 "):
                proc.send_signal(signal.SIGKILL)
                break
        proc.wait()
        err.append(proc.stderr.read())
        proc.stderr.close()
        if proc.returncode != -9 or load_checkpoint(str(out))["epoch"] == 1:
            break
    return proc.returncode, "".join(err)


def test_kill_mid_training_then_resume_finishes(tmp_path, dataset_path, trained):
    out = tmp_path / "killed"
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    returncode, stderr = kill_after_first_epoch([sys.executable, "-m", "simulator.train"] +
                                                train_args(dataset_path, out), env, out)
    assert returncode == -9, stderr[-2000:]
    assert load_checkpoint(str(out))["epoch"] == 1
    assert not (out / "metrics.json").exists()
    assert not [p for p in os.listdir(out) if p.endswith(".tmp")]
    assert train.main(train_args(dataset_path, out, "--resume")) == 0
    # resuming replays the lost epoch from the saved RNG state: the same result as no kill
    assert read(out / "metrics.json") == read(trained / "metrics.json")
    # resuming a finished run only re-evaluates
    assert train.main(train_args(dataset_path, out, "--resume")) == 0
    assert read(out / "metrics.json") == read(trained / "metrics.json")


def test_evaluate_reproduces_the_saved_metrics(trained):
    result = evaluate.run([str(trained), "--threads", "1"])
    saved = json.loads(read(trained / "metrics.json"))
    assert result["test"]["kendall_tau"]["mean"] == pytest.approx(saved["test"]["kendall_tau"]["mean"])
    assert result["val"]["l1_log"]["mean"] == pytest.approx(saved["val"]["l1_log"]["mean"])


def test_predict_ranks_measured_data(trained, dataset_path, capsys):
    rows = predict.run([str(trained), dataset_path, "--top-k", "3", "--threads", "1"])
    assert len(rows) == 12
    ranked = [r for r in rows["C3"] if r["rank"] is not None]
    assert [r["rank"] for r in ranked] == [1, 2, 3]
    assert ranked[0]["predicted_ms"] <= ranked[1]["predicted_ms"] <= ranked[2]["predicted_ms"]
    assert all(r["measured_ms"] > 0 for r in ranked)
    assert "C3: top 3 of 16 configs" in capsys.readouterr().out


def test_predict_unmeasured_workload_real_extractor(tmp_path):
    """Train on two measured-looking workloads, rank a third's unmeasured configs."""
    from extract import schedules as tvm_graph
    from extract.sample import save_samples
    from extract.autotvm.templates import get_template
    from extract.tir.workloads import parse_workload
    samples = []
    rng = np.random.default_rng(0)
    for spec in ("1x16x14x14_16x3x3_s1_p1", "1x16x14x14_32x1x1_s1_p0"):
        wl = parse_workload(spec)
        n = len(get_template("conv2d_NCHWc.x86").space(wl))
        for s in tvm_graph.samples_for_configs("conv2d_NCHWc.x86", wl, sorted(rng.choice(n, 8, replace=False))):
            s.runtimes = np.array([rng.uniform(1e-4, 1e-3)])
            samples.append(s)
    save_samples(str(tmp_path / "real.npz"), samples)
    groups = sorted({s.group for s in samples})
    out = tmp_path / "run"
    assert train.main(["--data", str(tmp_path / "real.npz"), "--out", str(out), "--threads", "1",
                       "--epochs", "1", "--width", "8", "--depth", "1",
                       "--train-workloads", groups[0], "--test-workloads", groups[1]]) == 0
    rows = predict.run([str(out), "1x8x7x7_16x3x3_s1_p1", "--top-k", "3", "--max-configs", "6",
                        "--threads", "1"])
    ranked = next(iter(rows.values()))
    assert len(ranked) == 3 and all(r["measured_ms"] is None for r in ranked)


@pytest.mark.parametrize("extra", [["--model", "curve-mlp"], ["--model", "xgb"],
                                   ["--model", "xgb", "--loss", "pairwise-hinge"],
                                   ["--model", "sage", "--loss", "listmle", "--group-size", "8"]])
def test_baselines_and_ranking_losses_through_the_same_cli(tmp_path, dataset_path, extra):
    out = tmp_path / "run"
    assert train.main(train_args(dataset_path, out, "--xgb-rounds", "20", *extra)) == 0
    metrics = json.loads(read(out / "metrics.json"))
    assert math.isfinite(metrics["test"]["kendall_tau"]["mean"])
    # and the saved run predicts
    assert evaluate.run([str(out), "--threads", "1"])["test"]["kendall_tau"]["mean"] == \
        pytest.approx(metrics["test"]["kendall_tau"]["mean"])


def one_line_error(capsys, *needles):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    for needle in needles:
        assert needle in err[0], err[0]


def test_missing_dataset_is_a_clear_error(tmp_path, capsys):
    missing = str(tmp_path / "nope")
    assert train.main(["--data", missing, "--out", str(tmp_path / "r")] + TINY) == 2
    one_line_error(capsys, missing, "no such")


def test_bad_checkpoint_is_a_clear_error(tmp_path, trained, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "checkpoint.pt").write_bytes(b"this is not a checkpoint")
    assert evaluate.main([str(bad)]) == 2
    one_line_error(capsys, str(bad / "checkpoint.pt"), "not a readable checkpoint")
    # a truncated checkpoint (e.g. copied while being written)
    whole = (trained / "checkpoint.pt").read_bytes()
    (bad / "checkpoint.pt").write_bytes(whole[: len(whole) // 2])
    assert predict.main([str(bad), "C2"]) == 2
    one_line_error(capsys, "checkpoint.pt", "not a readable checkpoint")
    assert train.main(["--data", str(tmp_path), "--out", str(bad), "--resume"] + TINY) == 2
    one_line_error(capsys, "checkpoint.pt")
    assert evaluate.main([str(tmp_path / "nowhere")]) == 2
    one_line_error(capsys, "nowhere", "no such checkpoint")


@pytest.mark.parametrize("option,value", [("workload_norm", "zscore"), ("domain_adapt", "dann")])
def test_a_run_made_with_a_removed_option_is_refused(tmp_path, trained, capsys, option, value):
    """A checkpoint whose config used an option that no longer exists is refused with one
    line naming it, not read without it (the model would see other inputs)."""
    from simulator.checkpoint import save_checkpoint
    state = load_checkpoint(str(trained / "checkpoint.pt"))
    state["config"] = dict(state["config"], **{option: value})
    old = tmp_path / "old"
    old.mkdir()
    save_checkpoint(str(old / "checkpoint.pt"), state)
    assert evaluate.main([str(old), "--threads", "1"]) == 2
    one_line_error(capsys, f"--{option.replace('_', '-')} {value}", "no longer exists")
    state["config"][option] = "none"  # the off value of a removed option is what every run now does
    save_checkpoint(str(old / "checkpoint.pt"), state)
    assert evaluate.main([str(old), "--threads", "1"]) == 0


@pytest.mark.parametrize("flag,name", [("--model", "gnn9000"), ("--loss", "hinge2"), ("--pooling", "median")])
def test_unknown_names_are_clear_errors(tmp_path, dataset_path, capsys, flag, name):
    assert train.main(train_args(dataset_path, tmp_path / "r", flag, name)) == 2
    one_line_error(capsys, repr(name), "known:")


def test_existing_run_is_not_overwritten_silently(trained, dataset_path, capsys):
    assert train.main(train_args(dataset_path, trained)) == 2
    one_line_error(capsys, "--resume")


def test_train_on_a_users_autotvm_log(tmp_path):
    """--data with an AutoTVM log (extracted through datasets.load_dataset, cached under
    --cache-dir), workloads named from the records."""
    from extract.autotvm.records import MeasureRecord
    from extract.autotvm.templates import get_template
    from extract.tir.workloads import parse_workload
    template = get_template("conv2d_NCHWc.x86")
    rng = np.random.default_rng(0)
    lines = []
    specs = ["1x16x14x14_16x3x3_s1_p1", "1x16x14x14_32x1x1_s1_p0"]
    for spec in specs:
        wl = parse_workload(spec)
        space = template.space(wl)
        for index in rng.choice(len(space), 6, replace=False):
            config = space.get(int(index))
            lines.append(MeasureRecord("llvm", template.name, template.task_args(wl), config.index,
                                       space.to_entity(config), [float(rng.uniform(1e-4, 1e-3))] * 2).to_json())
    (tmp_path / "mine.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    cache = tmp_path / "cache"
    args = ["--data", str(tmp_path / "mine.jsonl"), "--cache-dir", str(cache), "--out", str(out),
            "--threads", "1", "--epochs", "2", "--width", "8", "--depth", "1",
            "--train-workloads", "conv2d_" + specs[0], "--test-workloads", specs[1]]
    assert train.main(args) == 0
    metrics = json.loads(read(out / "metrics.json"))
    assert list(metrics["test"]["kendall_tau"]["per_workload"]) == ["conv2d_" + specs[1]]
    assert any(cache.iterdir())   # extracted once, cached
