"""Training across processes with torchrun (simulator.distributed): two processes on this
machine match one process with the same global batch, and a killed run resumes.

Tolerance: with a pointwise loss the two processes each take half of every global batch,
so their gradient sums differ from one process's by float rounding only; every metric's
mean must agree within a relative 1e-4 (observed here: ~5e-7)."""
import json
import math
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch

from extract.fileio import LOCK_NAME
from simulator import train
from simulator.checkpoint import load_checkpoint
from simulator.distributed import Cluster
from simulator.losses import build_loss
from simulator.registry import SimulatorError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# 78 training samples in batches of 8: ten steps (twenty all-reduces) an epoch
ARGS = ["--threads", "1", "--epochs", "4", "--width", "16", "--depth", "2", "--batch-size", "8"]
TOLERANCE = 1e-4
TIMEOUT_S = 300


def _prefix():
    """Pinned to core 0 while a long measurement owns core 1 (see /work/plan/MEASURING)."""
    return ["taskset", "-c", "0"] if os.path.exists("/work/plan/MEASURING") else []


def torchrun(data, out, *extra):
    return _prefix() + [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                        "-m", "simulator.train", "--data", data, "--out", str(out)] + ARGS + list(extra)


def run_to_end(cmd):
    """Run `cmd` in its own process group, bounded in time; (returncode, stderr)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        _kill_group(proc)
    return proc.returncode, err


def _env():
    return dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def kill_during_training(cmd, out, attempts=3):
    """Start `cmd` (torchrun and its two workers, one process group) and SIGKILL the group
    as soon as rank 0 prints epoch 1's line (its checkpoint is written before the line),
    i.e. during epoch 2. If the kill lands after the run ended, start again. The
    checkpoint's epoch."""
    for _ in range(attempts):
        proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            for line in proc.stderr:
                if line.startswith("epoch   1 "):
                    break
        finally:
            _kill_group(proc)
            proc.stderr.close()
        epoch = load_checkpoint(str(out))["epoch"] if (out / "checkpoint.pt").exists() else None
        if epoch is not None and epoch < 4 and not (out / "metrics.json").exists():
            return epoch
    raise AssertionError(f"could not kill the run during training in {attempts} attempts")


def means(path):
    metrics = json.loads(path.read_text())
    return {(part, name): v["mean"] for part in ("val", "test") for name, v in metrics[part].items()}


def test_two_processes_match_one_and_a_killed_run_resumes(tmp_path, dataset_path):
    assert train.main(["--data", dataset_path, "--out", str(tmp_path / "one")] + ARGS) == 0
    code, err = run_to_end(torchrun(dataset_path, tmp_path / "two"))
    assert code == 0, err[-3000:]
    assert "2 processes" in err and err.count("wrote ") == 1  # rank 0 alone reports and writes
    one, two = means(tmp_path / "one" / "metrics.json"), means(tmp_path / "two" / "metrics.json")
    assert set(one) == set(two)
    for key, value in one.items():
        if value is None or (isinstance(value, float) and math.isnan(value)):
            assert two[key] is None, key
            continue
        assert abs(two[key] - value) <= TOLERANCE * max(abs(value), 1e-3), (key, value, two[key])
    state = load_checkpoint(str(tmp_path / "two"))
    assert state["finished"] and state["epoch"] == 4 and len(state["rng"]["ranks"]) == 2
    assert all(len(h["cpu_s_by_rank"]) == 2 and min(h["cpu_s_by_rank"]) > 0 for h in state["history"])
    assert sorted(set(os.listdir(tmp_path / "two")) - {LOCK_NAME}) == ["checkpoint.pt", "metrics.json"]
    # killed during epoch 2, resumed: the same run as one never killed
    killed = tmp_path / "killed"
    assert kill_during_training(torchrun(dataset_path, killed), killed) >= 1
    code, err = run_to_end(torchrun(dataset_path, killed, "--resume"))
    assert code == 0, err[-3000:]
    assert "resumed from" in err
    assert (killed / "metrics.json").read_text() == (tmp_path / "two" / "metrics.json").read_text()


def test_shards_are_whole_groups_or_items_and_never_empty():
    batch = np.array([5, 9, 2, 7, 3])
    groups = np.array([0, 0, 1, 1, 1, 2, 0, 2, 4, 1])  # groups of items 5, 9, 2, 7, 3: 2, 1, 1, 2, 1
    ranks = [Cluster(rank, 2) for rank in range(2)]
    items = [c.shard(batch, None) for c in ranks]
    assert [list(i) for i, _ in items] == [[5, 2, 3], [9, 7]] and not any(s for _, s in items)
    by_group = [c.shard(batch, groups) for c in ranks]
    assert [list(i) for i, _ in by_group] == [[5, 7], [9, 2, 3]]
    one_group = [c.shard(np.array([9, 2]), groups) for c in ranks]
    assert [(list(i), s) for i, s in one_group] == [([9, 2], False), ([9], True)]


def test_loss_terms_count_what_each_loss_averages():
    y = torch.tensor([1.0, 2.0, 3.0, 1.0, 5.0])
    group = torch.tensor([0, 0, 0, 1, 2])
    assert build_loss("huber").terms(y, group) == 5
    assert build_loss("listmle").terms(y, group) == 1  # group 0; 1 and 2 have one config
    assert build_loss("pairwise-hinge").terms(y, group) == 3  # the pairs of group 0


