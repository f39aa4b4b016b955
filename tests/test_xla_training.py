"""XLA / TpuGraphs side of the simulator: config-feature joins, lazy collections in the
official folder layout, tile/layout metrics, Kaggle CSV, real raw samples, errors."""
import csv
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from datasets import tpugraphs_collections as tg
from extract.xla.convert_tuning import read_raw
from extract.xla.npz_format import is_tpugraphs_npz, write_npz
from simulator import evaluate, predict, train
from simulator.checkpoint import load_checkpoint
from simulator.data.batching import khop_nodes, make_batch, prepare_graph
from simulator.data.synthetic import write_tpugraphs_collection
from simulator.metrics import LAYOUT_METRICS, TILE_METRICS, kendall_tau, top_k_slowdown, kaggle_score
from simulator.models.model import GraphModel

RAW = Path(os.environ.get("TPUGRAPHS_RAW", "/work/shared/data/tpugraphs_raw"))
TINY = ["--threads", "1", "--epochs", "2", "--width", "16", "--depth", "2"]


def item(nodes, configs, config_dim=0, config_nodes=None, group=0, seed=0):
    """A hand-made Prepared: a path graph with `configs` configs."""
    g = torch.Generator().manual_seed(seed)
    edges = np.stack([np.arange(nodes - 1), np.arange(1, nodes)], 1)
    it = prepare_graph(np.random.default_rng(seed).random((nodes, 5)).astype(np.float32),
                       np.arange(nodes) % 3, edges, num_types=3, transform="none",
                       config_ids=None if config_nodes is None else np.array(config_nodes), group=group)
    it.y = torch.rand(configs, generator=g)
    if config_dim:
        it.config_x = torch.rand(configs, config_dim, generator=g)
    if config_nodes is not None:
        it.node_config_x = torch.rand(configs, len(config_nodes), 4, generator=g)
    return it


# ---------------------------------------------------------------- batching and model
def test_make_batch_early_join_has_one_graph_copy_per_config():
    a, b = item(3, 2, config_dim=2), item(2, 3, config_dim=2, group=1)
    late = make_batch([a, b])
    assert late.graph.num_nodes() == 5 and late.pool_index.tolist() == [0, 0, 1, 1, 1]
    early = make_batch([a, b], expand=True)
    assert early.graph.num_nodes() == 2 * 3 + 3 * 2
    assert early.graph.batch_size == 5 and early.pool_index.tolist() == [0, 1, 2, 3, 4]
    assert early.node_index.tolist() == [0, 1, 2, 0, 1, 2, 3, 4, 3, 4, 3, 4]
    assert early.node_row.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 4]
    assert early.graph.num_edges() == 2 * len(a.src) + 3 * len(b.src)
    assert early.config_x.shape == (5, 2)


def test_make_batch_places_layout_configs_on_configurable_nodes():
    a = item(4, 2, config_nodes=[1, 3])
    b = item(3, 1, config_nodes=[0], group=1)
    late = make_batch([a, b])
    assert late.node_config_row.tolist() == [0, 0, 1, 1, 2]
    assert late.node_config_node.tolist() == [1, 3, 1, 3, 4 + 0]
    early = make_batch([a, b], expand=True)
    assert early.node_config_node.tolist() == [1, 3, 4 + 1, 4 + 3, 8 + 0]
    assert torch.equal(early.node_config_x[2], a.node_config_x[1, 0])


@pytest.mark.parametrize("join", ["early", "late"])
@pytest.mark.parametrize("kind", ["tile", "layout"])
def test_config_rows_do_not_depend_on_the_batch(join, kind):
    if kind == "tile":
        items = [item(5, 3, config_dim=2), item(4, 2, config_dim=2, group=1, seed=1)]
        dims = {"config_dim": 2}
    else:
        items = [item(5, 3, config_nodes=[0, 3]), item(4, 2, config_nodes=[2], group=1, seed=1)]
        dims = {"node_config_dim": 4}
    torch.manual_seed(0)
    model = GraphModel("gcn", 5, 3, width=8, depth=2, join=join, **dims).eval()
    with torch.no_grad():
        alone = model(make_batch(items[:1], expand=model.expands))
        both = model(make_batch(items, expand=model.expands))
    assert torch.allclose(alone, both[:3], atol=1e-5)
    assert float(both[:3].std()) > 0   # configs of one graph get different predictions
    model.train()
    model(make_batch(items, expand=model.expands)).sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_khop_pruning_by_hand():
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]])   # a path 0-1-2-3-4-5
    assert khop_nodes(6, edges, [2], 0).tolist() == [2]
    assert khop_nodes(6, edges, [2], 1).tolist() == [1, 2, 3]
    assert khop_nodes(6, edges[:, ::-1], [2], 2).tolist() == [0, 1, 2, 3, 4]  # undirected
    assert khop_nodes(6, edges, [2], -1) is None and khop_nodes(6, edges, [], 2) is None
    feats = np.arange(12, dtype=np.float32).reshape(6, 2)
    it = prepare_graph(feats, np.zeros(6, int), edges, 1, "none", np.array([4, 2]), keep_hops=1)
    assert it.num_nodes == 5                                    # kept: 1, 2, 3, 4, 5
    assert it.x[:, 0].tolist() == [2, 4, 6, 8, 10]
    assert it.config_nodes.tolist() == [3, 1]                   # 4 → 3, 2 → 1
    assert len(it.src) == 2 * 4 + 5                             # 4 kept edges, both ways, + loops


