"""The offline replay of the gnn's online phase (`benchmarks.metaschedule.replay`): real records of a
committed miniature database replayed to schedules, the real GNNCostModel (the shipped
checkpoint) ranking them and updating on what each round "measured"."""
import os

import numpy as np
import pytest

from conftest import MS_SMALL, ROOT

POOL_KEY = "pool.pad-max.1x64x112x112_1x64x56x56.float32.063e66f3.llvm-rocketlake-1c"
OTHER_KEY = "conv2d.copy-mac-add.1x384x14x14_96x384x1x1_1x96x1x1_1x96x14x14.float32.4c11f9ab.llvm-rocketlake-1c"
CHECKPOINT = os.path.join(ROOT, "datasets", "networks_rocketlake", "pretrained", "gcn.pt")


@pytest.fixture(scope="module")
def pool():
    from benchmarks.metaschedule.replay import load_pools

    row = {"key": POOL_KEY, "kind": "pool", "networks": {"resnet50": 1}, "valid": 24}
    (only,) = load_pools([os.path.join(MS_SMALL, "random"), os.path.join(MS_SMALL, "evolutionary")], [row])
    return only


@pytest.fixture(scope="module")
def graphs():
    """One graph cache for the module's cost models: the pool is featurized once."""
    from extract.tir.featurize import GraphCache

    return GraphCache()


def test_pool_holds_the_tasks_records_with_their_runtimes(pool):
    assert len(pool.candidates) == len(pool.run_secs) >= 20
    assert np.all(pool.runtimes > 0) and len(set(pool.runtimes.round(12))) > 10


@pytest.mark.parametrize("name", ["none", "default"])
def test_replay_updates_only_when_the_recipe_says(pool, graphs, name):
    from benchmarks.metaschedule.replay import VARIANTS, cost_model, replay

    model = cost_model(CHECKPOINT, VARIANTS[name], 0, graphs)
    before = [p.detach().clone() for p in model.model.net.parameters()]
    out = replay(pool, model, VARIANTS[name], rounds=3, k=4, seed=0)
    assert _same(before, model.model.net.parameters())          # the model as loaded: every task starts from it
    assert len(model.task_models) == (name == "default")          # the task's own copy is what the updates train
    if model.task_models:
        assert not _same(before, next(iter(model.task_models.values())).net.parameters())
    assert model.stats.measured == 12 and model.stats.repeated == 0       # 3 rounds of 4, none given twice
    best = out["best_over_pool"]
    assert len(best) == 3 and all(b >= 1.0 for b in best) and best == sorted(best, reverse=True)
    assert all(t is None or -1 <= t <= 1 for t in out["tau_unmeasured"])


def test_without_updates_the_rounds_walk_down_the_first_ranking(pool, graphs):
    """No update: round r measures the r-th block of the first round's ranking."""
    from benchmarks.metaschedule.replay import VARIANTS, cost_model, replay

    model = cost_model(CHECKPOINT, VARIANTS["none"], 0, graphs)
    first = np.asarray(model.predict(pool.context, pool.candidates))
    expected = pool.runtimes[np.argsort(-first, kind="stable")[:8]].min() / pool.runtimes.min()
    out = replay(pool, model, VARIANTS["none"], rounds=2, k=4, seed=0)
    assert out["best_over_pool"][-1] == pytest.approx(expected)


def test_head_only_trains_only_the_head(pool, graphs):
    from benchmarks.metaschedule.replay import VARIANTS, cost_model, replay

    model = cost_model(CHECKPOINT, VARIANTS["head-only"], 0, graphs)
    before = {n: p.detach().clone() for n, p in model.model.net.named_parameters()}
    replay(pool, model, VARIANTS["head-only"], rounds=2, k=4, seed=0)
    (trained,) = model.task_models.values()
    moved = {n for n, p in trained.net.named_parameters() if not np.array_equal(before[n].numpy(), p.detach().numpy())}
    assert moved and all(n.startswith("head.") for n in moved)


def _same(before, parameters) -> bool:
    return all(np.array_equal(a.numpy(), b.detach().numpy()) for a, b in zip(before, parameters))


def test_each_task_fine_tunes_its_own_copy_and_an_unmeasured_task_keeps_the_loaded_model(pool, graphs):
    """An update moves the ranking of its own task only: one model fine-tuned by every task in
    turn ranked the next tasks worse (docs/ms_tune.md, *One model per task*)."""
    from tvm.s_tir.meta_schedule.runner import RunnerResult

    from benchmarks.metaschedule.replay import VARIANTS, cost_model, load_pools

    row = {"key": OTHER_KEY, "kind": "conv2d", "networks": {"mobilenet_v2": 1}, "valid": 24}
    (other,) = load_pools([os.path.join(MS_SMALL, "random"), os.path.join(MS_SMALL, "evolutionary")], [row])
    model = cost_model(CHECKPOINT, VARIANTS["default"], 0, graphs)
    other_before = model.predict(other.context, other.candidates)
    mine_before = model.predict(pool.context, pool.candidates)
    model.update(pool.context, pool.candidates[:8], [RunnerResult(run_secs=s, error_msg=None) for s in pool.run_secs[:8]])
    assert len(model.task_models) == 1
    np.testing.assert_array_equal(model.predict(other.context, other.candidates), other_before)
    assert not np.allclose(model.predict(pool.context, pool.candidates), mine_before)


