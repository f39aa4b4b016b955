"""Feature sets (`simulator.data.features`, `--features`): which node-feature columns a model
reads, taken from the samples by name, so that the context columns of tir-ast-v2 change
no existing model and a checkpoint trained on tir-ast-v1 reads tir-ast-v2 samples."""
import copy
import dataclasses
import os

import numpy as np
import pytest

from simulator.registry import SimulatorError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRETRAINED = os.path.join(ROOT, "datasets", "networks_rocketlake", "pretrained", "gcn.pt")


def _as_v1(samples, collection):
    """The samples and collection info cut to tir-ast-v1's 24 node-feature columns."""
    from simulator.data.collection import CollectionInfo

    cut = []
    for s in samples:
        s = copy.copy(s)
        s.node_features = np.ascontiguousarray(s.node_features[:, :24])
        cut.append(s)
    return cut, CollectionInfo(collection.vocabulary, collection.feature_names[:24], "tir-ast-v1")


def test_feature_sets_on_the_tir_extractor_columns():
    from extract.tir.context import CONTEXT_NAMES
    from extract.tir.graph import BASE_FEATURE_NAMES, FEATURE_NAMES
    from simulator.data.features import ABSOLUTE_COLUMNS, select_features

    assert select_features(FEATURE_NAMES, "base") == list(BASE_FEATURE_NAMES) and len(BASE_FEATURE_NAMES) == 24
    assert select_features(FEATURE_NAMES, "all") == list(FEATURE_NAMES)
    # full: every column, then every derived column the data can give (as `all,+…` names them)
    assert select_features(FEATURE_NAMES, "full") == list(FEATURE_NAMES) + ["acc_reg_fill", "acc_lane_share"]
    assert select_features(FEATURE_NAMES, "full") == select_features(FEATURE_NAMES, "all,+acc_reg_fill,+acc_lane_share")
    assert select_features(["a", "b"], "full") == ["a", "b"]  # nothing to derive from
    invariant = select_features(FEATURE_NAMES, "invariant")
    assert not set(invariant) & set(ABSOLUTE_COLUMNS) and set(CONTEXT_NAMES) <= set(invariant)
    assert select_features(FEATURE_NAMES, "base,+work_share,-depth") == \
        [n for n in FEATURE_NAMES if n in BASE_FEATURE_NAMES and n != "depth"] + ["work_share"]
    # other data (no context columns): base is every column
    assert select_features(["a", "b"], "base") == ["a", "b"]
    for bad, match in (("nope", "unknown feature set"), ("base,depth", r"\+COLUMN"), ("all,-nope", "no column"),
                       ("base,-a,-b", "no node-feature column")):
        with pytest.raises(SimulatorError, match=match):
            select_features(["a", "b"] if bad == "base,-a,-b" else FEATURE_NAMES, bad)


def test_models_default_feature_sets_and_validation():
    from simulator.train import build_parser, config_from_flags, validate

    def config(*argv):
        return validate(config_from_flags(vars(build_parser().parse_args(list(argv)))))
    assert config().model.features == "base"
    assert config("--model", "xgb").model.features == "base"
    assert config("--model", "gcn-inv").model.features == "invariant"
    assert config("--model", "gcn-inv", "--features", "all").model.features == "all"
    with pytest.raises(SimulatorError, match="unknown feature set"):
        config("--features", "everything")


