"""The MetaSchedule networks dataset: compaction of a work folder, loading with
network / operator-kind tags, and the leave-network-out / leave-op-kind-out splits."""
import argparse
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from datasets import DatasetError, load_collection
from datasets.ship import main as ship_main
from datasets.ship import ship
from datasets.networks import NetworkDataError, agreement, is_dataset, summarize_agreement
from extract.sample import GraphSample
from simulator.data.splits import GroupTags, group_tags, make_split
from simulator.registry import SimulatorError

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "data" / "networks_tiny"

# ---------------------------------------------------------------- a fake work folder
TASKS = [("conv2d.a.1x8_8x8.float32.0000000a.t", "conv2d", {"resnet50": 2}),
         ("dense.b.1x8_8x8.float32.0000000b.t", "dense", {"bert": 1, "vit": 3}),
         ("softmax.c.1x8_1x8.float32.0000000c.t", "softmax", {"vit": 1})]


TARGET = json.dumps({"kind": "llvm", "mcpu": "testcpu", "num-cores": 1})


def _jsonl(path, rows, cut_off=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + cut_off)


def _record(workload, secs):
    return [workload, [[["trace"]], secs, {"kind": "llvm"}, []]]


def make_work(folder: Path, second_times=None, cut_off="") -> Path:
    """3 tasks × 4 records (one failed), all of pass 1 re-timed in pass 2."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tasks.json").write_text(json.dumps({"version": 2, "target": TARGET, "tasks": [
        {"key": k, "kind": kind, "shapes": [[1, 8], [8, 8]], "dtype": "float32", "flops": 1.0,
         "networks": nets, "task_names": {}, "mod_json": "{}"} for k, kind, nets in TASKS]}))
    (folder / "meta.json").write_text(json.dumps({"sessions": [
        {"argv": ["/x/extract/ms_measure.py", "--work-dir", str(folder), "--trials-per-task", "4"],
         "machine": {"cpu_model": "TestCPU", "cores": 2, "llvm_cpu": "testcpu"}, "measure": {"repeat": 5}}]}))
    _jsonl(folder / "reference.jsonl", [{"time": 2000.0 * i, "median": 1e-3 * (1 + (i >= 2)), "pass": 1}
                                        for i in range(4)])
    side1, side2, recs = [], [], {"random": [], "evolutionary": []}
    for w, (key, _, _) in enumerate(TASKS):
        for r in range(4):
            method = "random" if r % 2 == 0 else "evolutionary"
            ok = r != 3
            t = 1e-3 * (r + 1) * (w + 1)
            row = {"workload": key, "method": method, "record": r, "mod_hash": f"{w}{r}", "time": 50.0 * r,
                   "stage": "ok" if ok else "run", "error": None if ok else "boom",
                   "median": t if ok else None, "min": t if ok else None, "run_secs": [t] * 3 if ok else None}
            side1.append(row)
            recs[method].append(_record(w, [t] * 3 if ok else [1e10]))
            if ok:
                t2 = second_times(w, r, t) if second_times else t * 1.1
                side2.append(dict(row, median=t2, time=6000.0 + r, pass_=2))
    for method, rows in recs.items():
        _jsonl(folder / "pass1" / method / "database_workload.json", [["h", {}]] * len(TASKS))
        _jsonl(folder / "pass1" / method / "database_tuning_record.json", rows, cut_off)
    _jsonl(folder / "pass1" / "records.jsonl", side1)
    _jsonl(folder / "pass2" / "records.jsonl", side2)
    return folder


def _gunzip_lines(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def test_compaction_writes_gzip_databases_sidecar_and_table(tmp_path):
    work = make_work(tmp_path / "work", cut_off='[0, [["tr')
    out = tmp_path / "out"
    report = ship(work, out)
    rec = _gunzip_lines(out / "pass1" / "random" / "database_tuning_record.json.gz")
    assert len(rec) == 6 and all(json.loads(x) for x in rec)             # the cut-off line left out …
    assert str(work / "pass1" / "random" / "database_tuning_record.json") in report.cut_off  # … and said
    assert len(_gunzip_lines(out / "pass1" / "records.jsonl.gz")) == 12  # every record, every repeat
    assert json.loads(gzip.open(out / "tasks.json.gz").read())["tasks"][1]["networks"] == {"bert": 1, "vit": 3}
    summary = json.loads((out / "summary.json").read_text())
    dense = summary["tasks"][1]
    assert (dense["kind"], dense["weight"], dense["valid"], dense["errors"]) == ("dense", 4, 3, 1)
    assert dense["min_ms"] == pytest.approx(2.0) and dense["max_ms"] == pytest.approx(6.0)
    assert dense["tau"] == pytest.approx(1.0) and dense["rel_diff"] == pytest.approx(0.1)
    text = (out / "README.md").read_text()
    assert "--trials-per-task 4" in text and "TestCPU" in text and "| dense |" in text
    assert "cut-off last line left out" in text
    assert is_dataset(out)


def test_compaction_is_deterministic_and_refuses_to_overwrite(tmp_path):
    work = make_work(tmp_path / "work")
    ship(work, tmp_path / "a")
    ship(work, tmp_path / "b")
    for f in ("tasks.json.gz", "pass1/records.jsonl.gz", "pass1/evolutionary/database_tuning_record.json.gz"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    assert ship_main([str(work), "--out", str(tmp_path / "a")]) == 2          # exists: one-line error
    assert ship_main([str(work), "--out", str(tmp_path / "a"), "--overwrite"]) == 0
    assert ship_main([str(tmp_path / "nothing"), "--out", str(tmp_path / "c")]) == 2


def test_sidecar_and_database_disagreeing_is_reported(tmp_path):
    work = make_work(tmp_path / "work")
    with open(work / "pass1" / "evolutionary" / "database_tuning_record.json", "a") as f:
        f.write(json.dumps(_record(0, [1e-3])) + "\n")
    report = ship(work, tmp_path / "out")
    assert report.problems == ["pass1/evolutionary: the database holds 7 records, the sidecar 6 lines"]


def test_agreement_raw_and_drift_corrected(tmp_path):
    # pass 2 swaps two records of task 0: τ drops below 1 for it only
    swap = {(0, 0): 2e-3, (0, 1): 1e-3}
    work = make_work(tmp_path / "work", second_times=lambda w, r, t: swap.get((w, r), t))
    raw = agreement(work)
    assert raw["conv2d.a.1x8_8x8.float32.0000000a.t"].tau == pytest.approx(1 / 3)
    assert raw["dense.b.1x8_8x8.float32.0000000b.t"].tau == pytest.approx(1.0)
    assert raw["dense.b.1x8_8x8.float32.0000000b.t"].median_rel_diff == 0.0
    # the reference kernel ran twice as slow when pass 2 measured (t≈6000) as in pass 1 (t≈0):
    # corrected, pass 2's runtimes are halved against pass 1's
    corrected = agreement(work, corrected=True)
    assert corrected["dense.b.1x8_8x8.float32.0000000b.t"].median_rel_diff == pytest.approx(0.5)
    summary = summarize_agreement(raw)
    assert summary["tasks_with_tau"] == 3 and summary["mean_tau"] == pytest.approx((1 / 3 + 2) / 3)
    assert summarize_agreement({})["mean_tau"] is None                  # nothing: None, never NaN


def test_bad_sidecar_line_names_file_and_line(tmp_path):
    work = make_work(tmp_path / "work")
    with open(work / "pass2" / "records.jsonl", "a") as f:
        f.write("{not json\n")
    with pytest.raises(NetworkDataError, match=r"pass2/records.jsonl:10: not JSON"):
        agreement(work)


# ---------------------------------------------------------------- loading (real records)
def test_loader_reads_pass1_only_and_tags_networks_and_kinds(tmp_path):
    c = load_collection([str(TINY)], progress=False, cache=str(tmp_path))
    assert len(c.samples) == 24 and c.duplicates == 0                   # pass 2 not read
    assert {s.meta.database.split(os.sep)[-2] for s in c.samples} == {"pass1"}
    tags = {(s.meta.kind, tuple(s.meta.networks)) for s in c.samples}
    assert tags == {("conv2d", ("resnet50",)), ("dense", ("bert",)), ("depthwise_conv2d", ("mobilenet_v2",))}
    assert any("tagged 24 samples" in line for line in c.read)


def test_loader_names_a_broken_task_table(tmp_path):
    import shutil
    copy = tmp_path / "ds"
    shutil.copytree(TINY, copy)
    (copy / "tasks.json.gz").write_bytes(gzip.compress(b'{"tasks": [{"key": "x"}]}'))
    with pytest.raises(DatasetError, match="tasks.json.gz: task 0 lacks kind, networks"):
        load_collection([str(copy)], progress=False, cache=str(tmp_path / "cache"))


# ---------------------------------------------------------------- splits
def _sample(group, networks=None, kind=None):
    meta = {"networks": networks} if networks else {}
    if kind:
        meta["kind"] = kind
    return GraphSample(np.zeros((0, 2)), np.zeros((1, 1)), np.zeros(1), np.ones(1), group, meta=meta)


SAMPLES = ([_sample("conv2d.a.1x8.f.0000000a.t", ["resnet50"]) for _ in range(10)]
           + [_sample("dense.b.1x8.f.0000000b.t", ["bert", "vit"]) for _ in range(10)]
           + [_sample("softmax.c.1x8.f.0000000c.t", ["vit"]) for _ in range(10)]
           + [_sample("C1") for _ in range(10)])


def _groups_of(parts, part):
    return {SAMPLES[i].group for i in parts[part]}


def test_leave_network_out_holds_out_every_task_of_the_network():
    tags = group_tags(SAMPLES)
    parts = make_split([s.group for s in SAMPLES], "leave-network-out", 0, tags=tags, test_network="vit")
    assert _groups_of(parts, "test") == {"dense.b.1x8.f.0000000b.t", "softmax.c.1x8.f.0000000c.t"}     # the shared task too
    assert _groups_of(parts, "train") == _groups_of(parts, "val") == {"conv2d.a.1x8.f.0000000a.t", "C1"}
    assert len(parts["val"]) == 4 and len(parts["train"]) == 16
    parts = make_split([s.group for s in SAMPLES], "leave-network-out", 0, tags=tags, test_network="bert")
    assert _groups_of(parts, "test") == {"dense.b.1x8.f.0000000b.t"}


def test_leave_op_kind_out_uses_tags_and_workload_keys():
    tags = group_tags(SAMPLES)
    assert tags["softmax.c.1x8.f.0000000c.t"] == GroupTags(("vit",), "softmax")   # from the key when untagged
    assert tags["C1"] == GroupTags((), None)
    parts = make_split([s.group for s in SAMPLES], "leave-op-kind-out", 1, tags=tags, test_op_kind="softmax")
    assert _groups_of(parts, "test") == {"softmax.c.1x8.f.0000000c.t"}
    assert "softmax.c.1x8.f.0000000c.t" not in _groups_of(parts, "train") | _groups_of(parts, "val")


def test_leave_out_errors_list_the_valid_names():
    groups, tags = [s.group for s in SAMPLES], group_tags(SAMPLES)
    with pytest.raises(SimulatorError, match=r"'gpt' is not in the data \(networks: bert, resnet50, vit\)"):
        make_split(groups, "leave-network-out", 0, tags=tags, test_network="gpt")
    with pytest.raises(SimulatorError, match=r"--test-op-kind 'pool' is not .*conv2d, dense, softmax"):
        make_split(groups, "leave-op-kind-out", 0, tags=tags, test_op_kind="pool")
    with pytest.raises(SimulatorError, match="--test-network is required"):
        make_split(groups, "leave-network-out", 0, tags=tags)
    with pytest.raises(SimulatorError, match="--test-network applies to --split leave-network-out only"):
        make_split(groups, "cross-workload", 0, ["C1"], ["conv2d.a.1x8.f.0000000a.t"], tags=tags, test_network="vit")
    with pytest.raises(SimulatorError, match="carry no networks"):
        make_split(["C1", "C2"], "leave-network-out", 0, tags={}, test_network="vit")


def test_train_cli_leave_network_out_on_the_tiny_dataset(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TPSIM_CACHE=str(tmp_path / "cache"), TQDM_DISABLE="1")
    cmd = [sys.executable, "-m", "simulator.train", "--data", str(TINY), "--split", "leave-network-out",
           "--test-network", "bert", "--model", "mlp", "--epochs", "1", "--threads", "1", "--out",
           str(tmp_path / "run")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert list(metrics["test"]["kendall_tau"]["per_workload"]) == [
        "dense.mac-add.1x128x768_768x768_768_1x128x768.float32.aac11223.llvm-rocketlake-1c"]
    bad = subprocess.run(cmd[:-1] + [str(tmp_path / "run2"), "--test-network", "gpt"], capture_output=True,
                         text=True, env=env, cwd=ROOT)
    assert bad.returncode == 2 and "(networks: bert, mobilenet_v2, resnet50)" in bad.stderr


# ---------------------------------------------------------------- the benchmark
def test_benchmark_plans_runs_and_reports_beside_the_ceiling(tmp_path):
    from benchmarks import networks as bench

    out = tmp_path / "results"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TPSIM_CACHE=str(tmp_path / "cache"), TQDM_DISABLE="1")
    cmd = [sys.executable, "-m", "benchmarks.networks", "--networks-data", str(TINY), "--networks-models", "mlp",
           "--held-networks", "bert", "--held-kinds", "dense", "--networks-epochs", "1", "--combined-models",
           "--networks-seeds", "0", "1", "--runs", str(tmp_path / "runs"), "--results", str(out), "--parallel", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_data = json.loads((tmp_path / "runs/networks/leave-network-out-bert-mlp-seed0/bench_data.json").read_text())
    assert run_data == {"digest": bench.dataset_digest(str(TINY))}          # a grown dataset trains again
    res = json.loads((out / "networks_tiny_1_epochs.json").read_text())   # one per dataset and epoch count
    (out / "networks_other.json").write_text(json.dumps(dict(res, dataset="elsewhere/networks_other", protocol=dict(
        res["protocol"], valid_records=res["protocol"]["valid_records"] + 1))))
    assert [r["dataset"] for r in bench.load_results(str(out))] == ["elsewhere/networks_other", str(TINY)]
    assert bench.result_stem("datasets/networks_znver4/") == "networks_znver4" and \
        bench.result_stem("mine") == "networks_mine"
    assert bench.result_stem("datasets/networks_znver4", 60) == "networks_znver4_60_epochs"   # beside, not over
    longer = dict(res, protocol=dict(res["protocol"], epochs=res["protocol"]["epochs"] + 50))
    (out / "networks_tiny_longer.json").write_text(json.dumps(longer))
    epochs = res["protocol"]["epochs"]
    assert [(r["dataset"], r["protocol"]["epochs"]) for r in bench.load_results(str(out))] == [
        ("elsewhere/networks_other", epochs), (str(TINY), epochs + 50), (str(TINY), epochs)]   # longest first
    assert bench.report_section(longer)[0].endswith(f"`networks_tiny`, {epochs + 50} epochs)")
    (out / "networks_tiny_longer.json").unlink()
    assert {(r["axis"], r["held"], r["seed"]) for r in res["rows"]} == {
        (axis, held, seed) for axis, held in (("network", "bert"), ("kind", "dense")) for seed in (0, 1)}
    assert res["protocol"]["seeds"] == [0, 1] and res["not_held_kinds"] == {}
    summary = json.loads((TINY / "summary.json").read_text())
    # default kinds: those with a task of > 5 records (all three of the fixture, not a 1-record one)
    assert bench.default_kinds(summary) == ["conv2d", "dense", "depthwise_conv2d"]
    assert bench.default_kinds({"tasks": [{"kind": "elementwise", "valid": 1}]}) == []
    dense = next(t for t in summary["tasks"] if t["kind"] == "dense")
    assert res["ceilings"]["network:bert"] == {"tau": dense["tau"], "tasks": 1, "corrected": dense["tau_corrected"]}
    text = "\n".join(bench.report_section(res))
    assert "**Leave one network out**" in text and "| bert | 1 |" in text
    assert "networks dataset `networks_tiny`, 1 epoch)" in text and "docs/results/networks_tiny_1_epochs.json" in text
    assert "nan" not in text.lower()
    row = next(r for r in res["rows"] if r["held"] == "bert")
    assert row["tasks"] == 1 and "--test-network bert" in row["command"]
    assert "--loss pairwise-hinge" in row["command"] and res["protocol"]["loss"] == "pairwise-hinge"
    # the ranking recipe: every run trained with the ranking loss (grouped batches)
    assert bench.LOSS == "pairwise-hinge" and "loss `pairwise-hinge`" in text
    run = json.loads((tmp_path / "runs" / "networks" / "leave-network-out-bert-mlp-seed0" / "metrics.json").read_text())
    assert run["config"]["loss"] == "pairwise-hinge" and row["command"].endswith("--loss pairwise-hinge")
    # a run of one seed and one axis adds to the table (its run reused) rather than replacing it
    again = subprocess.run([*cmd[:cmd.index("--held-kinds") + 1], *cmd[cmd.index("--networks-epochs"):
                                                                      cmd.index("--networks-seeds") + 2],
                            *cmd[cmd.index("--runs"):]], capture_output=True, text=True, env=env, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "3 rows of" in again.stderr and "this run did not make are kept" in again.stderr
    merged = json.loads((out / "networks_tiny_1_epochs.json").read_text())
    assert merged["rows"] == res["rows"] and merged["protocol"] == res["protocol"]
    assert merged["digest"] == bench.dataset_digest(str(TINY))


def _table_row(model: str, seed: int, axis: str = "network", held: str = "bert") -> dict:
    return {"axis": axis, "held": held, "model": model, "shipped": False, "seed": seed, "kendall_tau": 0.5}


def test_a_table_grows_by_the_runs_of_its_own_data_and_loss_only(tmp_path):
    from benchmarks import networks as bench

    path = tmp_path / "networks_x.json"
    protocol = {"loss": "pairwise-hinge", "seeds": [1], "models": ["gcn"], "kind_models": [], "network_models": [],
                "combined_models": [], "epochs": 10}
    earlier = [_table_row("xgb", 0), _table_row("gcn", 0), _table_row("gcn", 1), _table_row("xgb", 0, "kind", "dense")]
    path.write_text(json.dumps({"digest": "d1", "rows": earlier,
                                "protocol": dict(protocol, seeds=[0, 1], models=["xgb", "gcn"])}))
    new = [dict(_table_row("gcn", 1), kendall_tau=0.6), _table_row("sage", 1)]
    rows, merged = bench.with_earlier_rows(str(tmp_path), path.name, "d1", new, dict(protocol, models=["gcn", "sage"]))
    assert [(r["axis"], r["model"], r["seed"], r["kendall_tau"]) for r in rows] == [
        ("network", "xgb", 0, 0.5), ("network", "gcn", 0, 0.5), ("kind", "xgb", 0, 0.5),
        ("network", "gcn", 1, 0.6), ("network", "sage", 1, 0.5)]     # the same run's row replaced
    assert merged["models"] == ["xgb", "gcn", "sage"] and merged["seeds"] == [0, 1]
    # another dataset (digest), another loss, or a table from before tables said: replaced
    for digest, loss in (("d2", "pairwise-hinge"), ("d1", "lambdarank")):
        assert bench.with_earlier_rows(str(tmp_path), path.name, digest, new, dict(protocol, loss=loss)) == (
            new, dict(protocol, loss=loss))
    path.write_text(json.dumps({"rows": earlier, "protocol": protocol}))
    assert bench.with_earlier_rows(str(tmp_path), path.name, "d1", new, protocol) == (new, protocol)
    assert bench.with_earlier_rows(str(tmp_path), "none.json", "d1", new, protocol) == (new, protocol)
    path.write_text("{not json")
    with pytest.raises(SimulatorError, match="networks_x.json: not a results table"):
        bench.with_earlier_rows(str(tmp_path), path.name, "d1", new, protocol)


def test_the_dataset_digest_follows_the_measured_files_only(tmp_path):
    import shutil

    from benchmarks.networks import dataset_digest

    data = tmp_path / "networks_tiny"
    shutil.copytree(TINY, data)
    before = dataset_digest(str(data))
    assert before == dataset_digest(str(TINY))                           # the same files wherever they are
    (data / "README.md").write_text("edited")
    (data / "pretrained").mkdir(exist_ok=True)
    (data / "pretrained" / "gcn.pt").write_bytes(b"a checkpoint")
    assert dataset_digest(str(data)) == before                           # nothing a run trains on
    with gzip.open(data / "pass1" / "records.jsonl.gz", "ab") as f:
        f.write(b"\n")
    assert dataset_digest(str(data)) != before                           # measured again or grown


def test_a_run_with_the_shipped_data_added_follows_that_data_too(tmp_path, monkeypatch):
    import datasets

    from benchmarks.networks import run_data

    log = tmp_path / "pass1.jsonl.gz"
    log.write_bytes(b"one measuring pass")
    monkeypatch.setattr(datasets, "SHIPPED_LOG", log)
    assert run_data("abc", shipped=False) == "abc"                       # the networks dataset alone
    with_shipped = run_data("abc", shipped=True)
    assert with_shipped not in ("abc", run_data("abd", shipped=True))    # either dataset grown: another
    log.write_bytes(b"another measuring pass")
    assert run_data("abc", shipped=True) != with_shipped                 # the shipped log measured again


def test_benchmark_loss_is_checked_and_reaches_every_run():
    from benchmarks import networks as bench

    ap = argparse.ArgumentParser()
    bench.add_arguments(ap)
    ap.add_argument("--runs", default="runs")
    args = ap.parse_args(["--networks-loss", "huber", "--networks-models", "gcn", "xgb", "--held-networks", "bert",
                          "--held-kinds", "dense", "--combined-models", "gcn", "--networks-seeds", "0"])
    planned = bench.jobs(args, {"tasks": []})
    assert len(planned) == 5 and all(j["argv"][-2:] == ["--loss", "huber"] for j in planned)
    assert ap.parse_args([]).networks_loss == "pairwise-hinge" and ap.parse_args([]).networks_epochs == 10
    with pytest.raises(SystemExit):
        ap.parse_args(["--networks-loss", "nope"])


def test_report_averages_seeds_and_lists_the_kinds_that_cannot_be_held_out():
    from benchmarks.networks import report_section, unheld_kinds

    summary = {"tasks": [{"kind": "elementwise", "valid": 1}, {"kind": "elementwise", "valid": 1},
                         {"kind": "dense", "valid": 30}]}
    assert unheld_kinds(summary) == {"elementwise": {"tasks": 2, "valid": 2, "max_per_task": 1}}
    rows = [{"axis": "kind", "held": "dense", "model": "gcn", "shipped": False, "seed": seed, "tasks": 4,
             "kendall_tau": tau, "top1_slowdown": None, "top5_slowdown": 0.2, "top5_recall": 0.5}
            for seed, tau in ((0, 0.4), (1, 0.6), (2, None))]
    res = {"rows": rows, "ceilings": {}, "dataset": "d", "protocol": {"seeds": [0, 1, 2], "epochs": 3},
           "not_held_kinds": unheld_kinds(summary)}
    text = "\n".join(report_section(res))
    # the seed without a value is skipped, not counted as 0
    assert "| dense | 4 | – / – (0) | 0.500 ± 0.141 | – / – / – | – / 20.0% / 50.0% |" in text
    assert "Seeds 0, 1, 2 (mean ± standard deviation" in text
    assert "elementwise (2 tasks, 2 records, at most 1 per task)" in text


def test_topk_score_weighs_each_task_by_its_calls_in_the_held_out_network():
    """TenSet's top-k score: Σ w·L* / Σ w·L*(1 + s), from each task's fastest latency and slowdown."""
    from benchmarks.networks import add_scores, report_section

    summary = {"tasks": [{"key": "a", "kind": "dense", "networks": {"bert": 3, "vit": 1}, "weight": 4},
                         {"key": "b", "kind": "conv2d", "networks": {"bert": 1}, "weight": 1},
                         {"key": "c", "kind": "dense", "networks": {"vit": 2}, "weight": 2}]}
    row = {"axis": "network", "held": "bert", "model": "gcn", "shipped": False, "seed": 0, "tasks": 2,
           "kendall_tau": 0.5, "opa": 0.7, "command": "cmd",
           "best_ms": {"a": 1.0, "b": 4.0},
           "slowdowns": {"top1_slowdown": {"a": 1.0, "b": 0.5}, "top5_slowdown": {"a": 0.0, "b": 0.0}}}
    out = add_scores([dict(row)], summary)[0]
    # top-1: (3·1 + 1·4) / (3·1·2 + 1·4·1.5) = 7 / 12; top-5: every pick is the best
    assert out["top1_score"] == pytest.approx(7 / 12) and out["top5_score"] == 1.0
    assert "best_ms" not in out and "slowdowns" not in out
    # held out as an operator kind, a task weighs its calls in all networks
    kind = add_scores([dict(row, axis="kind", held="dense", best_ms={"a": 1.0, "c": 1.0},
                            slowdowns={"top1_slowdown": {"a": 1.0, "c": 0.0},
                                       "top5_slowdown": {"a": 0.0, "c": 0.0}})], summary)[0]
    assert kind["top1_score"] == pytest.approx((4 + 2) / (4 * 2 + 2))
    # a batch variant's task is held out with its network (as the split holds it out) and weighs
    # its calls in the variant
    variant = {"tasks": summary["tasks"] + [{"key": "d", "kind": "dense", "networks": {"bert_b8": 2}, "weight": 2}]}
    both = add_scores([dict(row, best_ms={"a": 1.0, "d": 1.0},
                            slowdowns={"top1_slowdown": {"a": 0.0, "d": 1.0},
                                       "top5_slowdown": {"a": 0.0, "d": 0.0}})], variant)[0]
    assert both["top1_score"] == pytest.approx((3 + 2) / (3 + 2 * 2))
    # a scored task that the held-out network does not hold is an error, not a silent weight
    with pytest.raises(SystemExit, match="task c is not a held-out task of bert"):
        add_scores([dict(row, best_ms={"a": 1.0, "c": 1.0},
                         slowdowns={"top1_slowdown": {"a": 0.0, "c": 0.0}, "top5_slowdown": {"a": 0.0, "c": 0.0}})],
                   summary)
    res = {"rows": [out], "ceilings": {}, "dataset": "d", "protocol": {}}
    assert "| 0.583 / 1.000 / 0.700 |" in "\n".join(report_section(res))


def test_combined_table_compares_with_the_networks_alone_run():
    from benchmarks.networks import report_section

    rows = [{"axis": "network", "held": "vit", "model": "gcn", "shipped": s, "tasks": 3, "kendall_tau": tau,
             "top1_slowdown": 0.1, "top5_slowdown": 0.0, "top5_recall": None} for s, tau in ((False, 0.5), (True, 0.6))]
    res = {"rows": rows, "ceilings": {"network:vit": {"tau": 0.8, "tasks": 3, "corrected": None}},
           "dataset": "d", "protocol": {}}
    text = "\n".join(report_section(res))
    assert "| vit | gcn | 0.500 | 0.600 | +0.100 |" in text
    assert "0.800 / – (3)" in text and "no ceiling" in text


def test_export_keeps_the_model_and_drops_the_run_state(tmp_path):
    import torch

    from simulator.models.costmodel import CostModel, load_trained
    from simulator.export import main as export_main

    env = dict(os.environ, PYTHONPATH=str(ROOT), TPSIM_CACHE=str(tmp_path / "cache"), TQDM_DISABLE="1")
    run = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "simulator.train", "--data", str(TINY), "--split", "random",
                    "--model", "gcn", "--epochs", "1", "--threads", "1", "--out", str(run)],
                   check=True, capture_output=True, env=env, cwd=ROOT)
    assert export_main([str(run), str(tmp_path / "gcn.pt"), "--scores", str(tmp_path / "gcn.json")]) == 0
    saved = json.loads((tmp_path / "gcn.json").read_text())
    ran = json.loads((run / "metrics.json").read_text())
    assert saved["test"]["kendall_tau"] == ran["test"]["kendall_tau"]["mean"] and saved["config"]["model"] == "gcn"
    assert saved["samples"] == {part: ran["run"][f"{part}_samples"] for part in ("train", "val", "test")}
    assert sum(saved["samples"].values()) == ran["run"]["train_samples"] + ran["run"]["val_samples"] + \
        ran["run"]["test_samples"] > 0
    full, _ = load_trained(str(run))
    small = CostModel.load(str(tmp_path / "gcn.pt"))
    a, b = full.net.state_dict(), small.net.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert small.info.vocabulary == full.info.vocabulary
    assert os.path.getsize(tmp_path / "gcn.pt") < os.path.getsize(run / "checkpoint.pt")
    assert export_main([str(tmp_path / "missing"), str(tmp_path / "x.pt")]) == 2


def test_readme_says_when_the_checkpoint_learned_from_an_earlier_snapshot():
    from datasets.ship import snapshot_line

    assert "earlier snapshot: 90 of the 200" in snapshot_line({"train": 70, "val": 10, "test": 10}, 200)
    assert snapshot_line({"train": 160, "val": 20, "test": 20}, 200).startswith("It was trained on all 200")
    assert "does not say" in snapshot_line({}, 200)


# ---------------------------------------------------------------- workload identity of the shipped data
SHIPPED_NETWORK_DATASETS = sorted(p for p in (ROOT / "datasets").glob("networks_*") if is_dataset(p))


@pytest.mark.parametrize("folder", [*SHIPPED_NETWORK_DATASETS, TINY], ids=lambda p: p.name)
def test_shipped_tables_are_keyed_by_computation_and_merge_no_programs(folder):
    """Every task's key is the one its IRModule gives today, and no key of the table stands for
    two different programs in the databases (`datasets.rekey` refuses such a table)."""
    from datasets.rekey import rekey

    report = rekey(folder, check=True)
    assert report["tasks"] > 0 and report["keys_changed"] == 0 and report["kinds_changed"] == {}
    assert set(report["sidecar_rows_changed"].values()) == {0}


def _to_old_key(key):
    parts = key.split(".")
    return ".".join(parts[:4] + parts[5:])


def test_rekey_upgrades_an_old_format_dataset(tmp_path):
    """The tiny dataset written with the old five-part keys (version 1) is refused by the
    loader with the command to run, and that command restores today's keys everywhere."""
    import shutil

    from datasets.rekey import main as rekey_main

    copy = tmp_path / "old"
    shutil.copytree(TINY, copy)
    table = json.loads(gzip.decompress((copy / "tasks.json.gz").read_bytes()))
    want = {row["key"] for row in table["tasks"]}
    table["version"] = 1
    for row in table["tasks"]:
        row["key"] = _to_old_key(row["key"])
    (copy / "tasks.json.gz").write_bytes(gzip.compress(json.dumps(table).encode()))
    for sidecar in copy.glob("pass*/records.jsonl.gz"):
        rows = [json.loads(line) for line in _gunzip_lines(sidecar)]
        sidecar.write_bytes(gzip.compress("".join(
            json.dumps(dict(r, workload=_to_old_key(r["workload"]))) + "\n" for r in rows).encode()))
    with pytest.raises(DatasetError, match="datasets.rekey"):
        load_collection([str(copy)], progress=False, cache=str(tmp_path / "cache"))
    assert rekey_main([str(copy)]) == 0
    table = json.loads(gzip.decompress((copy / "tasks.json.gz").read_bytes()))
    assert table["version"] == 2 and {row["key"] for row in table["tasks"]} == want
    for sidecar in copy.glob("pass*/records.jsonl.gz"):
        assert {json.loads(line)["workload"] for line in _gunzip_lines(sidecar)} <= want
    assert len(load_collection([str(copy)], progress=False, cache=str(tmp_path / "cache")).samples) == 24


