"""benchmarks.metaschedule.tuning's pure parts: best-so-far at trial points, rank metrics, the held-out check."""
import pytest


def test_best_at_reads_the_best_so_far_and_none_when_not_reached():
    from benchmarks.metaschedule.tuning import best_at

    history = [{"trial": i + 1, "best_s": b} for i, b in enumerate([None, 3.0, 2.0, 2.0, 1.0])]
    assert best_at(history, [1, 2, 4, 5, 6]) == {"1": None, "2": 3.0, "4": 2.0, "5": 1.0, "6": None}


def test_rank_metrics():
    from benchmarks.metaschedule.tuning import kendall_tau, topk_recall

    runtime = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert kendall_tau([6, 5, 4, 3, 2, 1], runtime) == pytest.approx(1.0)   # higher score = faster
    assert kendall_tau([1, 2, 3, 4, 5, 6], runtime) == pytest.approx(-1.0)
    assert kendall_tau([1, 1, 1, 1, 1, 1], runtime) is None                 # undefined, never NaN
    assert topk_recall([6, 5, 0, 0, 0, 9], runtime, 2) == pytest.approx(0.5)
    assert topk_recall([1, 2], [1.0, 2.0], 2) is None                        # too few records


def test_an_operator_in_the_pretraining_data_is_refused():
    from benchmarks.metaschedule.tuning import held_out
    from extract.metaschedule.runner import host_target
    from extract.tir.workload_key import workload_key
    from extract.tir.workloads import parse_workload

    target = host_target(1)
    key = workload_key(parse_workload("dense_16x16x32").prim_func(), target)
    assert held_out(["dense_16x16x32"], {"other"}, target) == {"dense_16x16x32": key}
    with pytest.raises(SystemExit, match="not held out: dense_16x16x32"):
        held_out(["dense_16x16x32"], {key}, target)


def test_gnn_pretraining_uses_the_ranking_recipe_and_names_its_folder_by_it(tmp_path):
    import argparse

    from benchmarks.metaschedule.tuning import add_arguments, pretrain_argv
    from simulator.train import build_parser, config_from_flags

    ap = argparse.ArgumentParser()
    add_arguments(ap)
    args = ap.parse_args([])
    assert (args.ms_pretrain_loss, args.ms_epochs) == ("pairwise-hinge", 30)
    argv = pretrain_argv(["db1"], str(tmp_path), args.ms_epochs, args.ms_pretrain_loss)
    config = config_from_flags(vars(build_parser().parse_args(argv)))
    assert (config.fit.loss, config.fit.epochs, config.data.split, config.model.model, config.seed) == \
        ("pairwise-hinge", 30, "random", "gcn", 0)
    # another recipe gets another folder: a run made with the old one is not reused for it
    other = pretrain_argv(["db1"], str(tmp_path), 20, "huber")
    assert other[other.index("--out") + 1] != argv[argv.index("--out") + 1]
    with pytest.raises(SystemExit):
        ap.parse_args(["--ms-pretrain-loss", "nope"])


def test_gnn_filter_is_the_pretrained_gnn_with_two_stage_scoring(tmp_path, monkeypatch):
    import argparse
    import types

    import simulator.metaschedule.cost_model as ms_costmodel
    from benchmarks.metaschedule import tuning as ms_tuning
    from simulator.metaschedule import tune

    ap = argparse.ArgumentParser()
    ms_tuning.add_arguments(ap)
    args = ap.parse_args(["--ms-cost-models", "gnn", "gnn-filter", "--ms-filter-keep", "0.5"])
    assert (args.ms_cost_models, args.ms_filter_keep) == (["gnn", "gnn-filter"], 0.5)
    for bad in (["--ms-cost-models", "gnn-filterx"], ["--ms-filter-keep", "0"], ["--ms-filter-keep", "1.5"]):
        with pytest.raises(SystemExit):
            ap.parse_args(bad)

    made = []
    monkeypatch.setattr(ms_costmodel, "make_cost_model", lambda name, checkpoint=None, **kw: made.append(
        (name, checkpoint, kw)) or "model")
    monkeypatch.setattr(tune, "_task", lambda *a: "task")
    monkeypatch.setattr(tune, "tune", lambda *a, **kw: types.SimpleNamespace(to_dict=lambda: {"history": []}))
    pre = {"gnn": "GNN_RUN", "tvm-xgb-pretrained": "XGB_TAR"}
    for name in ("gnn-filter", "gnn"):
        ms_tuning.tune_one("dense_16x16x32", name, 3, str(tmp_path / name), 64, 64, pre, None, None, None,
                           "llvm", filter_keep=0.5)
    assert made == [("gnn", "GNN_RUN", {"seed": 3, "filter_keep": 0.5}), ("gnn", "GNN_RUN", {"seed": 3})]


