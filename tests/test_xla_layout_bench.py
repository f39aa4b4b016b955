"""benchmarks.xla_layout end to end on a tiny hand-made layout collection: the collector's
files (plan, measurements with a re-measuring pass, npz per search and split), two model
families held out in turn, every model trained one epoch, the results checked against
numbers worked out by hand."""
import json
import os

import numpy as np
import pytest

from benchmarks.layout_rule import RULE_NAME
from extract.metaschedule.jsonl import JsonlLog
from extract.xla.npz_format import layout_arrays, write_arrays

# program → the collection's split folder (which the benchmark's folds do not use); a program's
# family is its name's first part: four families, so folds alphabetically alpha, beta, delta, gamma
PROGRAMS = {"alpha.infer": "train", "beta.train": "train", "gamma.infer": "valid", "delta.infer": "test"}
HELD = ["delta", "gamma"]   # held out in turn: validated on gamma and alpha
CONFIGS = 8          # per search, XLA's own ("") first
NODES, CONFIG_NODES = 24, 3
# delta.infer's random search, by hand: XLA's default 12 ms, the best config 10 ms → 20% slower
DELTA_RANDOM_MS = [12.0, 10.0, 15.0, 11.0, 18.0, 13.0, 20.0, 16.0]


def _graph(rng):
    return {"node_feat": rng.normal(size=(NODES, 140)).astype(np.float32),
            "node_opcode": rng.integers(0, 100, size=NODES).astype(np.int32),
            "edge_index": np.array([[i + 1, i] for i in range(NODES - 1)], dtype=np.int64)}


def _search_configs(rng, search):
    """Config keys of a search (XLA's own first, as the collector samples them) and their features."""
    keys = [""] + [f"{search}-{i}" for i in range(1, CONFIGS)]
    feats = rng.integers(-1, 4, size=(CONFIGS, CONFIG_NODES, 18)).astype(np.float32)
    return keys, feats


def _runtimes_ms(rng, program, search, feats, xla_default_ms):
    """XLA's own config is one config of both searches: measured once, one runtime."""
    if program == "delta.infer" and search == "random":
        out = np.array(DELTA_RANDOM_MS)
    else:
        out = 5.0 + feats[:, :, :4].sum(axis=(1, 2)) * 0.3 + rng.uniform(0, 0.2, size=len(feats))
    if xla_default_ms is not None:
        out[0] = xla_default_ms
    return out


def write_program(root, rng, program, split):
    """One program as the collector leaves it: plan.json, measurements jsonl (pass 1 of every
    config, pass 2 of some, a `started` marker), one npz per search."""
    graph, first = _graph(rng), {}
    plan = {"program": program, "family": program.split(".")[0], "split": split, "nodes": ["n0", "n1", "n2"],
            "below_noise": False, "configs": {}}
    for search in ("random", "default"):
        keys, feats = _search_configs(rng, search)
        runtime_ms = _runtimes_ms(rng, program, search, feats, first.get(""))
        plan["configs"][search] = keys
        first.update(zip(keys, runtime_ms))
        folder = root / "npz" / "layout" / "xla" / search / split
        folder.mkdir(parents=True, exist_ok=True)
        write_arrays(folder / f"{program}.npz", layout_arrays(graph, np.array([3, 9, 15], np.int64), feats,
                                                              np.round(runtime_ms * 1e6).astype(np.int64)))
    (root / "measurements").mkdir(exist_ok=True)
    (root / "measurements" / f"{program}.plan.json").write_text(json.dumps(plan))
    with JsonlLog(str(root / "measurements" / f"{program}.jsonl")) as log:
        log.append({"config": "random-1", "pass": 1, "started": 0.0})
        for key, ms in first.items():
            log.append({"config": key, "pass": 1, "time": 0.0, "runtime_s": ms / 1e3})
        for key in ["", "random-1", "random-2", "random-3", "default-1", "default-2", "default-3"]:
            log.append({"config": key, "pass": 2, "time": 0.0, "runtime_s": first[key] / 1e3 * 1.01})


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    root = tmp_path_factory.mktemp("xla_bench") / "root"
    root.mkdir()
    rng = np.random.default_rng(0)
    for program, split in PROGRAMS.items():
        write_program(root, rng, program, split)
    (root / "runs.jsonl").write_text(json.dumps({"machine": {"cpu": "Test CPU", "jax": "0.0"}}) + "\n")
    return root