def test_run_all_keeps_each_result_says_what_is_left_and_resumes(pool, graphs, tmp_path, capsys):
    import argparse

    from benchmarks.metaschedule import replay

    args = argparse.Namespace(runs=str(tmp_path), variants=["none", "random"], seeds=[0], rounds=1, round_size=4)
    ckpts = {pool.network: CHECKPOINT}
    kept = {"variant": "none", "recipe": replay.recipe("none"), "best_over_pool": [1.0]}   # an earlier run's
    replay.write_json(replay.result_path(args.runs, "none", 0, pool.key), kept)
    stale = {"variant": "random", "recipe": {"variant": {}, "gnn_defaults": {"candidate_context": None}}}
    replay.write_json(replay.result_path(args.runs, "random", 0, pool.key), stale)    # another recipe's
    rows = replay.run_all(args, [pool], ckpts)
    assert [r["variant"] for r in rows] == ["random"]
    assert "[1/1, about 0 min left]" in capsys.readouterr().err
    assert replay.kept(args, pool.key)[0] == kept and replay.kept(args, pool.key)[1]["recipe"] == replay.recipe("random")
    assert replay.run_all(args, [pool], ckpts) == []


def test_the_default_variant_is_the_cost_model_s_own_recipe():
    from benchmarks.metaschedule.replay import VARIANTS, cost_model
    from simulator.metaschedule.cost_model import UPDATE_STEPS, GNNCostModel

    default = cost_model(CHECKPOINT, VARIANTS["default"], 0, None)
    product = GNNCostModel(default.model)
    assert (default.update_steps, default.loss, default.lr) == (product.update_steps, product.loss, product.lr)
    assert default.update_steps == UPDATE_STEPS and default.loss is None    # the checkpoint's own loss
    older = cost_model(CHECKPOINT, VARIANTS["listmle-8"], 0, None)
    assert (older.update_steps, older.loss) == (8, "listmle")



def test_a_pre_training_of_other_data_or_another_left_out_network_is_refused(tmp_path):
    import argparse

    from benchmarks.common import write_json
    from benchmarks.metaschedule.replay import check_pretrained, checkpoints, describe_pretraining, pretrained_dir
    from simulator.registry import SimulatorError

    data = str(tmp_path / "networks_cpu")
    args = argparse.Namespace(data=data, runs=str(tmp_path / "runs"), pretrained=None, checkpoint=None)
    assert pretrained_dir(args) == str(tmp_path / "runs" / "pretrained" / "networks_cpu")
    run = os.path.join(pretrained_dir(args), "bert")
    config = {"data": [data], "split": "leave-network-out", "test_network": "bert", "model": "sage",
              "loss": "pairwise-hinge", "epochs": 10, "seed": 0}
    write_json(os.path.join(run, "metrics.json"), {"config": config})
    open(os.path.join(run, "checkpoint.pt"), "w").close()
    assert checkpoints(args, ["bert"]) == {"bert": run}
    assert describe_pretraining(args, ["bert"]) == "sage, pairwise-hinge, 10 epochs, seed 0, the task's network left out"
    with pytest.raises(SimulatorError, match="not a pre-training on .* with vit left out"):
        check_pretrained(run, data, "vit")
    write_json(os.path.join(run, "metrics.json"), {"config": {**config, "data": ["datasets/networks_other"]}})
    with pytest.raises(SimulatorError, match="give --pretrained another folder"):
        checkpoints(args, ["bert"])



def test_pre_training_argv_is_a_train_command_sharing_one_extraction_cache():
    from benchmarks.metaschedule.replay import pretrain_argv
    from simulator.train import build_parser

    argv = pretrain_argv("datasets/networks_cpu", "bert", "runs/x/bert", "runs/x/cache")
    assert argv[1:3] == ["-m", "simulator.train"]
    args = build_parser().parse_args(argv[3:])
    assert (args.split, args.test_network, args.cache_dir, args.out) == ("leave-network-out", "bert", "runs/x/cache",
                                                                         "runs/x/bert")
    assert args.resume    # a killed pre-training continues from its checkpoint



def test_a_failed_pre_training_stops_with_a_line_naming_it(tmp_path):
    import sys

    from benchmarks.metaschedule.replay import pretrain
    from simulator.registry import SimulatorError

    with pytest.raises(SimulatorError, match=r"pre-training .*bert failed \(exit status 3"):
        pretrain([sys.executable, "-c", "raise SystemExit(3)"], str(tmp_path / "bert"))