# ---------------------------------------------------------------- one dataset per CPU model
def test_no_shipped_dataset_mixes_cpu_models():
    """Each `datasets/networks_<cpu>` was measured on that CPU only: its table's target, every
    session of its meta.json and its folder name agree; the default is the one with most
    measured tasks, and it ships a pre-trained cost model."""
    from datasets.networks import dataset_cpu, default_dataset, measured_tasks, shipped_datasets, table_cpu

    shipped = shipped_datasets()
    assert shipped, "no networks dataset is shipped"
    for cpu, folder in shipped.items():
        assert dataset_cpu(folder) == table_cpu(folder) == cpu
        meta = json.loads((folder / "meta.json").read_text())
        assert {s["machine"]["llvm_cpu"] for s in meta["sessions"]} == {cpu}
    most = max(measured_tasks(f) for f in shipped.values())
    assert measured_tasks(default_dataset()) == most > 0
    assert (default_dataset() / "pretrained" / "gcn.pt").is_file()


def _retarget(folder: Path, cpu: str) -> None:
    """Pretend the tiny dataset at `folder` was measured on `cpu`."""
    table = json.loads(gzip.decompress((folder / "tasks.json.gz").read_bytes()))
    table["target"] = json.dumps({**json.loads(table["target"]), "mcpu": cpu})
    (folder / "tasks.json.gz").write_bytes(gzip.compress(json.dumps(table).encode()))
    meta = json.loads((folder / "meta.json").read_text())
    for s in meta["sessions"]:
        s["machine"]["llvm_cpu"] = cpu
    (folder / "meta.json").write_text(json.dumps(meta))


