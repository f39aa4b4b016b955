"""`layout-sum` (simulator/models/layout_sum.py): a sum over the configurable nodes, each
term reading the node, its neighbours and its layout; it learns runtimes that add up node by node from what
only the node features tell, which the configuration-only MLP cannot."""
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from simulator import train
from simulator.config import ModelInfo, TrainConfig
from simulator.models.costmodel import build_cost_model
from simulator.models.layout_sum import LayoutSum
from simulator.registry import SimulatorError


ELEMENTS = [5.0, 1.0, 7.0, 3.0, 6.0, 2.0]   # column 0 of the nodes' features: their elements


def _graph():
    """Two chains 0 → 1 → 2 and 3 → 4 → 5 (producer → consumer), batched by make_batch."""
    from simulator.data.batching import make_batch, prepare_graph
    chain = prepare_graph(np.zeros((3, 1), np.float32), np.zeros(3, np.int64), np.array([[0, 1], [1, 2]]), 1)
    return make_batch([chain, chain]).graph


def _batch(rows):
    """Two graphs' worth of nodes (6, `_graph`), configurable nodes 1, 4 and 5, one config
    row per entry of `rows` ((3, 4) layout rows, in that node order)."""
    torch.manual_seed(1)
    rows = torch.as_tensor(np.asarray(rows, np.float32))
    x = torch.randn(6, 5)
    x[:, 0] = torch.tensor(ELEMENTS)
    return SimpleNamespace(x=x, types=torch.tensor([0, 1, 2, 1, 0, 2]), graph=_graph(),
                           node_config_x=rows.reshape(-1, 4),
                           node_config_node=torch.tensor([1, 4, 5] * len(rows)),
                           node_config_row=torch.arange(len(rows)).repeat_interleave(3),
                           config_graph=torch.zeros(len(rows), dtype=torch.long))


@pytest.mark.parametrize("role_dim", [0, 2])
def test_a_configs_prediction_is_the_sum_of_its_nodes_terms(role_dim):
    torch.manual_seed(0)
    net = LayoutSum(feature_dim=5, num_types=3, config_dim=4, element_column=0, role_dim=role_dim,
                    width=16, depth=3).eval()
    net.target_mean.fill_(2.0)
    net.target_std.fill_(3.0)
    a, b, c = np.zeros((3, 4)), np.zeros((3, 4)), np.zeros((3, 4))
    b[1] = [1, 0, 2, 3]         # b differs from a at node 4 only
    c[1] = [1, 0, 2, 3]
    c[2] = [3, 2, 1, 0]         # c differs from b at node 5 only
    # n · |v| / Σ|u| over the configurable nodes 1, 4, 5 (elements 1, 6, 2 of 9; n = 3)
    weight = {1: 3 * 1 / 9, 4: 3 * 6 / 9, 5: 3 * 2 / 9}
    with torch.no_grad():
        predictions = net(_batch([a, b, c]))
        x = _batch([a])
        assert net.element_weights(_batch([a, b])).tolist() == pytest.approx([weight[n] for n in (1, 4, 5)] * 2)

        def term(i, rows):      # configurable node i (of 1, 4, 5) in the config of `rows`
            node, rows = [1, 4, 5][i], torch.tensor(rows, dtype=torch.float32)
            others = torch.cat([rows[:i], rows[i + 1:]])[:, 4 - role_dim:].mean(0)
            context = net.neighbour_context(x)[node]
            psi = net.psi(torch.cat([x.x[node], net.type_embedding(x.types[node]), context, rows[i], others]))
            return 3.0 * (psi[0] + weight[node] * psi[1]).item()
    for config, prediction in zip([a, b, c], predictions):
        assert prediction == pytest.approx(2.0 + sum(term(i, config) for i in range(3)), abs=1e-5)
    if role_dim == 0:   # the terms of the nodes the config leaves alone do not move
        assert predictions[1] - predictions[0] == pytest.approx(term(1, b) - term(1, a), abs=1e-5)
        assert predictions[2] - predictions[1] == pytest.approx(term(2, c) - term(2, b), abs=1e-5)


