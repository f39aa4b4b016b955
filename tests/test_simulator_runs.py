"""docs/RELIABILITY.md on the simulator's run folders and CLIs:

* class 2 — one writer per run folder (train, evaluate --write, benchmarks), and a
  metrics.json that always describes the checkpoint beside it;
* class 4 — checkpoints carry a checksum of every entry, verified on load;
* class 8 — `--resume --epochs N` trains what it records (or refuses), data of another
  kind than the model's is a clear error, a graph without nodes is named;
* class 9 — progress bars only on a terminal; a few lines otherwise.
"""
import contextlib
import copy
import json
import os
import pty
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator import evaluate, predict, train
from simulator.checkpoint import load_checkpoint, save_checkpoint, weights_digest
from simulator.registry import SimulatorError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
TINY = ["--threads", "1", "--epochs", "3", "--width", "16", "--depth", "2", "--batch-size", "16"]
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def train_args(data, out, *extra):
    return ["--data", str(data), "--out", str(out)] + TINY + list(extra)


def one_line_error(capsys, *needles):
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("error: "), err
    for needle in needles:
        assert needle in err[-1], err[-1]
    return err


@pytest.fixture(scope="module")
def finished(tmp_path_factory, dataset_path):
    """A finished 3-epoch gcn run; tests copy it before changing anything."""
    out = tmp_path_factory.mktemp("runs") / "gcn"
    assert train.main(train_args(dataset_path, out)) == 0
    return out


def copy_run(run, tmp_path, name="run"):
    dst = tmp_path / name
    shutil.copytree(run, dst)
    return dst