def test_snapshot_reads_gzipped_databases_and_spreads_records(tmp_path):
    import gzip

    from benchmarks.metaschedule.tuning import snapshot

    db = tmp_path / "shipped" / "random"
    db.mkdir(parents=True)
    with gzip.open(db / "database_workload.json.gz", "wt") as f:
        f.write('["w0"]\n["w1"]\n')
    with gzip.open(db / "database_tuning_record.json.gz", "wt") as f:
        f.write("".join(f"[{i}]\n" for i in range(10)) + "[10")   # a last line still being written
    (copy,) = snapshot([str(tmp_path / "shipped")], str(tmp_path / "snap"), 4)
    assert (tmp_path / "snap" / "0-random" / "database_workload.json").read_text() == '["w0"]\n["w1"]\n'
    assert (tmp_path / "snap" / "0-random" / "database_tuning_record.json").read_text() == "[0]\n[3]\n[6]\n[9]\n"
    with pytest.raises(SystemExit, match="no MetaSchedule database"):
        snapshot([str(tmp_path / "snap-missing")], str(tmp_path / "snap2"), 4)
    (whole,) = snapshot([str(tmp_path / "shipped")], str(tmp_path / "snap3"))
    assert (tmp_path / "snap3" / "0-random" / "database_tuning_record.json").read_text() == "".join(
        f"[{i}]\n" for i in range(10))


def test_topk_slowdown_is_the_best_pick_against_the_best_record():
    from benchmarks.metaschedule.tuning import topk_slowdown

    runtime = [1.0, 2.0, 4.0, 8.0]
    assert topk_slowdown([0, 9, 8, 7], runtime, 2) == pytest.approx(1.0)    # picks 2.0 and 4.0
    assert topk_slowdown([0, 9, 8, 7], runtime, 4) == pytest.approx(0.0)
    assert topk_slowdown([9, 0, 0, 0], runtime, 1) == pytest.approx(0.0)
    assert topk_slowdown([1, 2], [1.0, 2.0], 3) is None


def test_goal_lines_check_both_goals_against_each_xgb():
    from benchmarks.metaschedule.tuning import goal_lines

    def row(model, trials, us):
        return {"workload": "op", "cost_model": model, "trials": trials, "mean_s": us * 1e-6}

    rows = [row("gnn", 64, 90), row("gnn", 128, 80), row("gnn", 256, 80),
            row("tvm-xgb", 64, 100), row("tvm-xgb", 128, 90), row("tvm-xgb", 256, 85),
            row("tvm-xgb-pretrained", 64, 95), row("tvm-xgb-pretrained", 128, 75), row("tvm-xgb-pretrained", 256, 70)]
    xgb, pre = goal_lines(rows)
    assert "against tvm-xgb:" in xgb and xgb.count("**met**") == 2 and "10.0% faster" in xgb
    assert "against tvm-xgb-pretrained:" in pre and pre.count("**not met**") == 2 and "5.3% faster" in pre
    slower = goal_lines([row("gnn", 64, 110), row("gnn", 128, 90), row("tvm-xgb", 64, 100), row("tvm-xgb", 128, 95)])
    assert "10.0% slower" in slower[0]
    assert goal_lines([row("gnn", 64, 90)]) == []