def test_models_that_train_in_one_cpu_process_say_so(dataset_path):
    from simulator.config import TrainConfig
    from simulator.models.costmodel import build_cost_model
    from simulator.data.in_memory import SampleSource
    from extract.sample import load_samples
    samples = load_samples(os.path.join(dataset_path, "synthetic.npz"))
    info = SampleSource(samples).model_info()
    xgb = build_cost_model(TrainConfig.from_dict({"model": "xgb"}), info)
    with pytest.raises(SimulatorError, match="one CPU process"):
        xgb.place(Cluster(0, 2))
    xgb.place(Cluster())  # a single CPU process is fine


def _cuda_training() -> bool:
    """A CUDA GPU, and a DGL build that can put graphs on it."""
    from simulator.distributed import check_device
    try:
        check_device("cuda")
        return True
    except SimulatorError:
        return False


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without a GPU")
def test_device_cuda_without_a_gpu_is_a_clear_error(tmp_path, dataset_path, capsys):
    assert train.main(["--data", dataset_path, "--out", str(tmp_path / "gpu"), "--device", "cuda"] + ARGS) == 2
    assert "--device cuda" in capsys.readouterr().err
    assert not (tmp_path / "gpu").exists()
    # scoring a trained run: the same clear error, from evaluate and predict
    from simulator import evaluate, predict
    assert train.main(["--data", dataset_path, "--out", str(tmp_path / "cpu")] + ARGS) == 0
    capsys.readouterr()
    for cli in (evaluate, predict):
        assert cli.main([str(tmp_path / "cpu"), "--device", "cuda"]) == 2
        assert "--device cuda" in capsys.readouterr().err


def test_only_models_that_read_graphs_need_a_cuda_build_of_dgl():
    from simulator.models.costmodel import reads_graphs

    assert [reads_graphs(m) for m in ("gcn", "gcn-inv", "mlp", "config-mlp")] == [True] * 4
    assert [reads_graphs(m) for m in ("tlp", "segsum-mlp", "curve-mlp", "xgb")] == [False] * 4


@pytest.mark.skipif(not torch.cuda.is_available() or not _cuda_training(),
                    reason="needs a CUDA GPU and a CUDA build of DGL")
def test_device_cuda_trains_and_scores_like_the_cpu(tmp_path, dataset_path):
    assert train.main(["--data", dataset_path, "--out", str(tmp_path / "cpu")] + ARGS) == 0
    assert train.main(["--data", dataset_path, "--out", str(tmp_path / "gpu"), "--device", "cuda"] + ARGS) == 0
    cpu, gpu = means(tmp_path / "cpu" / "metrics.json"), means(tmp_path / "gpu" / "metrics.json")
    # GPU kernels sum in other orders: a looser tolerance than two CPU processes
    assert all(abs(gpu[k] - v) <= 1e-2 * max(abs(v), 1e-3) for k, v in cpu.items() if v is not None)
    from simulator import evaluate
    on_gpu = evaluate.run([str(tmp_path / "cpu"), "--device", "cuda"])  # a CPU-trained run scored on the GPU
    assert on_gpu["test"]["kendall_tau"]["mean"] == pytest.approx(cpu[("test", "kendall_tau")], abs=1e-2)


def test_merged_scores_of_disjoint_workloads_are_the_scores_of_all():
    from simulator.metrics import evaluate, merge
    rng = np.random.default_rng(0)
    pred, true = rng.normal(size=40), rng.normal(size=40)
    groups = np.repeat(["C1", "C2", "C10", "C3"], 10)
    shares = [np.isin(groups, ["C1", "C10"]), np.isin(groups, ["C2", "C3"])]
    parts = [evaluate(pred[m], true[m], groups[m]) for m in shares]
    assert merge(parts) == evaluate(pred, true, groups)
    assert list(merge(parts)["kendall_tau"]["per_workload"]) == ["C1", "C2", "C3", "C10"]


def test_scaling_benchmark_takes_the_busiest_rank_and_skips_the_first_epoch():
    from benchmarks.scaling import summarize

    def run(*epochs):  # (graphs/s, seconds, cpu seconds by rank) per epoch
        return {"history": [{"graphs_per_s": g, "seconds": s, "cpu_s_by_rank": c} for g, s, c in epochs],
                "train_graphs": 100, "cpu_s": 9.0}
    one = summarize([run((10, 10, [10]), (100, 1, [1])), run((10, 10, [10]), (50, 2, [1]))])
    assert one["graphs_per_s"] == 75 and one["graphs_per_rank_cpu_s"] == 100 and one["epochs_measured"] == 2
    two = summarize([run((1, 100, [1, 1]), (100, 1, [0.25, 0.5]))])
    assert two["graphs_per_s"] == 100 and two["graphs_per_rank_cpu_s"] == 200  # 100 graphs / 0.5 s
    assert summarize([run((40, 1, [2]))])["graphs_per_rank_cpu_s"] == 20  # one epoch: that epoch


def test_a_rank_exits_with_its_code_and_output_without_the_interpreters_teardown():
    """A torchrun rank of simulator.train ends through `exit_rank`: its exit code and
    printed output kept, no atexit teardown (where gloo's threads can abort a finished run)."""
    script = ("import atexit; from simulator.distributed import exit_rank; "
              "atexit.register(lambda: print('teardown')); print('trained', end=''); exit_rank(3)")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (3, "trained"), done.stderr[-2000:]