@contextlib.contextmanager
def held_by_another_process(folder):
    """`folder` locked (extract.fileio.output_lock) by a second process, as a running
    train or benchmark holds its output folder."""
    code = ("import sys\nfrom extract.fileio import output_lock\nwith output_lock(sys.argv[1]):\n"
            "    print('held', flush=True)\n    sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], cwd=ROOT, env=ENV, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == "held"
        yield
    finally:
        proc.stdin.close()
        proc.wait()


# ================================================================ class 2: one writer, agreeing files
def test_metrics_json_names_the_checkpoint_it_was_computed_from(finished):
    metrics = json.loads((finished / "metrics.json").read_text())
    state = load_checkpoint(str(finished))
    assert metrics["checkpoint"] == {"file": "checkpoint.pt", "weights_sha256": weights_digest(state),
                                     "epoch": 3, "step": state["step"]}


def test_a_second_writer_of_a_run_folder_gets_a_one_line_error(tmp_path, dataset_path, finished, capsys):
    out = tmp_path / "busy"
    with held_by_another_process(out):
        assert train.main(train_args(dataset_path, out)) == 2
        one_line_error(capsys, str(out), "another process is writing to this folder")
        assert os.listdir(out) == [".tpsim.lock"]                       # nothing written
        run = copy_run(finished, tmp_path)
    with held_by_another_process(run):
        assert evaluate.main([str(run), "--write", "--threads", "1"]) == 2   # rewriting: refused
        one_line_error(capsys, "another process is writing")
        assert evaluate.main([str(run), "--threads", "1"]) == 0              # reading: fine


def test_two_train_processes_with_the_same_out(tmp_path, dataset_path):
    """The second of two concurrent runs exits 2 whatever the timing (busy, or a run already
    there); the folder ends with the first run's checkpoint and the metrics computed from it."""
    out = tmp_path / "same"
    first = subprocess.Popen([sys.executable, "-m", "simulator.train"] + train_args(dataset_path, out, "--epochs", "4"),
                             cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in first.stderr:                                      # its data is read: OUT is held
        if line.startswith("data: "):
            break
    second = subprocess.run([sys.executable, "-m", "simulator.train"] + train_args(dataset_path, out, "--seed", "1"),
                            cwd=ROOT, env=ENV, capture_output=True, text=True)
    first.stderr.read()
    assert first.wait() == 0
    assert second.returncode == 2 and second.stderr.strip().splitlines()[-1].startswith("error: ")
    state = load_checkpoint(str(out))
    metrics = json.loads((out / "metrics.json").read_text())
    assert state["config"]["seed"] == 0 == metrics["config"]["seed"]
    assert metrics["checkpoint"]["weights_sha256"] == weights_digest(state)


def test_a_benchmark_results_folder_has_one_writer(tmp_path, capsys):
    from benchmarks import sweep
    results = tmp_path / "results"
    with held_by_another_process(results):
        assert sweep.main(["--results", str(results), "--runs", str(tmp_path / "runs"), "--models", "gcn",
                           "--fractions", "0.5", "--seeds", "0"]) == 2
        one_line_error(capsys, str(results), "another process is writing")
    assert not (tmp_path / "runs").exists()


def test_a_stale_metrics_json_is_named_by_evaluate_and_predict(tmp_path, dataset_path, finished, capsys):
    other = tmp_path / "other"
    assert train.main(train_args(dataset_path, other, "--seed", "1")) == 0
    run = copy_run(finished, tmp_path)
    shutil.copy(other / "metrics.json", run / "metrics.json")          # another run's metrics beside it
    capsys.readouterr()
    evaluate.run([str(run), "--threads", "1"])
    warning = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1 and "metrics.json was computed from other weights" in warning[0]
    predict.run([str(run), dataset_path, "--top-k", "1", "--threads", "1"])
    assert "computed from other weights" in capsys.readouterr().err
    # --write makes them agree again (and keeps nothing of the other run)
    evaluate.run([str(run), "--write", "--threads", "1"])
    capsys.readouterr()
    evaluate.run([str(run), "--threads", "1"])
    assert "warning" not in capsys.readouterr().err
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["checkpoint"]["weights_sha256"] == weights_digest(load_checkpoint(str(run)))
    assert metrics["config"]["seed"] == 0


def test_overwrite_clears_the_old_run_before_writing(tmp_path, dataset_path, finished, capsys):
    """A run replaced with --overwrite and killed mid-way leaves its own checkpoint and no
    metrics.json of the old run beside it."""
    run = copy_run(finished, tmp_path)
    old_digest = weights_digest(load_checkpoint(str(run)))
    cmd = [sys.executable, "-m", "simulator.train"] + train_args(dataset_path, run, "--seed", "3", "--overwrite")
    backup = copy_run(run, tmp_path, "backup")
    for _ in range(3):   # on a loaded machine the run may finish before the kill lands: again
        shutil.rmtree(run)
        shutil.copytree(backup, run)
        returncode, stderr = _kill(cmd)
        if returncode == -9:
            break
    assert returncode == -9, stderr[-2000:]
    assert "removed the earlier run's checkpoint.pt, metrics.json (--overwrite)" in stderr
    assert not (run / "metrics.json").exists()
    state = load_checkpoint(str(run))
    assert state["config"]["seed"] == 3 and weights_digest(state) != old_digest


def _kill(cmd):
    """Run `cmd`, SIGKILL it once it prints epoch 1's line (its checkpoint is saved by then)."""
    import signal
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = []
    for line in proc.stderr:
        err.append(line)
        if line.startswith("epoch   1 "):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    err.append(proc.stderr.read())
    proc.stderr.close()
    return proc.returncode, "".join(err)


def test_resume_and_overwrite_together_are_refused(tmp_path, dataset_path, capsys):
    assert train.main(train_args(dataset_path, tmp_path / "r", "--resume", "--overwrite")) == 2
    one_line_error(capsys, "--resume", "--overwrite")


# ================================================================ class 4: checksums
def flip_in_record(src, dst, member, offset, mask):
    """Rewrite the torch archive with one byte of a data record changed (the zip itself
    stays valid: the change is inside a tensor, not in the archive's structure)."""
    with zipfile.ZipFile(src) as z:
        items = [(info, z.read(info.filename)) for info in z.infolist()]
    with zipfile.ZipFile(dst, "w") as out:
        for info, data in items:
            if info.filename == member:
                data = bytearray(data)
                data[offset % len(data)] ^= mask
                data = bytes(data)
            out.writestr(info, data)


def data_records(path):
    with zipfile.ZipFile(path) as z:
        return sorted(i.filename for i in z.infolist() if "/data/" in i.filename and i.file_size)


@settings(max_examples=40, **SETTINGS)
@given(data=st.data())
def test_a_changed_byte_in_any_tensor_is_refused_on_load(tmp_path_factory, finished, data):
    ckpt = finished / "checkpoint.pt"
    member = data.draw(st.sampled_from(data_records(ckpt)), label="record")
    offset = data.draw(st.integers(0, 10 ** 6), label="offset")
    mask = data.draw(st.integers(1, 255), label="xor")
    folder = tmp_path_factory.mktemp("damaged")
    flip_in_record(ckpt, folder / "checkpoint.pt", member, offset, mask)
    with pytest.raises(SimulatorError) as e:
        load_checkpoint(str(folder))
    message = str(e.value)
    assert message.startswith(f"{folder / 'checkpoint.pt'}: damaged checkpoint") and "\n" not in message


def test_damaged_checkpoints_are_one_line_errors_in_every_cli(tmp_path, dataset_path, finished, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    record = data_records(finished / "checkpoint.pt")[-1]
    flip_in_record(finished / "checkpoint.pt", bad / "checkpoint.pt", record, 7, 0x10)
    for main, args in ((evaluate.main, [str(bad)]), (predict.main, [str(bad), dataset_path]),
                       (train.main, train_args(dataset_path, bad, "--resume"))):
        assert main(args) == 2
        one_line_error(capsys, str(bad / "checkpoint.pt"), "damaged checkpoint")


def test_a_tensor_replaced_with_nans_is_refused(tmp_path, finished):
    state = torch.load(finished / "checkpoint.pt", weights_only=True)
    name = next(iter(state["best_model"]))
    state["best_model"][name] = torch.full_like(state["best_model"][name], float("nan"))
    (tmp_path / "a").mkdir()
    torch.save(state, tmp_path / "a" / "checkpoint.pt")              # the stored checksum kept
    with pytest.raises(SimulatorError, match="damaged checkpoint"):
        load_checkpoint(str(tmp_path / "a"))
    save_checkpoint(str(tmp_path / "b" / "checkpoint.pt"), state)      # checksummed NaN weights
    with pytest.raises(SimulatorError, match=rf"best_model weight '{name}' holds a non-finite value \(nan\)"):
        load_checkpoint(str(tmp_path / "b"))


def test_a_checkpoint_without_checksum_loads_with_a_warning(tmp_path, finished, capsys):
    state = torch.load(finished / "checkpoint.pt", weights_only=True)
    del state["checksum"]
    (tmp_path / "old").mkdir()
    torch.save(state, tmp_path / "old" / "checkpoint.pt")
    assert load_checkpoint(str(tmp_path / "old"))["epoch"] == 3
    assert "written without a checksum" in capsys.readouterr().err


# ================================================================ class 8: what a resume records
def test_resume_with_more_epochs_extends_a_finished_run(tmp_path, dataset_path, finished, capsys):
    run = copy_run(finished, tmp_path)
    assert train.main(train_args(dataset_path, run, "--resume", "--epochs", "5")) == 0
    assert "extending the finished run from 3 to 5 epochs" in capsys.readouterr().err
    state = load_checkpoint(str(run))
    metrics = json.loads((run / "metrics.json").read_text())
    assert state["epoch"] == 5 and [h["epoch"] for h in state["history"]] == [1, 2, 3, 4, 5]
    assert metrics["config"]["epochs"] == 5 and metrics["run"]["epochs_run"] == 5
    assert metrics["run"]["extended_from"] == 3
    assert metrics["checkpoint"]["epoch"] == 5 and state["step"] > load_checkpoint(str(finished))["step"]


def test_resume_refuses_what_it_would_not_train(tmp_path, dataset_path, finished, capsys):
    run = copy_run(finished, tmp_path)
    before = (run / "metrics.json").read_text()
    assert train.main(train_args(dataset_path, run, "--resume", "--epochs", "2")) == 2
    one_line_error(capsys, "--epochs 2", "already trained 3 epochs")
    # a run that stopped early cannot be extended
    state = load_checkpoint(str(run))
    state["bad_epochs"] = state["config"]["patience"]
    save_checkpoint(str(run / "checkpoint.pt"), state)
    assert train.main(train_args(dataset_path, run, "--resume", "--epochs", "6")) == 2
    one_line_error(capsys, "--epochs 6", "stopped early at epoch 3")
    assert (run / "metrics.json").read_text() == before                # nothing recorded


def test_resume_of_xgb_keeps_its_epochs(tmp_path, dataset_path, capsys):
    out = tmp_path / "xgb"
    assert train.main(train_args(dataset_path, out, "--model", "xgb", "--xgb-rounds", "5")) == 0
    assert train.main(train_args(dataset_path, out, "--model", "xgb", "--xgb-rounds", "5", "--resume",
                                 "--epochs", "9")) == 0
    assert "ignoring --epochs" in capsys.readouterr().err
    assert json.loads((out / "metrics.json").read_text())["config"]["epochs"] == 3


def narrower(samples, features=None, vector=None):
    out = []
    for s in samples:
        s = copy.copy(s)
        if features:
            s.node_features = s.node_features[:, :features]
        if vector:
            s.vectors = {k: np.asarray(v).reshape(s.num_configs, -1)[:, :vector] for k, v in s.vectors.items()}
        out.append(s)
    return out


@pytest.mark.parametrize("model,change,needle", [
    ("gcn", {"features": 4}, "4 node features, the model expects 6"),
    ("curve-mlp", {"vector": 10}, "10 values in vectors['curve'] per config, the model expects 24"),
])
def test_data_of_another_shape_than_the_model_is_a_clear_error(tmp_path, dataset_path, synthetic_samples, capsys,
                                                               model, change, needle):
    from extract.sample import save_samples
    run = tmp_path / "run"
    assert train.main(train_args(dataset_path, run, "--model", model, "--epochs", "1")) == 0
    other = tmp_path / "other"
    other.mkdir()
    save_samples(str(other / "d.npz"), narrower(synthetic_samples, **change))
    assert evaluate.main([str(run), "--data", str(other)]) == 2
    one_line_error(capsys, needle)
    assert predict.main([str(run), str(other)]) == 2
    one_line_error(capsys, needle)


def test_a_tvm_model_given_tpugraphs_files_is_a_clear_error(tmp_path, finished, capsys):
    from simulator.data.synthetic import write_tpugraphs_collection
    write_tpugraphs_collection(str(tmp_path), "tile:xla", graphs=(1, 1, 1), seed=0)
    for main, args in ((predict.main, [str(finished), str(tmp_path / "npz")]),
                       (evaluate.main, [str(finished), "--data", str(tmp_path / "npz")]),
                       (evaluate.main, [str(finished), "--data", "tpugraphs:tile:xla"])):
        assert main(args) == 2
        one_line_error(capsys, "TpuGraphs")


def test_a_graph_without_nodes_is_named(tmp_path, synthetic_samples, finished, capsys):
    """In memory (a list of samples to predict, a source) the simulator names the sample;
    from a file, the collection reader already does (file and sample)."""
    from extract.sample import save_samples
    from simulator.data.batching import BatchSpec
    from simulator.models.costmodel import CostModel
    from simulator.data.in_memory import SampleSource
    samples = [copy.copy(s) for s in synthetic_samples]
    empty = samples[40]
    empty.node_features, empty.node_types = empty.node_features[:0], empty.node_types[:0]
    empty.edges = np.zeros((0, 2), np.int64)
    with pytest.raises(SimulatorError, match=rf"^{empty.name}: the graph has 0 nodes"):
        SampleSource(samples).items(BatchSpec())
    with pytest.raises(SimulatorError, match=rf"^{empty.name}: the graph has 0 nodes"):
        CostModel.load(str(finished)).predict(samples[38:42])
    (tmp_path / "d").mkdir()
    save_samples(str(tmp_path / "d" / "d.npz"), samples)
    assert train.main(train_args(tmp_path / "d", tmp_path / "run", "--epochs", "1")) == 2
    line = one_line_error(capsys, empty.name)[-1]
    assert "0 nodes" in line or "no nodes" in line


# ================================================================ class 9: progress
def test_off_a_terminal_training_prints_a_few_lines(tmp_path, dataset_path):
    proc = subprocess.run([sys.executable, "-m", "simulator.train"] + train_args(dataset_path, tmp_path / "r"),
                          cwd=ROOT, env={k: v for k, v in ENV.items() if k != "TQDM_DISABLE"},
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert sum(line.startswith("epoch ") for line in lines) == 3
    assert len(lines) <= 3 + 4, lines          # data, model, 3 epochs, wrote


def test_on_a_terminal_training_draws_a_bar(tmp_path, dataset_path):
    import fcntl
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal's size
    proc = subprocess.Popen([sys.executable, "-m", "simulator.train"] + train_args(dataset_path, tmp_path / "r"),
                            cwd=ROOT, env={k: v for k, v in ENV.items() if k != "TQDM_DISABLE"},
                            stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:       # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait() == 0
    text = b"".join(chunks).decode(errors="replace")
    assert "epoch 1/3" in text and "batch" in text          # tqdm's bar: "epoch 1/3: …batch/s"


def test_a_benchmark_run_killed_mid_way_resumes_from_its_checkpoint(tmp_path, dataset_path):
    """`benchmarks.common.run_training` continues an unfinished run of the same config
    (from the epoch its checkpoint holds), and starts over one of another config."""
    from benchmarks.common import run_training

    run = tmp_path / "run"
    argv = train_args(dataset_path, run)
    for _ in range(3):   # on a loaded machine the run may finish before the kill lands: again
        shutil.rmtree(run, ignore_errors=True)
        returncode, stderr = _kill([sys.executable, "-m", "simulator.train"] + argv)
        if returncode == -9:
            break
    assert returncode == -9, stderr[-2000:]
    assert load_checkpoint(str(run))["epoch"] == 1 and not (run / "metrics.json").exists()
    metrics = run_training(argv, str(run))
    log = (run / "train.log").read_text()
    assert "after epoch 1" in log and "epoch   1 " not in log and "epoch   3 " in log
    assert metrics["config"]["epochs"] == 3 and load_checkpoint(str(run))["epoch"] == 3

    (run / "metrics.json").unlink()                 # unfinished again, but of another seed now
    run_training(argv + ["--seed", "5"], str(run))
    log = (run / "train.log").read_text()
    assert "epoch   1 " in log and load_checkpoint(str(run))["config"]["seed"] == 5