# ---------------------------------------------------------------- metrics by hand
def test_slowdown_kaggle_score_and_tau_by_hand():
    t = np.array([3.0, 1.0, 2.0, 4.0, 5.0, 6.0, 1.5])          # best: config 1 (1.0)
    p = np.array([1.0, 7.0, 2.0, 3.0, 4.0, 5.0, 6.0])          # predicted order 0 2 3 4 5 6 1
    assert top_k_slowdown(p, t, 1) == pytest.approx((3.0 - 1.0) / 1.0)
    assert top_k_slowdown(p, t, 5) == pytest.approx((2.0 - 1.0) / 1.0)   # best of 3 2 4 5 6
    assert top_k_slowdown(p, t, 10) == 0.0                      # all 7 configs chosen
    assert kaggle_score(p, t) == pytest.approx(1 - 1.0)         # 2 − 2/1
    assert kaggle_score(t, t) == 1.0
    assert kendall_tau(t, t) == pytest.approx(1.0) and kendall_tau(-t, t) == pytest.approx(-1.0)
    # one discordant pair of 4 configs: τ = (5 − 1) / 6
    assert kendall_tau(np.array([1.0, 2, 4, 3]), np.array([1.0, 2, 3, 4])) == pytest.approx(4 / 6)
    assert kendall_tau(np.ones(4), np.arange(4.0)) == 0.0       # a constant prediction ranks nothing


# ---------------------------------------------------------------- collections end to end
@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("tpugraphs")
    write_tpugraphs_collection(str(root), "tile:xla", graphs=(6, 2, 2), seed=0)
    write_tpugraphs_collection(str(root), "layout:xla:random", graphs=(4, 2, 2), nodes=(20, 40),
                               configs=(10, 20), seed=1)
    return root


@pytest.fixture(scope="module")
def runs(tmp_path_factory, root):
    out = tmp_path_factory.mktemp("xla_runs")
    done = {}
    for name, data, extra in (("tile", "tpugraphs:tile:xla", []),
                              ("tile-late", "tpugraphs:tile:xla", ["--join", "late"]),
                              ("layout", "tpugraphs:layout:xla:random", []),
                              ("layout-late", "tpugraphs:layout:xla:random",
                               ["--model", "gcn", "--join", "late", "--keep-hops", "-1"])):
        args = ["--data", data, "--split", "official", "--data-root", str(root), "--out", str(out / name)]
        assert train.main(args + TINY + extra) == 0
        done[name] = out / name
    return done


@pytest.mark.parametrize("name", ["tile", "tile-late"])
def test_tile_runs_train_and_report_slowdowns(runs, name):
    metrics = json.loads((runs[name] / "metrics.json").read_text())
    assert metrics["config"]["loss"] == "listmle" and metrics["config"]["split"] == "official"
    assert set(metrics["val"]) == set(TILE_METRICS)
    for graph, slow5 in metrics["val"]["top5_slowdown"]["per_workload"].items():
        assert metrics["val"]["kaggle_score"]["per_workload"][graph] == pytest.approx(1 - slow5)
        assert metrics["val"]["top1_slowdown"]["per_workload"][graph] >= slow5 >= \
            metrics["val"]["top10_slowdown"]["per_workload"][graph] >= 0
    assert "test" not in metrics                       # test runtimes withheld: not scored
    assert metrics["run"]["train_samples"] == 6 and metrics["run"]["test_samples"] == 2
    state = load_checkpoint(str(runs[name]))
    assert state["info"]["tpugraphs"] == {"collection": "tile:xla", "kind": "tile"}
    assert state["info"]["config_dim"] == 24 and len(state["normalization"]["config_mean"]) == 24