def test_each_layout_row_reads_the_mean_roles_of_the_other_nodes_of_its_config():
    roles = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 9.0], [7.0, 7.0]])
    row = torch.tensor([0, 0, 0, 1])     # config row 1 has one configurable node
    others = LayoutSum.other_nodes_roles(roles, row, 2)
    assert others.tolist() == [[4.0, 6.5], [3.0, 5.5], [2.0, 3.0], [0.0, 0.0]]
    with pytest.raises(SimulatorError, match="3 role columns of 2 layout columns"):
        LayoutSum(feature_dim=5, num_types=3, config_dim=2, element_column=0, role_dim=3)


def test_each_node_reads_its_consumers_and_producers_opcodes_whether_configured_and_sizes():
    net = LayoutSum(feature_dim=5, num_types=3, config_dim=4, element_column=0, type_dim=2)
    with torch.no_grad():
        net.consumer_embedding.weight.copy_(torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [4.0, 0.0]]))
        net.producer_embedding.weight.copy_(torch.tensor([[0.0, 1.0], [0.0, 2.0], [0.0, 3.0], [0.0, 4.0]]))
        context = net.neighbour_context(_batch([np.zeros((3, 4))]))
    size = np.log1p(ELEMENTS)
    # node 1 (opcode 1): consumer node 2 (opcode 2, not configurable), producer node 0 (opcode 0)
    assert context[1].tolist() == pytest.approx([3.0, 0.0, 0.0, size[2] - size[1], 0.0, 1.0, 0.0, size[0] - size[1]])
    # node 4: consumer node 5 is configurable; node 5 has no consumer, node 3 no producer
    assert context[4, :4].tolist() == pytest.approx([3.0, 0.0, 1.0, size[5] - size[4]])
    assert context[5, :4].tolist() == [0.0] * 4 and context[3, 4:].tolist() == [0.0] * 4
    assert context[5, 4:].tolist() == pytest.approx([0.0, 1.0, 1.0, size[4] - size[5]])  # producer 4: opcode 0


def test_element_counts_are_read_back_through_the_feature_transform():
    from simulator.data.batching import transform_features, untransform_features
    values = np.array([[0.0, 1.0, 3.0, 1000.0, 2.0 ** 24, -7.0]], np.float32)
    for transform in ("none", "log1p"):
        back = untransform_features(torch.from_numpy(transform_features(values, transform)), transform)
        assert np.allclose(back.numpy(), values, rtol=1e-5), transform
    with pytest.raises(SimulatorError, match="element column 7 is not one of the 5 node features"):
        LayoutSum(feature_dim=5, num_types=3, config_dim=4, element_column=7)


def test_weights_of_another_version_of_the_model_are_one_line_asking_to_train_again():
    config = TrainConfig.from_dict({**TrainConfig().to_dict(), "model": "layout-sum"})
    model = build_cost_model(config, ModelInfo(num_types=5, feature_dim=140, node_config_dim=18))
    weights = model.net.state_dict()
    weights["psi.1.weight"] = weights["psi.1.weight"][:1]   # a head of one output, as before
    with pytest.raises(SimulatorError, match=r"checkpoint's weights do not fit this version's layout-sum "
                                             r"\(size mismatch for psi\.1\.weight.*train it again"):
        model.load_weights({"model": weights})


@pytest.mark.parametrize("name", ["layout-sum", "config-mlp"])   # both are LayoutRowsCostModels
def test_layout_row_models_refuse_data_without_layout_configs(name):
    config = TrainConfig.from_dict({**TrainConfig().to_dict(), "model": name})
    with pytest.raises(SimulatorError, match=f"{name} reads the per-node layout configs"):
        build_cost_model(config, ModelInfo(num_types=5, feature_dim=4))
    model = build_cost_model(config, ModelInfo(num_types=5, feature_dim=140, node_config_dim=18))
    assert sum(p.numel() for p in model.net.parameters()) > 0