# a graph model, the configuration-only one and xgb (each run is a subprocess of ~6 s)
BENCH_MODELS = ["gcn-early", "config-mlp", "xgb"]


def bench(root, out, *extra):
    from benchmarks import xla_layout
    return xla_layout.main(["--xla-root", str(root), "--xla-seeds", "0", "--xla-epochs", "1", "--xla-models",
                            *BENCH_MODELS, "--xla-families", *HELD, "--xla-holdout", "family", "--runs", str(out / "runs"),
                            "--results", str(out / "results"), "--parallel", "2", *extra])


@pytest.fixture(scope="module")
def results(collection, tmp_path_factory):
    out = tmp_path_factory.mktemp("xla_bench_out")
    assert bench(collection, out) == 0
    with open(out / "results" / "xla_layout.json", encoding="utf-8") as f:
        return out, json.load(f)


def test_every_held_out_program_model_and_search_is_scored(results):
    _, res = results
    assert {p: f["family"] for p, f in res["facts"]["random"]["programs"].items()} == \
        {p: p.split(".")[0] for p in PROGRAMS}
    assert res["protocol"]["folds"] == [
        {"test": "delta", "valid": "gamma", "programs": {"test": ["delta.infer"], "valid": ["gamma.infer"]}},
        {"test": "gamma", "valid": "alpha", "programs": {"test": ["gamma.infer"], "valid": ["alpha.infer"]}}]
    assert res["protocol"]["holdout"] == "family"
    seen = {(r["search"], r["program"], r["model"], r["family"]) for r in res["programs"]}
    assert seen == {(s, p, m, p.split(".")[0]) for s in ("random", "default") for p in ("gamma.infer", "delta.infer")
                    for m in BENCH_MODELS + [RULE_NAME]}
    for r in res["rows"]:   # each program scored by the fold that held its family out (the rule trains nothing)
        assert r["command"] is None if r["model"] == RULE_NAME else f"/xla_layout/folds/{r['family']} " in r["command"] + " "
    for r in res["programs"]:   # every model gave a τ and slowdowns on every held-out program
        assert all(r[k][0] is not None and r[k][2] == 1 for k in ("kendall_tau", "top1_slowdown", "top5_slowdown"))
        assert -1.0 <= r["kendall_tau"][0] <= 1.0 and r["top1_slowdown"][0] >= r["top5_slowdown"][0] >= 0.0


def test_ceiling_and_share_of_it_come_from_the_remeasured_pairs(results):
    _, res = results
    delta = res["facts"]["random"]["programs"]["delta.infer"]
    # "", random-1..3 measured twice, each 1% slower: their order is kept, τ = 1
    assert delta["ceiling_pairs"] == 4 and delta["ceiling_tau"] == pytest.approx(1.0)
    assert delta["noise_rel"] == pytest.approx(0.01)
    for r in res["programs"]:
        ceiling = res["facts"][r["search"]]["programs"][r["program"]]["ceiling_tau"]
        assert r["tau_of_ceiling"] == pytest.approx(r["kendall_tau"][0] / ceiling)