@pytest.mark.parametrize("name", ["layout", "layout-late"])
def test_layout_runs_report_kendall_tau_over_all_configs(runs, name):
    metrics = json.loads((runs[name] / "metrics.json").read_text())
    assert set(metrics["val"]) == set(LAYOUT_METRICS)
    taus = metrics["val"]["kendall_tau"]["per_workload"]
    assert len(taus) == 2 and all(-1 <= v <= 1 for v in taus.values())
    assert metrics["config"]["keep_hops"] == (2 if name == "layout" else -1)   # default: --depth
    # layout data's default model is the per-node additive one, with the loss it was judged with
    expected = (("layout-sum", "pairwise-hinge", 3, "last") if name == "layout" else
                ("gcn", "listmle", 1, "best"))
    assert tuple(metrics["config"][k] for k in ("model", "loss", "members", "keep_weights")) == expected


def test_layout_defaults_yield_to_given_flags(root):
    base = ["--data", "tpugraphs:layout:xla:random", "--data-root", str(root)]
    resolved = {tuple(extra): train.resolve_argv(base + extra)[2] for extra in
                ([], ["--loss", "listmle", "--members", "1", "--keep-weights", "best"], ["--model", "gcn"],
                 ["--model", "config-mlp"])}
    assert [(c.model.model, c.fit.loss, c.model.members, c.fit.keep_weights) for c in resolved.values()] == [
        ("layout-sum", "pairwise-hinge", 3, "last"), ("layout-sum", "listmle", 1, "best"),
        ("gcn", "listmle", 1, "best"), ("config-mlp", "listmle", 1, "best")]
    tile = train.resolve_argv(["--data", "tpugraphs:tile:xla", "--data-root", str(root)])[2]
    assert (tile.model.model, tile.fit.loss) == ("gcn", "listmle")


def test_same_seed_same_metrics_and_evaluate_agrees(runs, root, tmp_path):
    args = ["--data", "tpugraphs:tile:xla", "--data-root", str(root), "--out", str(tmp_path / "again")]
    assert train.main(args + TINY) == 0
    assert (tmp_path / "again" / "metrics.json").read_text() == (runs["tile"] / "metrics.json").read_text()
    result = evaluate.run([str(runs["tile"])])
    saved = json.loads((runs["tile"] / "metrics.json").read_text())
    assert result["val"]["kaggle_score"]["mean"] == pytest.approx(saved["val"]["kaggle_score"]["mean"])


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_kaggle_csv_rows(runs, root, tmp_path):
    out = tmp_path / "tile.csv"
    assert predict.main([str(runs["tile"]), "--kaggle-csv", str(out)]) == 0
    rows = read_csv(out)
    assert rows[0] == ["ID", "TopConfigs"]
    test_files = tg.open_split(root, "tile:xla", "test")
    assert [r[0] for r in rows[1:]] == [f"tile:xla:{f.name}" for f in test_files]
    for (_, top), f in zip(rows[1:], test_files):
        indices = [int(i) for i in top.split(";")]
        assert len(indices) == min(5, f.num_configs) == len(set(indices))
        assert all(0 <= i < f.num_configs for i in indices)
    out = tmp_path / "layout.csv"
    assert predict.main([str(runs["layout"]), "tpugraphs:layout:xla:random", "--kaggle-csv", str(out)]) == 0
    rows = read_csv(out)[1:]
    for (row_id, ranking), f in zip(rows, tg.open_split(root, "layout:xla:random", "test")):
        assert row_id == f"layout:xla:random:{f.name}"
        assert sorted(int(i) for i in ranking.split(";")) == list(range(f.num_configs))


def test_chunked_config_reading_matches_whole_reads(root):
    file = tg.open_split(root, "layout:xla:random", "train")[0]
    chunks = list(file.iter_config_chunks(3, ["node_config_feat", "config_runtime"]))
    assert [start for start, _ in chunks] == list(range(0, file.num_configs, 3))
    for key in ("node_config_feat", "config_runtime"):
        assert np.array_equal(np.concatenate([rows[key] for _, rows in chunks]), file.read(key))


