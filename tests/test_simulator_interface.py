"""The simulator's interfaces: the cost model (fit/update/predict/save/load), sources,
layer options, typed configs, explicit flags, the node vocabulary."""
import numpy as np
import pytest
import torch

from simulator.config import ModelInfo, Normalization, TrainConfig
from simulator.data.batching import BatchSpec
from simulator.data.collection import CollectionInfo
from simulator.data.in_memory import SampleSource
from simulator.data.sources import Source
from simulator.models.costmodel import CostModel, build_cost_model
from simulator.models.layers import PROPAGATIONS, GATLayer, build_layer
from simulator.registry import SimulatorError
from simulator.train import build_parser, config_from_flags, explicit_flags, validate


def make_config(**flags):
    base = vars(build_parser().parse_args(["--threads", "1", "--width", "8", "--depth", "1", "--epochs", "2",
                                           "--batch-size", "16"]))
    return validate(config_from_flags(dict(base, **flags)))


def fitted(samples, **flags):
    """A cost model fitted on the first 8 workloads' samples (2 of them for validation)."""
    config = make_config(**flags)
    source = SampleSource(samples)
    train = source.subset([i for i, s in enumerate(samples) if s.group in {f"C{k}" for k in range(1, 7)}])
    val = source.subset([i for i, s in enumerate(samples) if s.group in ("C7", "C8")])
    torch.manual_seed(0)
    model = build_cost_model(config, source.info)
    model.set_normalization(train.normalization(model.batch_spec, config.seed))
    model.fit(train, val)
    return model


@pytest.mark.parametrize("name", ["gcn", "curve-mlp", "xgb"])
def test_cost_model_predicts_a_list_of_samples_saves_and_loads(tmp_path, synthetic_samples, name):
    model = fitted(synthetic_samples, model=name, xgb_rounds=10)
    assert isinstance(model, CostModel)
    new = [s for s in synthetic_samples if s.group in ("C9", "C10")]
    pred = model.predict(new)
    assert pred.shape == (sum(s.num_configs for s in new),) and np.isfinite(pred).all()
    # a list of samples and a source of them give the same predictions, in any batch size
    assert np.array_equal(pred, model.predict(SampleSource(new, model.info), batch_size=5))
    model.save(str(tmp_path / "model.pt"))
    torch.load(str(tmp_path / "model.pt"), weights_only=True)   # plain data and tensors only
    again = CostModel.load(str(tmp_path / "model.pt"))
    assert type(again) is type(model) and again.config == model.config and again.info == model.info
    assert np.array_equal(again.predict(new), pred)


@pytest.mark.parametrize("name", ["gcn", "xgb"])
def test_update_continues_training_on_new_items(synthetic_samples, name):
    model = fitted(synthetic_samples, model=name, xgb_rounds=10)
    new = [s for s in synthetic_samples if s.group in ("C9", "C10")]
    before = model.predict(new)
    model.update(new, steps=3)
    after = model.predict(new)
    assert np.isfinite(after).all() and not np.array_equal(before, after)


def test_update_of_a_cold_model_takes_statistics_from_its_items(synthetic_samples):
    config = make_config(model="gcn")
    model = build_cost_model(config, SampleSource(synthetic_samples).info)
    assert model.normalization is None
    model.update(synthetic_samples[:32], steps=2)
    assert isinstance(model.normalization, Normalization)
    assert np.isfinite(model.predict(synthetic_samples[32:40])).all()


def test_the_model_says_what_a_batch_needs(synthetic_samples):
    info = SampleSource(synthetic_samples).info
    assert build_cost_model(make_config(model="gcn"), info).batch_spec == BatchSpec(graph=True)
    assert build_cost_model(make_config(model="curve-mlp"), info).batch_spec == BatchSpec(graph=False, vector="curve")
    assert build_cost_model(make_config(model="xgb"), info).batch_spec.vector == "per_store"
    tile = ModelInfo(num_types=3, feature_dim=5, config_dim=4, tpugraphs={"collection": "tile:xla", "kind": "tile"})
    assert build_cost_model(make_config(model="gcn"), tile).batch_spec.expand
    assert not build_cost_model(make_config(model="gcn", join="late"), tile).batch_spec.expand
    with pytest.raises(SimulatorError, match="graph model"):
        build_cost_model(make_config(model="xgb"), tile)