def test_xla_default_slowdown_and_goal_by_hand(results):
    _, res = results
    delta = res["facts"]["random"]["programs"]["delta.infer"]
    assert delta["default_ms"] == pytest.approx(12.0) and delta["best_ms"] == pytest.approx(10.0)
    assert delta["default_slowdown"] == pytest.approx(0.2) and delta["beats_default"] is True
    assert delta["configs"] == CONFIGS
    for row in (r for r in res["rows"] if r["program"] == "delta.infer" and r["search"] == "random"):
        # picking XLA's own config (top-1 slowdown 20%, from the npz's whole ns) does not beat it
        assert row["pick_beats_default"] == (row["top1_slowdown"] < 0.2 - 1e-6)
    goal = {(g["search"], g["model"]): g for g in res["goal"]}
    beatable = sum(bool(f["beats_default"]) for f in res["facts"]["random"]["programs"].values()
                   if f["family"] in HELD)
    for model in ("gcn-early", "xgb"):
        picked = [r["pick_beats_default"] and res["facts"]["random"]["programs"][r["program"]]["beats_default"]
                  for r in res["rows"] if (r["search"], r["model"]) == ("random", model)]
        assert goal[("random", model)]["beatable"] == beatable >= 1
        assert goal[("random", model)]["picked"] == sum(picked)


def test_report_section_and_csv(results):
    from benchmarks.xla_layout import load_results, report_section

    out, res = results
    lines = report_section(load_results(str(out / "results"))[0])
    text = "\n".join(lines)
    assert "## Measured XLA layout collection (`root`)" in text and "Test CPU" in text
    assert "| delta.infer | delta | 8 | 1.000 (4) | 20.0% |" in text
    assert text.index("delta.infer") < text.index("gamma.infer")   # by family
    assert "| **mean** |  | 2 | 1.000 |" in text
    cells = []
    for search in ("random", "default"):
        rows = [r for r in res["rows"] if (r["search"], r["model"]) == (search, "xgb")]
        beatable = [bool(res["facts"][search]["programs"][r["program"]]["beats_default"]) for r in rows]
        picked = sum(b and bool(r["pick_beats_default"]) for b, r in zip(beatable, rows))
        cells.append(f"{picked} of {sum(beatable)}" if any(beatable) else "none beatable")
    assert f"| xgb | {cells[0]} | {cells[1]} |" in text
    csv_lines = (out / "results" / "xla_layout.csv").read_text().splitlines()
    # searches × held-out programs × (models, one seed, and the rule)
    assert len(csv_lines) == 1 + 2 * 2 * (len(BENCH_MODELS) + 1)
    assert f"{RULE_NAME}: τ (of ceiling)" in text and "learns nothing" in text
    assert "nan" not in text.lower() and "inf" not in text.lower().replace("infer", "")


def test_goal_text_counts_picks_per_seed_and_says_when_nothing_beats_the_default():
    from benchmarks.xla_layout import goal_text

    goal = [{"seed": 1, "picked": 3, "beatable": 4}, {"seed": 0, "picked": 2, "beatable": 4}]
    assert goal_text(goal) == "2, 3 of 4"
    assert goal_text([{"seed": 0, "picked": 0, "beatable": 0}]) == "none beatable"
    assert goal_text([]) == ""


def test_minor_dim_rule_by_hand(results, collection):
    from scipy.stats import kendalltau

    from benchmarks.xla_layout import summary_row
    from extract.xla.hlo_graph import NODE_FEATURE_INDEX
    _, res = results
    size = NODE_FEATURE_INDEX["shape_dimensions_product"]
    for search in ("random", "default"):
        with np.load(collection / "npz" / "layout" / "xla" / search / "test" / "delta.infer.npz") as f:
            feat, runtime = f["node_config_feat"], f["config_runtime"]
            elements = np.maximum(f["node_feat"][f["node_config_ids"], size], 0)
        # XLA's own config is row 0 (sampled first, compiled); a node counts when its minor dimension moved
        scores = [sum(e for e, m, m0 in zip(elements, row[:, 0], feat[0, :, 0]) if m != m0) for row in feat]
        row = next(r for r in res["rows"] if (r["search"], r["program"], r["model"]) == (search, "delta.infer", RULE_NAME))
        assert row["kendall_tau"] == pytest.approx(kendalltau(scores, runtime).statistic)
        # its first pick is XLA's own config (score 0, first among equals): never faster than it
        assert row["top1_slowdown"] == pytest.approx(runtime[0] / runtime.min() - 1) and not row["pick_beats_default"]
    assert f"{RULE_NAME} (no learning) τ" in " ".join(summary_row(res)[0])