def _validation_tau(root, out, model):
    assert train.main(["--data", "tpugraphs:layout:xla:random", "--data-root", str(root), "--model", model,
                       "--epochs", "40", "--seed", "0", "--out", str(out), "--device", "cpu", "--threads", "1"]) == 0
    with open(out / "metrics.json", encoding="utf-8") as f:
        return json.load(f)["val"]["kendall_tau"]["mean"]


def test_it_learns_what_the_node_features_decide_and_the_configs_alone_cannot(tmp_path):
    """Synthetic layout graphs (simulator/data/synthetic.py): runtime = Σ_v size_v · (1 +
    |minor-most dimension − preferred_v|), size and preferred dimension visible only in v's
    node features; unseen graphs validate."""
    from simulator.data.synthetic import write_tpugraphs_collection
    write_tpugraphs_collection(str(tmp_path / "root"), "layout:xla:random", graphs=(12, 4, 1),
                               configs=(24, 32), config_nodes=4, seed=0)
    summed = _validation_tau(tmp_path / "root", tmp_path / "sum", "layout-sum")
    configs_only = _validation_tau(tmp_path / "root", tmp_path / "mlp", "config-mlp")
    assert summed > 0.6 and summed > configs_only + 0.2, (summed, configs_only)


def test_it_standardises_the_configurable_nodes_by_their_own_statistics(tmp_path):
    """The layout statistics hold the configurable nodes' feature mean/std beside every
    node's, and layout-sum reads those: every node's would leave them off-centre."""
    from simulator.data.synthetic import write_tpugraphs_collection
    from simulator.data.tpugraphs import TpuGraphsData
    write_tpugraphs_collection(str(tmp_path), "layout:xla:random", graphs=(4, 1, 1), configs=(8, 8),
                               config_nodes=3, seed=0)
    kind = TpuGraphsData()
    flags = vars(train.build_parser().parse_args(["--model", "layout-sum", "--data", "tpugraphs:layout:xla:random",
                                                  "--data-root", str(tmp_path), "--threads", "1"]))
    config = kind.resolve(train.validate(train.config_from_flags(flags)), set())
    data = kind.open_run(config, None)
    train_part = data.parts["train"]
    model = build_cost_model(config, data.info)
    stats = train_part.normalization(model.batch_spec, 0)
    graphs = [train_part.graph(i) for i in range(len(train_part))]
    rows = torch.cat([g.x[g.config_nodes] for g in graphs]).double()
    assert np.allclose(stats.configurable_feature_mean, rows.mean(0).numpy(), atol=1e-5)
    every = torch.cat([g.x for g in graphs]).double().mean(0).numpy()
    assert not np.allclose(stats.configurable_feature_mean, every, atol=1e-3)
    model.set_normalization(stats)
    assert config.model.members == 3 and len(model.net.members) == 3   # layout-sum's default: an ensemble
    for member in model.net.members:
        assert np.allclose(member.feature_mean.numpy(), stats.configurable_feature_mean)
    with pytest.raises(SimulatorError, match="standardises the configurable nodes' features"):
        model.set_normalization(type(stats)(target_mean=0.0, target_std=1.0, feature_mean=every.tolist(),
                                            feature_std=[1.0] * len(every)))


def test_log1p_tames_tile_sizes_and_leaves_layout_rows_as_dimension_indices():
    from simulator.data.batching import config_tensors
    tiles = np.array([[1.0, 8.0, 1024.0]], np.float32)
    layouts = np.array([[[2, 0, 1, -1, -1, -1]]], np.float32)   # a permutation, -1: no dimension
    fields = config_tensors(tiles, layouts, "log1p")
    assert np.allclose(fields["config_x"].numpy(), np.log1p(tiles))
    assert np.array_equal(fields["node_config_x"].numpy(), layouts)