def test_sources_follow_the_protocol(synthetic_samples):
    source = SampleSource(synthetic_samples)
    assert isinstance(source, Source) and isinstance(source.subset([0, 1]), Source)
    assert len(source.subset([3, 5])) == 2 and source.subset([3, 5]).names == [synthetic_samples[3].name,
                                                                              synthetic_samples[5].name]
    batch = source.batch([0, 2], np.random.default_rng(0), BatchSpec())
    assert batch.graph.batch_size == 2 and batch.y.shape == (2,)


# ---------------------------------------------------------------- layer options
def test_layer_options_are_checked_by_the_layer():
    assert GATLayer.resolve_options({"heads": "2"}) == {"heads": 2}
    assert PROPAGATIONS.get("cheb").resolve_options(None) == {"k": 3}
    with pytest.raises(SimulatorError, match=r"'gat' has no option 'k' \(known: heads\)"):
        build_layer("gat", 8, {"k": 2})
    with pytest.raises(SimulatorError, match=r"'gcn' has no option 'heads' \(known: none\)"):
        build_layer("gcn", 8, {"heads": 2})
    with pytest.raises(SimulatorError, match="not a int"):
        build_layer("gat", 8, {"heads": "two"})


@pytest.mark.parametrize("name", ["gcn", "sage", "gat", "cheb", "mlp"])
def test_layers_are_documented_and_reset(name):
    cls = PROPAGATIONS.get(name)
    assert all(part in cls.__doc__ for part in ("Parameters", "Shapes", "width"))
    layer = build_layer(name, 8)
    before = [p.detach().clone() for p in layer.parameters()]
    torch.manual_seed(123)
    layer.reset_parameters()
    assert any(not torch.equal(a, b) for a, b in zip(before, layer.parameters()))


def test_layer_flags_become_the_layers_options():
    assert make_config(model="gat", heads=2).model.layer_options == {"heads": 2}
    assert make_config(model="cheb", cheb_k=2).model.layer_options == {"k": 2}
    assert make_config(model="cheb", layer_option=["k=5"]).model.layer_options == {"k": 5}
    assert make_config(model="gat").model.layer_options == {"heads": 4}
    with pytest.raises(SimulatorError, match="'gcn' has no option 'heads'"):
        make_config(model="gcn", heads=2)
    with pytest.raises(SimulatorError, match="KEY=VALUE"):
        make_config(model="cheb", layer_option=["k"])
    with pytest.raises(SimulatorError, match="no propagation layer"):
        make_config(model="xgb", cheb_k=2)