def test_minor_dim_scores_count_elements_whose_minor_dimension_moved():
    from benchmarks.layout_rule import minor_dim_scores

    # two configurable nodes (100 and 10 elements); row 0 is XLA's own assignment
    pad = [-1] * 12
    feat = np.array([[[1, 0, -1, -1, -1, -1] + pad, [0, 1, 2, -1, -1, -1] + pad],    # XLA's
                     [[0, 1, -1, -1, -1, -1] + pad, [0, 1, 2, -1, -1, -1] + pad],    # node 0's minor moved
                     [[1, 0, -1, -1, -1, -1] + pad, [2, 1, 0, -1, -1, -1] + pad],    # node 1's minor moved
                     [[1, 0, -1, -1, -1, -1] + pad, [0, 2, 1, -1, -1, -1] + pad]],   # only outer order: 0
                    np.float32)
    assert minor_dim_scores(feat, np.array([100.0, 10.0]), 0).tolist() == [0.0, 100.0, 10.0, 0.0]
    assert minor_dim_scores(feat, np.array([100.0, 10.0]), 1).tolist() == [100.0, 0.0, 110.0, 100.0]


def test_results_of_a_collection_measured_again_say_they_are_out_of_date(results, collection, tmp_path):
    import copy
    import shutil

    from benchmarks.xla_layout import load_results, report_section, summary_row
    out, _ = results
    res = load_results(str(out / "results"))[0]
    assert "Out of date" not in "\n".join(report_section(res)) and "out of date" not in summary_row(res)[0][0]
    again = tmp_path / "again"
    shutil.copytree(collection, again)
    res = copy.deepcopy(res)
    res["root"] = str(again)
    assert "Out of date" not in "\n".join(report_section(res))      # a copy gives the same facts
    journal = again / "measurements" / "delta.infer.jsonl"
    journal.write_text(journal.read_text().replace('"runtime_s": 0.012', '"runtime_s": 0.013', 1))
    assert f"**Out of date:** `{again}` was measured again" in "\n".join(report_section(res))
    assert "out of date" in summary_row(res)[0][0]


def test_rerun_reuses_every_finished_run(results, collection, capsys):
    out, res = results
    runs = out / "runs" / "xla_layout"
    stamps = {p: os.path.getmtime(p / "metrics.json") for p in runs.iterdir() if p.name != "folds"}
    assert len(stamps) == len(HELD) * 2 * len(BENCH_MODELS)
    assert bench(collection, out) == 0
    assert {p: os.path.getmtime(p / "metrics.json") for p in runs.iterdir() if p.name != "folds"} == stamps
    with open(out / "results" / "xla_layout.json", encoding="utf-8") as f:
        assert json.load(f)["programs"] == res["programs"]