def test_the_report_names_the_cpu_the_kernels_were_timed_on(tmp_path):
    import json

    from benchmarks.metaschedule.tuning import RESULT, report_section

    res = {"held_out": ["dense_8x8x8"], "command": "python -m benchmarks.metaschedule.tuning", "figure": "f.png",
           "pretrain": {"records": 10, "databases": ["a"], "sources": ["s"]}, "seeds_run": [0], "cut": [],
           "rank": {}, "top_k": 8,
           "summary": [{"workload": "dense_8x8x8", "cost_model": "gnn", "trials": 64, "seeds": 1, "mean_s": 1e-4,
                        "min_s": 1e-4, "max_s": 1e-4, "cost_model_share": 0.1}]}
    (tmp_path / RESULT).write_text(json.dumps(res))
    assert "Measured on" not in "\n".join(report_section(str(tmp_path)))   # a result from before it was recorded
    res["machine"] = {"cpu_model": "Intel(R) Xeon(R) Processor", "llvm_cpu": "emeraldrapids"}
    (tmp_path / RESULT).write_text(json.dumps(res))
    assert "Measured on Intel(R) Xeon(R) Processor (LLVM: `emeraldrapids`)." in "\n".join(report_section(str(tmp_path)))
    # the seeds are the search's: the report says that every one tunes from the one pre-trained gnn
    assert "one checkpoint, pre-trained at seed 0: the seeds vary the search" in "\n".join(report_section(str(tmp_path)))
    # a gnn run tuned under other gnn defaults is named as such
    from simulator.metaschedule.cost_model import gnn_defaults
    res["runs"] = [{"cost_model": "gnn", "gnn_defaults": gnn_defaults()}, {"cost_model": "random"}]
    (tmp_path / RESULT).write_text(json.dumps(res))
    assert "Not today's gnn" not in "\n".join(report_section(str(tmp_path)))
    res["runs"][0]["gnn_defaults"] = {**gnn_defaults(), "loss": "listmle"}
    (tmp_path / RESULT).write_text(json.dumps(res))
    assert "**Not today's gnn:** 1 gnn runs of this table were tuned under other gnn defaults than today's (loss " \
        in "\n".join(report_section(str(tmp_path)))


def test_each_pretraining_has_its_own_folder_and_takes_every_record_by_default(tmp_path):
    import argparse
    import json

    from benchmarks.metaschedule.tuning import add_arguments, pretraining_folder

    ap = argparse.ArgumentParser()
    add_arguments(ap, prefix="")
    assert ap.parse_args([]).pretrain_records is None   # every record of the pre-training databases
    first = pretraining_folder(str(tmp_path), ["datasets/networks_znver4/pass1"], None, 30, "pairwise-hinge")
    assert pretraining_folder(str(tmp_path), ["datasets/networks_znver4/pass1"], None, 30, "pairwise-hinge") == first
    others = {pretraining_folder(str(tmp_path), ["datasets/networks_znver4/pass1"], 4000, 30, "pairwise-hinge"),
              pretraining_folder(str(tmp_path), ["datasets/networks_znver4/pass1"], None, 40, "pairwise-hinge"),
              pretraining_folder(str(tmp_path), ["datasets/networks_rocketlake/pass1"], None, 30, "pairwise-hinge")}
    assert first not in others and len(others) == 3
    with open(f"{first}/pretraining.json") as f:
        assert json.load(f)["records_per_database"] is None


def test_a_finished_gnn_run_is_reused_only_while_the_gnn_defaults_are_today_s(tmp_path, monkeypatch, capsys):
    import types

    import simulator.metaschedule.cost_model as ms_costmodel
    from benchmarks.metaschedule import tuning as ms_tuning
    from simulator.metaschedule import tune

    made = []
    monkeypatch.setattr(ms_costmodel, "make_cost_model", lambda name, checkpoint=None, **kw: made.append(name) or "m")
    monkeypatch.setattr(tune, "_task", lambda *a: "task")
    monkeypatch.setattr(tune, "tune", lambda *a, **kw: types.SimpleNamespace(to_dict=lambda: {"history": []}))
    pre = {"gnn": "GNN_RUN"}

    def tune_each():
        return [ms_tuning.tune_one("dense_16x16x32", name, 0, str(tmp_path / name), 64, 64, pre, None, None, None,
                                   "llvm") for name in ("gnn", "gnn-filter", "random")]

    first = tune_each()
    assert first[0]["gnn_defaults"] == ms_costmodel.gnn_defaults() and "gnn_defaults" not in first[2]
    tune_each()
    assert made == ["gnn", "gnn", "random"]                   # all three reused
    monkeypatch.setattr(ms_costmodel, "FILTER_KEEP", 0.125)   # another gnn from now on
    tune_each()
    assert made == ["gnn", "gnn", "random", "gnn", "gnn"]     # both gnn runs tuned again, random reused
    assert "dense_16x16x32 gnn-filter seed 0: tuned again, its run was another gnn's (filter_keep 0.25 there, " \
           "0.125 here)" in capsys.readouterr().err