def test_pick_takes_the_best_scored_then_epsilon_and_unseen_first():
    from benchmarks.metaschedule.replay import Variant, pick

    rng = np.random.default_rng(0)
    unmeasured = np.array([10, 11, 12, 13, 14, 15])
    scores = np.array([0.1, 0.9, 0.5, 0.7, 0.3, 0.8])
    assert pick(scores, unmeasured, 3, Variant(), set(), rng) == [11, 15, 13]
    assert pick(scores, unmeasured, 3, Variant(skip_seen=True), {0.8}, rng) == [11, 13, 12]
    picks = [tuple(pick(scores, unmeasured, 3, Variant(epsilon=1.0), set(), np.random.default_rng(s)))
             for s in range(20)]
    assert len(set(picks)) > 1 and all(len(set(p)) == 3 for p in picks)


def test_choose_tasks_takes_kinds_in_turn_per_network():
    from benchmarks.metaschedule.replay import choose_tasks

    rows = [{"key": f"{kind}.{i}", "kind": kind, "networks": {net: 1}, "valid": 80}
            for net in ("a", "b") for kind in ("conv2d", "dense", "pool") for i in range(3)]
    rows.append({"key": "dense.small", "kind": "dense", "networks": {"a": 1}, "valid": 5})
    chosen = choose_tasks(rows, 2, 64)
    assert [(next(iter(r["networks"])), r["kind"]) for r in chosen] == [("a", "dense"), ("a", "conv2d"),
                                                                       ("b", "dense"), ("b", "conv2d")]
    assert len(choose_tasks(rows, None, 64)) == 18


def test_choose_tasks_takes_kinds_outside_the_usual_order_too():
    # a network whose tasks are mostly of a kind KIND_ORDER does not name (resnext's group_conv2d)
    from benchmarks.metaschedule.replay import choose_tasks

    rows = [{"key": f"group_conv2d.{i}", "kind": "group_conv2d", "networks": {"resnext": 1}, "valid": 80}
            for i in range(4)]
    rows.append({"key": "conv2d.0", "kind": "conv2d", "networks": {"resnext": 1}, "valid": 80})
    chosen = choose_tasks(rows, 3, 64)
    assert [r["kind"] for r in chosen] == ["conv2d", "group_conv2d", "group_conv2d"]
    assert len({r["key"] for r in chosen}) == 3


def test_summary_and_report_section(tmp_path):
    from benchmarks.common import write_json
    from benchmarks.metaschedule.replay import RESULT, report_section, summarize

    rows = [{"variant": v, "seed": 0, "task": t, "best_over_pool": b, "tau_unmeasured": [0.2, None],
             "update_s": 1.0} for v, t, b in (("none", "a", [2.0, 1.0]), ("none", "b", [1.0, 1.0]),
                                              ("default", "a", [2.0, 2.0]), ("default", "b", [1.5, 1.5]))]
    s = summarize(rows, ["none", "default"], 2)
    assert s["none"]["geomean_best_over_pool"] == pytest.approx([np.sqrt(2.0), 1.0])
    assert s["none"]["improved_after_round_1"] == 0.5 and s["default"]["improved_after_round_1"] == 0.0
    assert s["default"]["found_pool_best"] == [0.0, 0.0] and s["none"]["mean_tau_unmeasured"] == [0.2, None]
    write_json(str(tmp_path / RESULT), {"command": "python -m benchmarks.metaschedule.replay", "data": "d", "round_size": 8,
                                        "rounds": 2, "seeds": [0], "pretraining": "p", "summary": s,
                                        "tasks": [{"key": "a", "network": "n", "kind": "dense", "pool": 88}]})
    text = "\n".join(report_section(str(tmp_path)))
    assert "| none | 1.414 | 1.000 | 50% | 0.200 | – | 1.0 |" in text
    assert "Not today's gnn" in text and "recorded" in text      # it recorded no gnn defaults


def test_the_report_says_when_the_replay_ran_under_other_gnn_defaults(tmp_path):
    from benchmarks.common import write_json
    from benchmarks.metaschedule.replay import RESULT, report_section, summarize
    from simulator.metaschedule.cost_model import gnn_defaults

    rows = [{"variant": "default", "seed": 0, "task": "a", "best_over_pool": [1.5, 1.0], "tau_unmeasured": [0.2, 0.3],
             "update_s": 1.0}]
    result = {"command": "python -m benchmarks.metaschedule.replay", "data": "d", "round_size": 8, "rounds": 2,
              "seeds": [0], "pretraining": "p", "summary": summarize(rows, ["default"], 2),
              "tasks": [{"key": "a", "network": "n", "kind": "dense", "pool": 88}]}
    for defaults, stale in ((gnn_defaults(), False), ({**gnn_defaults(), "update_steps": 8}, True)):
        write_json(str(tmp_path / RESULT), {**result, "gnn_defaults": defaults})
        text = "\n".join(report_section(str(tmp_path)))
        assert ("Not today's gnn" in text) == stale
        assert ("update_steps 8 there" in text) == stale