def test_a_collection_measured_again_trains_every_run_again(collection, tmp_path):
    import shutil

    from benchmarks import xla_layout
    again = tmp_path / "again"
    shutil.copytree(collection, again)
    runs = tmp_path / "runs" / "xla_layout"
    argv = ["--xla-root", str(again), "--xla-seeds", "0", "--xla-epochs", "1", "--xla-models", "xgb",
            "--xla-families", "delta", "--xla-holdout", "family", "--runs", str(tmp_path / "runs"),
            "--results", str(tmp_path / "results")]

    def stamps():
        return {p.name: os.path.getmtime(p / "metrics.json") for p in runs.iterdir() if p.name != "folds"}
    assert xla_layout.main(argv) == 0
    first = stamps()
    assert len(first) == 2 and xla_layout.main(argv) == 0 and stamps() == first     # reused
    npz = again / "npz" / "layout" / "xla" / "random" / "train" / "alpha.infer.npz"  # a training program
    arrays = dict(np.load(npz))
    arrays["config_runtime"] = arrays["config_runtime"][::-1].copy()
    np.savez(npz, **arrays)
    assert xla_layout.main(argv) == 0
    assert all(stamps()[name] != stamp for name, stamp in first.items())           # both searches trained again
    shutil.rmtree(runs)
    assert xla_layout.main(argv) == 0 and not any(p.name != "folds" for p in runs.iterdir())  # kept: reused
    elsewhere = tmp_path / "elsewhere"      # a fresh clone's runs folder: the kept runs still serve
    argv[argv.index("--runs") + 1] = str(elsewhere)
    assert xla_layout.main(argv) == 0
    assert [p.name for p in (elsewhere / "xla_layout").iterdir()] == ["folds"]


def test_bad_or_unfinished_root_is_one_line_naming_it(tmp_path, collection):
    with pytest.raises(SystemExit, match="not a measured layout collection"):
        bench(tmp_path / "nothing", tmp_path)
    import shutil
    partial = tmp_path / "partial"
    shutil.copytree(collection, partial)
    shutil.rmtree(partial / "npz" / "layout" / "xla" / "default")
    with pytest.raises(SystemExit, match="xla/default: no measured program"):
        bench(partial, tmp_path)


def test_folds_need_three_families_and_known_ones(tmp_path, collection):
    from benchmarks.xla_layout import collection_facts, folds

    facts = collection_facts(collection)
    assert [f["test"] for f in folds(facts)] == ["alpha", "beta", "delta", "gamma"]
    assert folds(facts)[-1] == {"test": "gamma", "valid": "alpha",
                                "programs": {"test": ["gamma.infer"], "valid": ["alpha.infer"]}}
    with pytest.raises(SystemExit, match="--xla-families: omega not in the collection"):
        folds(facts, ["delta", "omega"])
    two = {s: {"programs": {p: f for p, f in v["programs"].items() if f["family"] in ("alpha", "beta")}}
           for s, v in facts.items()}
    with pytest.raises(SystemExit, match="programs of 2 model families; leaving one out needs at least 3"):
        folds(two)
    import shutil
    unnamed = tmp_path / "unnamed"
    shutil.copytree(collection, unnamed)
    plan = unnamed / "measurements" / "beta.train.plan.json"
    plan.write_text(json.dumps({k: v for k, v in json.loads(plan.read_text()).items() if k != "family"}))
    with pytest.raises(SystemExit, match="beta.train.plan.json: no model family"):
        bench(unnamed, tmp_path)


def _fold(test, valid):
    return {"test": test, "valid": valid, "programs": {"test": [f"{test}.infer"],
                                                       "valid": [f"{valid}.{'train' if valid == 'beta' else 'infer'}"]}}


def test_fold_root_links_by_family_and_is_rebuilt_when_stale(tmp_path, collection):
    from benchmarks.xla_layout import collection_facts, fold_root

    facts = collection_facts(collection)
    root = fold_root(str(tmp_path), collection, facts, _fold("delta", "alpha"))
    assert root == tmp_path / "xla_layout" / "folds" / "delta"
    for search in ("random", "default"):
        layout = {p.parent.name: sorted(q.name for q in p.parent.glob("*.npz"))
                  for p in (root / "npz" / "layout" / "xla" / search).glob("*/*.npz")}
        assert layout == {"test": ["delta.infer.npz"], "valid": ["alpha.infer.npz"],
                          "train": ["beta.train.npz", "gamma.infer.npz"]}
    link = root / "npz" / "layout" / "xla" / "random" / "test" / "delta.infer.npz"
    assert link.resolve() == (collection / "npz/layout/xla/random/test/delta.infer.npz").resolve()
    stamp = link.lstat().st_mtime_ns
    assert fold_root(str(tmp_path), collection, facts, _fold("delta", "alpha")) == root
    assert link.lstat().st_mtime_ns == stamp   # unchanged: kept
    again = fold_root(str(tmp_path), collection, facts, _fold("delta", "beta"))
    assert sorted(p.name for p in (again / "npz/layout/xla/random/valid").glob("*.npz")) == ["beta.train.npz"]
    assert not (again / "npz/layout/xla/random/valid/alpha.infer.npz").exists()
    assert [p.name for p in again.parent.iterdir()] == ["delta"]   # no half-built root left beside it