def test_measuring_continues_this_cpus_dataset_and_refuses_another(tmp_path):
    """A new work folder starts from the shipped dataset of this CPU (unpacked: the same
    records, plain files), which ships back identical; another CPU's work folder or dataset,
    or a dataset whose sessions name two CPUs, is refused."""
    import shutil

    from datasets.measure import prepare
    from datasets.networks import dataset_cpu

    dataset = tmp_path / "networks_a"
    shutil.copytree(TINY, dataset)
    _retarget(dataset, "cpua")
    work = tmp_path / "work"
    assert "continues" in prepare(work, "cpua", dataset)
    assert (work / "tasks.json").is_file() and (work / "pass1" / "random" / "database_tuning_record.json").is_file()
    assert "resuming" in prepare(work, "cpua", dataset)
    again = tmp_path / "again"
    ship(work, again)
    for name in ("tasks.json.gz", "pass1/records.jsonl.gz", "pass1/random/database_tuning_record.json.gz",
                 "pass2/evolutionary/database_workload.json.gz"):
        assert _gunzip_lines(again / name) == _gunzip_lines(dataset / name), name
    with pytest.raises(NetworkDataError, match="measured on cpua, this machine is cpub"):
        prepare(work, "cpub", dataset)
    with pytest.raises(NetworkDataError, match="measured on cpua, this machine is cpub"):
        prepare(tmp_path / "fresh", "cpub", dataset)
    meta = json.loads((dataset / "meta.json").read_text())
    meta["sessions"][-1]["machine"]["llvm_cpu"] = "cpub"
    (dataset / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(NetworkDataError, match="measured on cpua and on cpub"):
        dataset_cpu(dataset)


def test_ship_refuses_another_cpus_dataset(tmp_path):
    import shutil

    one, other = tmp_path / "one", tmp_path / "other"
    shutil.copytree(TINY, one)
    shutil.copytree(TINY, other)
    _retarget(one, "cpua")
    _retarget(other, "cpub")
    with pytest.raises(NetworkDataError, match="holds measurements of cpub"):
        ship(one, other, overwrite=True)


def test_leave_network_out_holds_out_the_batch_variants_too():
    samples = ([_sample("conv2d.a.1x8.f.0000000a.t", ["resnet50"]) for _ in range(5)]
               + [_sample("conv2d.b.8x8.f.0000000b.t", ["resnet50_b8"]) for _ in range(5)]
               + [_sample("dense.c.1x8.f.0000000c.t", ["bert"]) for _ in range(5)])
    groups, tags = [s.group for s in samples], group_tags(samples)
    parts = make_split(groups, "leave-network-out", 0, tags=tags, test_network="resnet50")
    assert {groups[i] for i in parts["test"]} == {"conv2d.a.1x8.f.0000000a.t", "conv2d.b.8x8.f.0000000b.t"}
    parts = make_split(groups, "leave-network-out", 0, tags=tags, test_network="resnet50_b8")
    assert {groups[i] for i in parts["test"]} == {"conv2d.b.8x8.f.0000000b.t"}


def test_summary_takes_each_axis_from_the_largest_dataset_that_has_it(tmp_path):
    """Leave-network-out from the dataset with most records, leave-kind-out from the largest
    with that axis, each linked to its own dataset's section."""
    from benchmarks.summary import _link, networks_rows

    def result(name, records, kinds):
        row = {"axis": "network", "held": "bert", "model": "gcn", "kendall_tau": 0.5, "top1_score": None,
               "top5_score": None}
        summary = [{"model": "gcn", "mean_tau": 0.3, "worst_tau": 0.1, "kinds": 2}] if kinds else []
        return {"dataset": f"datasets/{name}", "rows": [row], "ceilings": {}, "kind_summary": summary,
                "protocol": {"valid_records": records}}

    for name, records, kinds in (("networks_big", 200, False), ("networks_small", 100, True)):
        (tmp_path / f"{name}.json").write_text(json.dumps(result(name, records, kinds)))
    (network, _, net_topic), (kind, _, kind_topic) = networks_rows(str(tmp_path))
    assert "`networks_big`" in network and "`networks_small`" in kind
    headings = [f"## Cross-network and cross-operator generalisation (MetaSchedule networks dataset `{n}`)"
                for n in ("networks_big", "networks_small")]
    assert _link("d", kind_topic, headings).endswith("networks_small)")
    assert _link("d", net_topic, headings).endswith("networks_big)")