def test_data_with_metaschedule_records_defaults_to_the_full_set(tmp_path):
    from simulator.data.sources import data_kind
    from simulator.train import resolve_argv

    networks, database = os.path.join(ROOT, "tests", "data", "networks_tiny"), os.path.join(ROOT, "tests", "data",
                                                                                               "ms_small", "random")
    empty = tmp_path / "empty"
    empty.mkdir()

    def features(*argv):
        return resolve_argv(list(argv))[2].model.features
    assert features("--data", networks) == features("--data", database) == "full"
    assert features("--data", networks, "shipped") == "full"   # records with other data beside them
    assert features("--data", os.path.join(ROOT, "tests", "data", "ms_small")) == "full"  # a folder of databases
    assert features("--data", networks, "--features", "base") == "base"
    assert features("--data", networks, "--model", "gcn-inv") == "invariant"  # a model's own set comes first
    assert features("--data", networks, "--model", "xgb") == "base"
    for other in ("shipped", str(empty), str(tmp_path / "missing")):
        assert data_kind([other]).resolve(resolve_argv(["--data", other, "--features", "base"])[2].replace(
            features=None), set()).model.features is None  # base, by validate, as before


@pytest.fixture(scope="module")
def shipped():
    from simulator.data.collection import samples_and_info
    samples, collection = samples_and_info("shipped")
    return samples[::700][:10], collection


def test_shipped_samples_hold_the_base_columns_then_the_context_columns(shipped):
    from extract.tir.graph import BASE_FEATURE_NAMES, EXTRACTOR_VERSION, FEATURE_NAMES
    from simulator.data.batching import BatchSpec
    from simulator.data.in_memory import SampleSource

    samples, collection = shipped
    assert collection.extractor == EXTRACTOR_VERSION == "tir-ast-v2" and collection.feature_names == list(FEATURE_NAMES)
    spec = BatchSpec(graph=True)
    base = SampleSource(samples, None, "none", collection)
    assert base.info.feature_names == list(BASE_FEATURE_NAMES) and base.info.feature_dim == 24
    every = SampleSource(samples, None, "none", collection, "all")
    assert every.info.feature_dim == 42
    for a, b, s in zip(base.items(spec), every.items(spec), samples):
        assert a.x.numpy().tobytes() == np.ascontiguousarray(s.node_features[:, :24]).tobytes()
        assert np.array_equal(b.x.numpy(), s.node_features)


def test_checkpoint_trained_on_tir_ast_v1_predicts_as_before(shipped):
    """datasets/networks_rocketlake/pretrained/gcn.pt (trained on tir-ast-v1's 24 columns) reads
    its columns from tir-ast-v2 samples by name: the predictions main made on the
    tir-ast-v1 shipped samples, and the same as on those samples cut to 24 columns."""
    from simulator.models.costmodel import CostModel
    from simulator.data.in_memory import SampleSource

    samples, collection = shipped
    model = CostModel.load(PRETRAINED)
    assert model.info.extractor_version == "tir-ast-v1" and model.info.feature_dim == 24
    pred = model.predict(SampleSource(samples, model.info, "none", collection))
    # made by main before tir-ast-v2 (5a4d86e) with this checkpoint on its tir-ast-v1 samples.npz
    on_main = {"C1/822": -4.420792579650879, "C10/482": -4.269318580627441, "C11/273": -2.703209638595581,
               "C8/338": -4.2594733238220215}
    got = dict(zip((s.name for s in samples), pred))
    for name, value in on_main.items():
        assert got[name] == pytest.approx(value, rel=1e-6, abs=1e-6), name
    cut, v1 = _as_v1(samples, collection)
    assert np.array_equal(model.predict(SampleSource(cut, model.info, "none", v1)), pred)


def test_a_model_reading_a_column_the_data_lacks_is_refused(shipped):
    from simulator.data.in_memory import SampleSource

    samples, collection = shipped
    info = SampleSource(samples, None, "none", collection, "all").info
    cut, v1 = _as_v1(samples, collection)
    with pytest.raises(SimulatorError, match="columns the data lacks: work_share"):
        SampleSource(cut, info, "none", v1)