def test_every_model_spec_is_a_valid_training_command():
    from benchmarks.xla_layout import MODEL_SPECS
    from simulator.models.costmodel import model_names
    from simulator.train import build_parser

    for name, spec in MODEL_SPECS.items():
        flags = build_parser().parse_args(["--data", "tpugraphs:layout:xla:random", *spec])
        assert flags.model in model_names(), name


def test_picking_xlas_own_config_does_not_beat_it():
    from benchmarks.xla_layout import pick_beats_default

    assert pick_beats_default(0.1999999999999994, 0.19999999999999996) is False   # the same config, two roundings
    assert pick_beats_default(0.15, 0.2) is True and pick_beats_default(0.3, 0.2) is False
    assert pick_beats_default(None, 0.2) is None


def test_program_folds_keep_a_familys_programs_apart_and_score_each_once():
    from benchmarks.xla_layout import program_folds

    family = {f"{f}.{step}": f for f in ("bert", "dlrm", "lstm", "mlp", "vit") for step in ("infer", "train")}
    family["wavenet.infer"] = "wavenet"
    facts = {s: {"programs": {p: {"family": f} for p, f in family.items()}} for s in ("random", "default")}
    chosen = program_folds(facts)
    assert [f["test"] for f in chosen] == [f"programs{i}of6" for i in range(1, 7)]
    held = [p for f in chosen for p in f["programs"]["test"]]
    assert sorted(held) == sorted(family)                                        # each scored once
    for f in chosen:
        assert len({family[p] for p in f["programs"]["test"]}) == len(f["programs"]["test"])   # no siblings
        siblings = {q for p in f["programs"]["test"] for q in family if family[q] == family[p]} - {*f["programs"]["test"]}
        assert siblings and not siblings & set(f["programs"]["valid"])          # they train
        assert not set(f["programs"]["test"]) & set(f["programs"]["valid"])
    assert chosen[0]["valid"] == "programs4of6" and chosen[4]["valid"] == "programs2of6"  # half-way round
    assert [f["test"] for f in program_folds(facts, 20)][-1] == "programs11of11"  # no more folds than programs
    with pytest.raises(SystemExit, match="has 2 programs; leaving programs out needs at least 3"):
        program_folds({s: {"programs": {"a.x": {"family": "a"}, "b.x": {"family": "b"}}} for s in facts})


def test_programs_held_out_are_scored_each_by_the_fold_that_held_it_out(collection, tmp_path):
    from benchmarks import xla_layout

    assert xla_layout.main(["--xla-root", str(collection), "--xla-seeds", "0", "--xla-epochs", "1",
                            "--xla-models", "xgb", "--xla-holdout", "programs", "--runs", str(tmp_path / "runs"),
                            "--results", str(tmp_path / "results"), "--parallel", "2"]) == 0
    [res] = xla_layout.load_results(str(tmp_path / "results"))
    assert res["protocol"]["holdout"] == "programs" and len(res["protocol"]["folds"]) == len(PROGRAMS)
    assert not (tmp_path / "results" / "xla_layout.json").exists()               # the family results stay
    for r in res["rows"]:
        if r["model"] == "xgb":
            fold = next(f for f in res["protocol"]["folds"] if r["program"] in f["programs"]["test"])
            assert f"/xla_layout/folds/{fold['test']} " in r["command"] + " "
    assert {(r["search"], r["program"]) for r in res["programs"] if r["model"] == "xgb"} == {
        (s, p) for s in ("random", "default") for p in PROGRAMS}
    text = "\n".join(xla_layout.report_section(res))
    assert "## Measured XLA layout collection, programs held out (`root`)" in text and "--xla-holdout programs" in text
    row = xla_layout.summary_row(res)[0]
    assert row[0].startswith("ranking layouts of XLA programs never trained on, the other steps") and \
        row[2] == "xla_layout_programs"