def test_unknown_layer_option_on_the_command_line_is_one_line(tmp_path, dataset_path, capsys):
    from simulator import train
    assert train.main(["--data", dataset_path, "--out", str(tmp_path / "r"), "--model", "gat",
                       "--layer-option", "k=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'gat'" in err[0] and "known: heads" in err[0]


# ---------------------------------------------------------------- configs and flags
def test_explicit_flags_without_argparse_internals():
    assert explicit_flags([]) == {}
    assert explicit_flags(["--epochs", "3", "--no-residual", "--heads", "2"]) == \
        {"epochs": 3, "residual": False, "heads": 2}


def test_typed_config_round_trips_through_plain_data():
    config = make_config(model="gat", heads=2, data=["a", "b"], keep_hops=2)
    flat = config.to_dict()
    assert flat["model"] == "gat" and flat["keep_hops"] == 2 and flat["layer_options"] == {"heads": 2}
    assert TrainConfig.from_dict(flat) == config
    assert config.replace(epochs=9).fit.epochs == 9 and config.fit.epochs == 2
    # a checkpoint written before layer options were one dict
    legacy = {k: v for k, v in flat.items() if k != "layer_options"}
    assert TrainConfig.from_dict(dict(legacy, heads=3, cheb_k=5)).model.layer_options == {"heads": 3}
    info = ModelInfo(num_types=4, feature_dim=6, vocabulary=list("abcd"))
    assert ModelInfo.from_dict(info.to_dict()) == info
    stats = Normalization(target_mean=1.0, target_std=2.0, feature_mean=[0.0], feature_std=[1.0])
    assert set(stats.to_dict()) == {"target_mean", "target_std", "feature_mean", "feature_std"}


# ---------------------------------------------------------------- vocabulary
def test_node_types_map_into_the_models_vocabulary_by_name(synthetic_samples):
    samples = synthetic_samples[:4]
    trained = ModelInfo(num_types=3, feature_dim=samples[0].node_features.shape[1], vocabulary=["A", "B", "C"])
    # the data's extractor numbers the same types differently, and knows one the model does not
    data_vocab = ["C", "A", "X", "B", "D", "E", "F", "G"]
    source = SampleSource(samples, trained, collection=CollectionInfo(vocabulary=data_vocab))
    items = source.items(BatchSpec())
    expect = {0: 2, 1: 0, 2: 3, 3: 1}  # C→2, A→0, X→unknown (3), B→1; the rest unknown
    for s, it in zip(samples, items):
        assert it.types.tolist() == [expect.get(int(t), 3) for t in s.node_types]
    # the same vocabulary: ids kept
    same = SampleSource(samples, ModelInfo(num_types=8, feature_dim=trained.feature_dim, vocabulary=data_vocab),
                        collection=CollectionInfo(vocabulary=data_vocab))
    assert same.items(BatchSpec())[0].types.tolist() == samples[0].node_types.tolist()


def test_the_checkpoint_keeps_the_datas_vocabulary(synthetic_samples):
    source = SampleSource(synthetic_samples)
    assert source.info.vocabulary == source.collection.vocabulary
    assert source.info.num_types == (len(source.info.vocabulary) if source.info.vocabulary
                                     else int(max(s.node_types.max() for s in synthetic_samples)) + 1)


def test_the_lazy_source_follows_the_protocol(tmp_path):
    from simulator.data.synthetic import write_tpugraphs_collection
    from simulator.data.tpugraphs import TpuGraphsData
    write_tpugraphs_collection(str(tmp_path), "tile:xla", graphs=(3, 1, 1), seed=0)
    config = make_config(data=["tpugraphs:tile:xla"], data_root=str(tmp_path))
    kind = TpuGraphsData()
    config = kind.resolve(config, set())
    data = kind.open_run(config, None)
    assert all(isinstance(source, Source) for source in data.parts.values())
    train = data.parts["train"]
    assert train.groups is None and data.info.config_dim == 24 and data.info.tpugraphs["kind"] == "tile"
    assert data.info.vocabulary and data.info.num_types == len(data.info.vocabulary)  # the HLO opcode table
    model = build_cost_model(config, data.info)
    model.set_normalization(train.normalization(model.batch_spec, 0))
    batch = train.batch([0, 1], np.random.default_rng(0), model.batch_spec)
    drawn = sum(min(config.data.configs_per_graph, len(train.measured(i))) for i in (0, 1))
    assert batch.graph.batch_size == len(batch.y) == drawn   # early join: one graph copy per config
    scored = dict(train.score(model, 64))
    assert sorted(scored) == [0, 1, 2] and all(len(p) == f.num_configs for p, f in zip(scored.values(), train.files))


def test_vocabulary_comes_from_the_collection_and_maps_other_data_on_load(tmp_path, synthetic_samples):
    """A run keeps its collection's vocabulary; data from an extractor that numbers the same
    node types differently is mapped by name, so the model predicts the same."""
    import dataclasses

    from extract.sample import ExtractorInfo, save_samples
    from simulator import train
    from simulator.data.collection import samples_and_info
    from simulator.data.synthetic import FEATURE_NAMES
    vocab = [f"t{i}" for i in range(8)]
    save_samples(str(tmp_path / "a.npz"), synthetic_samples,
                 extractor=ExtractorInfo("toy-v1", tuple(vocab), tuple(FEATURE_NAMES)))
    out = tmp_path / "run"
    assert train.main(["--data", str(tmp_path / "a.npz"), "--out", str(out), "--threads", "1", "--epochs", "1",
                       "--width", "8", "--depth", "1"]) == 0
    model = CostModel.load(str(out))
    assert model.info.vocabulary == vocab and model.info.num_types == 8 and model.info.extractor_version == "toy-v1"
    renumbered = [dataclasses.replace(s, node_types=7 - s.node_types) for s in synthetic_samples]
    (tmp_path / "b").mkdir()
    save_samples(str(tmp_path / "b" / "b.npz"), renumbered,
                 extractor=ExtractorInfo("toy-v2", tuple(vocab[::-1]), tuple(FEATURE_NAMES)))

    def source_of(path):
        samples, collection = samples_and_info(str(path))
        return SampleSource(samples, model.info, collection=collection)
    a, b = source_of(tmp_path / "a.npz"), source_of(tmp_path / "b")
    assert not np.array_equal(renumbered[0].node_types, synthetic_samples[0].node_types)
    assert np.array_equal(a.items(BatchSpec())[0].types, b.items(BatchSpec())[0].types)
    assert np.array_equal(model.predict(a), model.predict(b))