def test_samples_naming_tir_ast_v1_get_its_column_names(shipped):
    """Samples saved by tir-ast-v1 (24 columns, meta extractor tir-ast-v1) are named as
    such, so that a model trained on them reads its columns from newer samples."""
    from extract.tir.graph import BASE_FEATURE_NAMES
    from simulator.data.collection import collection_info
    from simulator.data.in_memory import SampleSource

    samples, collection = shipped
    old = []
    for s in samples:
        s = copy.copy(s)
        s.node_features = np.ascontiguousarray(s.node_features[:, :24])
        s.meta = dataclasses.replace(s.meta, extractor="tir-ast-v1")
        old.append(s)
    info = collection_info(old)
    assert info.extractor == "tir-ast-v1" and info.feature_names == list(BASE_FEATURE_NAMES)
    model_info = SampleSource(old).info
    assert model_info.feature_names == list(BASE_FEATURE_NAMES)
    new = SampleSource(samples, model_info, "none", collection)
    assert new._columns.tolist() == list(range(24))


def test_derived_accumulator_register_fill_is_named_never_by_default():
    """acc_reg_fill is computed from `accumulate` and `buffer_bytes` (log2(1 + bytes)):
    log2(1 + bytes ÷ the register file's bytes) on accumulating stores, 0 elsewhere; no
    feature set reads it unless named; data lacking its inputs cannot give it."""
    from extract.tir.context import REGISTER_FILE_BYTES
    from extract.tir.graph import FEATURE_NAMES
    from simulator.data.features import select_features, with_derived

    assert "acc_reg_fill" not in select_features(FEATURE_NAMES, "all")
    assert select_features(FEATURE_NAMES, "invariant,+acc_reg_fill")[-1] == "acc_reg_fill"
    with pytest.raises(SimulatorError, match="no column 'acc_reg_fill'"):
        select_features(["a", "buffer_bytes"], "base,+acc_reg_fill")
    names = ["accumulate", "depth", "buffer_bytes"]
    x = np.array([[1, 3, np.log2(1 + REGISTER_FILE_BYTES / 2)], [0, 3, np.log2(1 + 64)],
                  [1, 2, np.log2(1 + 4 * REGISTER_FILE_BYTES)]], np.float32)
    out = with_derived(x, names, ["acc_reg_fill"])
    assert out.shape == (3, 4) and np.array_equal(out[:, :3], x)
    assert out[:, 3] == pytest.approx([np.log2(1.5), 0.0, np.log2(5.0)], rel=1e-5)


def test_shipped_accumulators_fill_of_the_register_file(shipped):
    """On the shipped x86 conv2d configs the derived column is the register tile's size:
    tile_oc × tile_ow × tile_oh float32 accumulators, against 16 × 32-byte registers; a
    model reading it takes it from data that lacks it, after save and load too."""
    from simulator.data.batching import BatchSpec
    from simulator.data.in_memory import SampleSource

    samples, collection = shipped
    source = SampleSource(samples, None, "none", collection, "invariant,+acc_reg_fill")
    assert source.info.feature_names[-1] == "acc_reg_fill"
    accumulate = collection.feature_names.index("accumulate")
    for item, s in zip(source.items(BatchSpec(graph=True)), samples):
        knobs = s.meta.config
        floats = knobs["tile_oc"][1] * knobs["tile_ow"][1] * knobs["tile_oh"]
        fill = item.x.numpy()[:, -1]
        stores = s.node_features[:, accumulate] > 0
        assert stores.sum() == 1 and fill[stores][0] == pytest.approx(np.log2(1 + 4 * floats / 512), rel=1e-4)
        assert np.all(fill[~stores] == 0)
    again = SampleSource(samples, source.info, "none", collection)
    assert all(np.array_equal(a.x.numpy(), b.x.numpy())
               for a, b in zip(source.items(BatchSpec(graph=True)), again.items(BatchSpec(graph=True))))