def _all_stages(tmp_path, runs, results, *extra):
    from benchmarks import all as bench_all
    return bench_all.main(["--results", str(results), "--runs", str(runs), "--tuning-runs", str(tmp_path / "t"),
                           "--spaces", str(tmp_path / "s"), "--report", str(tmp_path / "RESULTS.md"), *extra])


def test_all_skips_the_stage_without_a_collection(tmp_path, monkeypatch, capsys):
    from benchmarks import xla_layout
    monkeypatch.setattr(xla_layout, "shipped_root", lambda: None)
    assert _all_stages(tmp_path, tmp_path / "runs", tmp_path / "r", "--stages", "xla-layout") == 0
    assert "xla-layout: skipped (no --xla-root" in capsys.readouterr().err
    assert not (tmp_path / "r" / "xla_layout.json").exists()


def test_all_runs_the_stage_and_reports_it(tmp_path, results, collection):
    out, res = results   # the same runs: reused, so the stage only scores them
    assert _all_stages(tmp_path, out / "runs", tmp_path / "r", "--stages", "xla-layout", "report",
                       "--xla-root", str(collection), "--xla-seeds", "0", "--xla-epochs", "1",
                       "--xla-models", *BENCH_MODELS, "--xla-families", *HELD, "--xla-holdout", "family") == 0
    with open(tmp_path / "r" / "xla_layout.json", encoding="utf-8") as f:
        assert json.load(f)["programs"] == res["programs"]
    report = (tmp_path / "RESULTS.md").read_text()
    assert "## Measured XLA layout collection (`root`)" in report and "| delta.infer | delta |" in report
    summary = next(line for line in report.splitlines() if line.startswith("| ranking layouts of XLA programs"))
    assert "`random`: " in summary and "`default`: " in summary and "(ceiling 1.000; " in summary
    from benchmarks.xla_layout import overall_means
    facts = res["facts"]["random"]["programs"]
    means = [r for r in res["programs"] if r["search"] == "random"]
    best = max(BENCH_MODELS, key=lambda m: overall_means(means, m, facts)["kendall_tau"][0])
    mean = overall_means(means, best, facts)   # both ceilings are 1: the share is the mean τ itself
    assert mean["tau_of_ceiling"] == pytest.approx(mean["kendall_tau"][0])
    assert f"`random`: {best} τ {mean['kendall_tau'][0]:.3f} (ceiling 1.000; " \
           f"{100 * mean['tau_of_ceiling']:.0f}% of it)" in summary
    assert summary.endswith("[details](#measured-xla-layout-collection-root) |")


def test_a_training_run_that_fails_is_one_error_naming_its_folder(collection, tmp_path, monkeypatch, capsys):
    from benchmarks import xla_layout
    monkeypatch.setitem(xla_layout.MODEL_SPECS, "broken", ["--model", "no-such-model"])
    code = xla_layout.main(["--xla-root", str(collection), "--xla-seeds", "0", "--xla-epochs", "1",
                            "--xla-models", "broken", "--xla-families", "delta", "--runs", str(tmp_path / "runs"),
                            "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"error: training in {tmp_path / 'runs' / 'xla_layout' / 'delta-random-broken-seed0'} failed" in err
    assert "unknown model 'no-such-model'" in err