def test_role_columns_one_hot_what_the_most_minor_dimensions_are_and_flag_moves_off_xlas():
    from simulator.data.layout_roles import ROLE_COLUMNS, role_columns
    roles = np.full((1, 18), -1, np.int8)
    roles[0, :3] = [1, 3, 4]                 # output: batch, left-free, right-free
    roles[0, 6:9] = [1, 3, 2]                # first operand: batch, left-free, contracted
    default = np.full((1, 18), -1, np.float32)
    default[0, :3] = [2, 1, 0]               # XLA: right-free minor
    default[0, 6:9] = [2, 1, 0]
    feat = default[None].repeat(2, axis=0)
    feat[1, 0, :3] = [1, 2, 0]               # config 1 makes the left-free dimension minor
    cols = role_columns(feat, roles, default)
    assert cols.shape == (2, 1, ROLE_COLUMNS) == (2, 1, 63)
    one_hot = cols[:, 0, :54].reshape(2, 3, 3, 6)   # slot, position, role
    assert [int(np.argmax(one_hot[0, 0, k])) for k in range(3)] == [4, 3, 1]
    assert [int(np.argmax(one_hot[1, 0, k])) for k in range(3)] == [3, 4, 1]
    assert [int(np.argmax(one_hot[1, 1, k])) for k in range(3)] == [2, 3, 1]
    assert not one_hot[:, 2].any()                   # no second operand: no role at all
    assert list(cols[0, 0, 54:]) == [0] * 9
    assert list(cols[1, 0, 54:]) == [1, 1, 0] + [0] * 6


def _role_collection(root, with_roles):
    """Layout graphs whose runtime is Σ_v size_v · (1 + 2·[the output's minor-most dimension is
    not v's right-free one]); which index is right-free is random per node and told only by the
    roles, so a layout row's indices alone say nothing of it."""
    from extract.xla.npz_format import collection_dir, write_arrays
    from simulator.data.synthetic import make_tpugraphs_arrays
    rng = np.random.default_rng(0)
    for split, count in (("train", 12), ("valid", 4), ("test", 1)):
        for g in range(count):
            arrays = make_tpugraphs_arrays("layout", rng, nodes=20, configs=24, config_nodes=4)
            ids, feat = arrays["node_config_ids"], arrays["node_config_feat"]
            roles = np.full((len(ids), 18), -1, np.int8)
            roles[:, :4] = [rng.permutation([1, 3, 4, 5]) for _ in ids]
            minor = feat[:, :, 0].astype(np.int64)
            slow = roles[np.arange(len(ids))[None, :], minor] != 4
            size = np.log2(arrays["node_feat"][ids, 28]) + 1.0
            cost = (size[None, :] * (1.0 + 2.0 * slow)).sum(1)
            arrays["config_runtime"] = (1e5 * cost * np.exp(rng.normal(0, 0.01, len(cost)))).astype(np.int64)
            if with_roles:
                arrays.update(node_config_roles=roles, node_config_default=feat[0])
            write_arrays(collection_dir(root / "npz", "layout:xla:random", split) / f"g{g}.npz", arrays)


def test_it_learns_from_the_roles_what_the_dimension_indices_cannot_tell(tmp_path):
    from extract.xla.npz_format import TpuGraphsFile
    from simulator.data.batching import BatchSpec
    from simulator.data.tpugraphs import TpuGraphsSource
    from simulator.models.costmodel import load_trained
    _role_collection(tmp_path / "roles", with_roles=True)
    _role_collection(tmp_path / "plain", with_roles=False)
    with_roles = _validation_tau(tmp_path / "roles", tmp_path / "with", "layout-sum")
    without = _validation_tau(tmp_path / "plain", tmp_path / "without", "layout-sum")
    assert with_roles > 0.6 and with_roles > without + 0.3, (with_roles, without)
    model, _ = load_trained(str(tmp_path / "with"))
    assert all(member.node_config_mean.shape == (18 + 63,) for member in model.net.members)
    assert model.info.layout_roles and model.batch_spec.layout_roles
    plain = TpuGraphsFile(tmp_path / "plain/npz/layout/xla/random/test/g0.npz")
    source = TpuGraphsSource([plain], model.config.data, model.info)
    with pytest.raises(SimulatorError, match=r"g0\.npz: no node_config_roles or node_config_default; the model "
                                             r"reads the configurable nodes' roles"):
        source.batch([0], np.random.default_rng(0), BatchSpec(layout_roles=True))