def test_derived_accumulator_lane_share_reads_the_enclosing_vectorized_loop():
    """acc_lane_share: on accumulating stores, one row's bytes (the nearest enclosing
    vectorized loop's vector_fill × 32 B, or one element where none is vectorized) ÷ the
    accumulator's bytes, at most 1; 0 elsewhere; the enclosing loop is found through the
    edges (not the parent only), and without edges it is refused."""
    from extract.tir.context import REGISTER_FILE_BYTES
    from simulator.data.features import DERIVED, derived_column, nearest_enclosing, select_features, with_derived

    assert "acc_lane_share" not in select_features(
        ["accumulate", "buffer_bytes", "dtype_bits", "kind_vectorized", "vector_fill"], "all")
    with pytest.raises(SimulatorError, match="no column 'acc_lane_share'"):
        select_features(["accumulate", "buffer_bytes", "dtype_bits"], "base,+acc_lane_share")
    names = ["accumulate", "buffer_bytes", "dtype_bits", "kind_vectorized", "vector_fill"]
    b = lambda nbytes: np.log2(1 + nbytes)  # noqa: E731
    # 0: vectorized loop (2 registers wide) ─ 1: if ─ 2: store, 7 rows of 64 B
    # 3: serial loop ─ 4: store of 3 floats, nothing vectorized above it
    # 5: vectorized loop (half a register) ─ 6: store of one row ─ 7: a load (not a store)
    x = np.array([[0, 0, 0, 1, 2.0], [0, 0, 0, 0, 0], [1, b(7 * 64), 32, 0, 0],
                  [0, 0, 0, 0, 0], [1, b(12), 32, 0, 0],
                  [0, 0, 0, 1, 0.5], [1, b(16), 32, 0, 0], [0, b(16), 32, 0, 0]], np.float32)
    edges = np.array([[0, 1], [1, 2], [3, 4], [5, 6], [6, 7]])
    assert nearest_enclosing(edges, x[:, 3] > 0).tolist() == [-1, 0, 0, -1, -1, -1, 5, 5]
    assert nearest_enclosing(edges, x[:, 3] > 0, np.array([6, 2])).tolist() == [5, 0]
    # computed on the gate's rows only (accumulating stores): the same values as on every row
    where = {n: i for i, n in enumerate(names)}
    for name in ("acc_lane_share", "acc_reg_fill"):
        assert np.array_equal(derived_column(DERIVED[name], x, where, edges),
                              derived_column(dataclasses.replace(DERIVED[name], gate=None), x, where, edges))
    out = with_derived(x, names, ["acc_lane_share"], edges)
    assert out.shape == (8, 6) and np.array_equal(out[:, :5], x)
    assert out[:, 5] == pytest.approx([0, 0, 1 / 7, 0, 1 / 3, 0, 1.0, 0], rel=1e-5)
    assert REGISTER_FILE_BYTES / 16 == 32
    with pytest.raises(SimulatorError, match="needs the sample's edges"):
        with_derived(x, names, ["acc_lane_share"])


def test_shipped_accumulators_lane_share_is_one_over_the_rows(shipped):
    """On the shipped x86 conv2d configs acc_lane_share is 1 ÷ (tile_ow × tile_oh): the
    accumulator's rows of tile_oc lanes, whatever tile_oc is (1 included: no vectorized loop)."""
    from simulator.data.batching import BatchSpec
    from simulator.data.in_memory import SampleSource

    samples, collection = shipped
    source = SampleSource(samples, None, "none", collection, "invariant,+acc_reg_fill,+acc_lane_share")
    assert source.info.feature_names[-2:] == ["acc_reg_fill", "acc_lane_share"]
    accumulate = collection.feature_names.index("accumulate")
    for item, s in zip(source.items(BatchSpec(graph=True)), samples):
        knobs = s.meta.config
        share = item.x.numpy()[:, -1]
        stores = s.node_features[:, accumulate] > 0
        assert share[stores][0] == pytest.approx(1 / (knobs["tile_ow"][1] * knobs["tile_oh"]), rel=1e-4)
        assert np.all(share[~stores] == 0)