@pytest.mark.skipif(not RAW.is_dir(), reason="real TpuGraphs raw samples not present")
def test_real_raw_samples_train_and_predict(runs, tmp_path, capsys):
    tiles = sorted(read_raw(RAW / "op_tuning_data.pb"), key=lambda s: s.name)
    (layout,) = read_raw(RAW / "module_tuning_data_layout.pb")
    root = tmp_path / "raw"
    for i, s in enumerate(tiles):
        write_npz(root / "npz/tile/xla" / ("train" if i < 10 else "valid" if i < 13 else "test") / f"{s.name}.npz", s)
    for split in ("train", "valid", "test"):
        write_npz(root / "npz/layout/xla/default" / split / f"{layout.name}.npz", layout)
    # a few steps of training on the real kernels
    out = tmp_path / "run"
    assert train.main(["--data", "tpugraphs:tile:xla", "--data-root", str(root), "--out", str(out),
                       "--threads", "1", "--epochs", "1", "--width", "16", "--depth", "2"]) == 0
    assert set(json.loads((out / "metrics.json").read_text())["test"]) == set(TILE_METRICS)
    # a model trained on synthetic data ranks every real kernel's configs and the real module's
    capsys.readouterr()
    csv_path = tmp_path / "real_tile.csv"
    assert predict.main([str(runs["tile"]), str(root / "npz/tile"), "--kaggle-csv", str(csv_path)]) == 0
    rows = {r[0]: r[1] for r in read_csv(csv_path)[1:]}
    assert len(rows) == 15 == len(tiles)
    for s in tiles:
        assert len(rows[f"tile:xla:{s.name}"].split(";")) == min(5, s.num_configs)
    assert "top-5 slowdown" in capsys.readouterr().out          # measured: slowdown shown
    csv_path = tmp_path / "real_layout.csv"
    assert predict.main([str(runs["layout"]), str(root / "npz/layout/xla/default/test"),
                         "--kaggle-csv", str(csv_path)]) == 0
    ((row_id, ranking),) = read_csv(csv_path)[1:]
    assert row_id == f"layout:xla:default:{layout.name}"
    assert sorted(int(i) for i in ranking.split(";")) == list(range(layout.num_configs))


# ---------------------------------------------------------------- errors
def fails(capsys, fn, args, *expected):
    assert fn(args) == 2
    err = capsys.readouterr().err
    for text in expected:
        assert text in err, err
    return err


def test_bad_paths_and_flags_give_clear_errors(root, runs, tmp_path, capsys):
    base = ["--out", str(tmp_path / "x")] + TINY
    fails(capsys, train.main, ["--data", "tpugraphs:tile:xla", "--data-root", str(tmp_path / "nope")] + base,
          "--data-root", "nope", "no such folder")
    fails(capsys, train.main, ["--data", "tpugraphs:layout:nlp:default", "--data-root", str(root)] + base,
          "layout/nlp/default/train", "no such folder")
    fails(capsys, train.main, ["--data", "tpugraphs:tile:nlp", "--data-root", str(root)] + base,
          "unknown TpuGraphs collection 'tile:nlp'")
    fails(capsys, train.main, ["--data", "tpugraphs:tile:xla", "--data-root", str(root), "--split", "random"] + base,
          "--split official")
    fails(capsys, train.main, ["--data", "tpugraphs:tile:xla", "--data-root", str(root), "--model", "xgb"] + base,
          "graph model")
    fails(capsys, train.main, ["--data", "tpugraphs:layout:xla:random", "--data-root", str(root), "--join", "late"]
          + base, "--join late", "layout-sum", "--model gcn")
    fails(capsys, predict.main, [str(runs["tile"]), "tpugraphs:layout:xla:random"], "tile collection",
          "cannot rank layout")
    fails(capsys, predict.main, [str(runs["tile"]), str(tmp_path / "missing.npz")], "missing.npz",
          "no such file")
    empty = tmp_path / "empty" / "npz" / "tile" / "xla" / "train"
    empty.mkdir(parents=True)
    fails(capsys, train.main, ["--data", "tpugraphs:tile:xla", "--data-root", str(tmp_path / "empty")] + base,
          "holds no .npz files")


def test_corrupted_file_in_a_collection_is_named(root, runs, tmp_path, capsys):
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(root / "npz" / "tile", copy / "npz" / "tile")
    victim = copy / "npz/tile/xla/train/g0.npz"
    victim.write_bytes(victim.read_bytes()[:200])                       # truncated
    fails(capsys, train.main, ["--data", "tpugraphs:tile:xla", "--data-root", str(copy),
                               "--out", str(tmp_path / "r")] + TINY, str(victim))
    victim.write_bytes(b"not a zip at all")
    fails(capsys, predict.main, [str(runs["tile"]), str(victim)], str(victim), "not a readable npz")
    with zipfile.ZipFile(tmp_path / "other.npz", "w") as z:              # an npz of other arrays
        z.writestr("x.npy", b"")
    assert not is_tpugraphs_npz(tmp_path / "other.npz")
