"""extract.xla.npz_format, extract.xla.convert_tuning, extract.tpugraphs: TpuGraphs npz
reader/writer, lazy access, raw protos, the command line, bad input."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import descriptor_pb2

from extract.sample import GraphSample
from extract.xla import proto, convert_tpugraphs as tpugraphs, npz_format
from extract.xla.convert_tuning import read_raw

from tpugraphs_raw import LAYOUT_PB, REPO, TILE_PB, needs_raw

SAMPLE_FIELDS = ("edges", "node_features", "node_types", "runtimes", "config_features",
                 "node_config_ids", "node_config_features")


def assert_same_sample(a: GraphSample, b: GraphSample) -> None:
    assert (a.name, a.group) == (b.name, b.group)
    for key in SAMPLE_FIELDS:
        x, y = getattr(a, key), getattr(b, key)
        assert (x is None) == (y is None), key
        if x is not None:
            assert x.dtype == y.dtype and x.shape == y.shape, key
            assert np.array_equal(x, y, equal_nan=True), key


def assert_same_arrays(path_a: Path, path_b: Path) -> None:
    with np.load(path_a) as a, np.load(path_b) as b:
        assert sorted(a.files) == sorted(b.files)
        for key in a.files:
            assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
            assert np.array_equal(a[key], b[key]), key


@pytest.fixture(scope="module")
def layout_sample():
    samples = read_raw(LAYOUT_PB)
    assert len(samples) == 1
    return samples[0]


@pytest.fixture(scope="module")
def tile_samples():
    return read_raw(TILE_PB)


# ---------------------------------------------------------------------------- protos

@pytest.mark.skipif(shutil.which("protoc") is None, reason="protoc not installed")
def test_python_descriptors_equal_protoc_output(tmp_path):
    """The descriptors extract/xla/proto builds are the compiled .proto files."""
    out = tmp_path / "set.pb"
    subprocess.run(["protoc", f"--descriptor_set_out={out}", "--include_imports",
                    "tpugraphs_tuning_minimal.proto"], cwd=REPO / "extract/xla/proto", check=True)
    compiled = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file

    def without_json_names(file):
        file = descriptor_pb2.FileDescriptorProto.FromString(file.SerializeToString())
        stack = list(file.message_type)
        while stack:
            message = stack.pop()
            for field in message.field:
                field.ClearField("json_name")
            stack.extend(message.nested_type)
        return file

    ours = proto.file_descriptors()
    assert [f.name for f in compiled] == [f.name for f in ours]
    for theirs, mine in zip(compiled, ours):
        assert without_json_names(theirs) == without_json_names(mine), theirs.name


@needs_raw
def test_raw_proto_counts():
    layout = proto.parse(proto.ModuleTuningData, LAYOUT_PB)
    assert layout.module.name == "main__.10904"
    assert sum(len(c.instructions) for c in layout.module.computations) == 3163
    assert len(layout.runs) == 122 and len(layout.config_index_to_node) == 62
    tuning = proto.parse(proto.TuningData, TILE_PB)
    assert len(tuning.modules) == 15 and sum(len(m.runs) for m in tuning.modules) == 754
    assert {m.module.name: len(m.runs) for m in tuning.modules}["fusion.191"] == 581


# ---------------------------------------------------------------------------- raw → samples

@needs_raw
def test_layout_sample_from_raw(layout_sample):
    s = layout_sample
    assert (s.name, s.num_nodes) == ("module_tuning_data_layout", 3163)
    assert s.node_features.shape == (3163, 140)
    # 122 runs: 10 flagged error (TpuGraphs drops them), 112 configs.
    assert s.meta.extra["raw_runs"] == 122 and s.meta.extra["skipped_runs"] == {"error": 10}
    assert s.num_configs == 112 and s.node_config_features.shape == (112, 62, 18)
    assert s.node_config_ids[:4].tolist() == [443, 461, 488, 652]
    # runs[0], the default: 910903932 ns; slot 4 (node 660, convolution.1043) has
    # tensors {4,0}, {4,0}, {4,3}, -1 padded.
    assert s.meta.extra["default_config_index"] == 0
    assert s.runtimes[0] == 910903932 / 1e9
    assert s.node_config_ids[4] == 660
    expected = [4, 0] + [-1] * 4 + [4, 0] + [-1] * 4 + [4, 3] + [-1] * 4
    assert s.node_config_features[0, 4].tolist() == expected
    # slot 0 (reshape.58) gets two empty tensor layouts: all -1.
    assert (s.node_config_features[0, 0] == -1).all()
    assert s.meta.extra["node_splits"][0] == 0 and s.meta.extra["node_splits"][-1] == 3163
    assert s.edges.shape[1] == 2 and s.edges.max() < 3163


@needs_raw
def test_tile_samples_from_raw(tile_samples):
    assert len(tile_samples) == 15
    runs = sum(s.meta.extra["raw_runs"] for s in tile_samples)
    kept = sum(s.num_configs for s in tile_samples)
    skipped = sum(sum(s.meta.extra["skipped_runs"].values()) for s in tile_samples)
    assert runs == 754 and kept + skipped == 754 and skipped == 2
    by_name = {s.name.removeprefix("op_tuning_data."): s for s in tile_samples}
    assert by_name["fusion.191"].num_configs == 579
    assert by_name["fusion.191"].meta.extra["skipped_runs"] == {"error": 2}
    s = by_name["fusion.232"]
    assert (s.num_nodes, s.num_configs) == (20, 61)
    # runs[0] is the default (57188 ns) with output_bounds 2,26,4,2 and no kernel bounds.
    assert s.meta.extra["default_config_index"] == 0
    assert s.meta.extra["runtime_normalizers_ns"] == [57188] * 61
    assert s.runtimes[0] == 1.0 and s.runtimes[1] == 126955 / 57188
    assert s.config_features[0].tolist() == ([0] * 8 + [2, 26, 4, 2, 0, 0, 34, 416] + [0] * 8)
    for sample in tile_samples:
        assert sample.runtimes[sample.meta.extra["default_config_index"]] == 1.0


# ---------------------------------------------------------------------------- npz

@needs_raw
def test_npz_round_trip_of_raw_samples(tmp_path, layout_sample, tile_samples):
    root = tmp_path / "npz"
    for sample in tile_samples:
        npz_format.write_npz(root / "tile/xla/train" / f"{sample.name}.npz", sample)
    npz_format.write_npz(root / "layout/xla/default/valid" / f"{layout_sample.name}.npz", layout_sample)
    files = npz_format.list_files(tmp_path, "tile:xla", "train")
    assert [f.stem for f in files] == sorted(s.name for s in tile_samples)
    for path, back in zip(files, npz_format.iter_collection(tmp_path, "tile:xla", "train")):
        original = next(s for s in tile_samples if s.name == path.stem)
        assert_same_sample(original, back)
        assert back.meta.extra["runtime_normalizers_ns"] == original.meta.extra["runtime_normalizers_ns"]
        assert back.meta.extra["collection"] == "tile:xla" and back.meta.extra["split"] == "train"
        # Writing what was read gives the same arrays, dtypes included.
        assert_same_arrays(path, npz_format.write_npz(tmp_path / "again.npz", back))
    [layout_path] = npz_format.list_files(root, "layout:xla:default", "valid")
    back = npz_format.read_npz(layout_path)
    assert_same_sample(layout_sample, back)
    assert back.meta.extra["node_splits"] == layout_sample.meta.extra["node_splits"]
    assert_same_arrays(layout_path, npz_format.write_npz(tmp_path / "again.npz", back))
    with np.load(layout_path) as z:
        assert z["node_opcode"].dtype == np.uint8 and z["edge_index"].dtype == np.int64
        # TpuGraphs' orientation: (u, v) = u consumes v, the reverse of GraphSample.edges.
        assert np.array_equal(z["edge_index"], layout_sample.edges[:, ::-1])


def synthetic_tile(rng, nodes=6, configs=5, dtypes=("u1", "i4")):
    opcode_dtype, edge_dtype = dtypes
    runtime = rng.integers(1_000, 10**12, size=configs)
    return {"node_feat": rng.normal(size=(nodes, 140)).astype(np.float32),
            "node_opcode": rng.integers(0, 121, size=nodes).astype(opcode_dtype),
            "edge_index": np.array([[i + 1, i] for i in range(nodes - 1)], dtype=edge_dtype),
            "config_feat": rng.integers(0, 64, size=(configs, 24)).astype(np.float32),
            "config_runtime": runtime.astype(np.int64),
            "config_runtime_normalizers": (runtime // 3 + 7).astype(np.int64)}


def synthetic_layout(rng, nodes=30, configs=40, config_nodes=4):
    return {"node_feat": rng.normal(size=(nodes, 140)).astype(np.float32),
            "node_opcode": rng.integers(0, 121, size=nodes).astype(np.int32),
            "edge_index": np.array([[i + 1, i] for i in range(nodes - 1)], dtype=np.int64),
            "node_config_ids": np.sort(rng.choice(nodes, config_nodes, replace=False)).astype(np.int64),
            "node_config_feat": rng.integers(-1, 6, size=(configs, config_nodes, 18)).astype(np.float32),
            "config_runtime": rng.integers(10**6, 10**9, size=configs).astype(np.int64),
            "node_splits": np.array([[0, 10, nodes]], dtype=np.int64)}


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed], ids=["stored", "deflated"])
def test_synthetic_collections_in_the_folder_layout(tmp_path, save):
    rng = np.random.default_rng(0)
    written = {}
    for collection, split, maker, names in [
            ("tile:xla", "valid", synthetic_tile, ["b_kernel", "a_kernel"]),
            ("layout:nlp:random", "test", synthetic_layout, ["bert"])]:
        folder = tmp_path / "npz" / Path(*collection.split(":")) / split
        folder.mkdir(parents=True)
        for name in names:
            written[name] = maker(rng)
            save(folder / f"{name}.npz", **written[name])
    assert [p.name for p in npz_format.list_files(tmp_path, "tile:xla", "valid")] == \
        ["a_kernel.npz", "b_kernel.npz"]
    assert npz_format.list_files(tmp_path / "npz", "layout:nlp:random", "test")[0].name == "bert.npz"
    assert npz_format.collection_dir(tmp_path, "layout:xla:default", "train") == \
        tmp_path / "npz/layout/xla/default/train"
    with pytest.raises(FileNotFoundError, match="layout/xla/default/train"):
        npz_format.list_files(tmp_path, "layout:xla:default", "train")
    with pytest.raises(ValueError, match="unknown TpuGraphs collection"):
        npz_format.list_files(tmp_path, "tile:nlp", "train")
    with pytest.raises(ValueError, match="unknown split"):
        npz_format.list_files(tmp_path, "tile:xla", "validation")

    tiles = list(npz_format.iter_collection(tmp_path, "tile:xla", "valid"))
    a = written["a_kernel"]
    assert tiles[0].name == "a_kernel" and tiles[0].num_configs == 5
    assert np.array_equal(tiles[0].edges, a["edge_index"][:, ::-1])
    assert np.array_equal(tiles[0].runtimes, a["config_runtime"] / a["config_runtime_normalizers"])
    assert tiles[0].node_types.tolist() == a["node_opcode"].tolist()
    # Exact rewrite, uint8 opcodes and int32 edges kept.
    source = npz_format.list_files(tmp_path, "tile:xla", "valid")[0]
    assert_same_arrays(source, npz_format.write_npz(tmp_path / "a.npz", tiles[0]))

    layout_path = npz_format.list_files(tmp_path, "layout:nlp:random", "test")[0]
    file = npz_format.TpuGraphsFile(layout_path)
    bert = written["bert"]
    assert (file.kind, file.num_nodes, file.num_configs, file.num_config_nodes) == ("layout", 30, 40, 4)
    full = file.sample()
    assert np.array_equal(full.runtimes, bert["config_runtime"] / 1e9)
    assert full.meta.extra["node_splits"] == [0, 10, 30]
    assert_same_arrays(layout_path, npz_format.write_npz(tmp_path / "bert.npz", full))  # (1, k) kept
    # Config subsets: any order, repeats allowed; rows equal the full arrays' rows.
    picked = [17, 3, 17, 39]
    part = file.sample(picked)
    assert np.array_equal(part.node_config_features, bert["node_config_feat"][picked])
    assert np.array_equal(part.runtimes, full.runtimes[picked])
    assert part.meta.extra["config_indices"] == picked
    subset = file.sample_configs(8, np.random.default_rng(1))
    assert subset.num_configs == 8 and subset.meta.extra["config_indices"] == sorted(subset.meta.extra["config_indices"])
    assert file.sample_configs(100).num_configs == 40
    assert np.array_equal(file.read("node_config_feat", [2]), bert["node_config_feat"][[2]])
    part.node_config_features[0, 0, 0] = 5  # arrays read are writable


def test_config_rows_are_read_without_loading_the_whole_array(tmp_path):
    rng = np.random.default_rng(0)
    arrays = synthetic_layout(rng, nodes=100, configs=4000, config_nodes=60)  # 17 MB of configs
    np.savez_compressed(tmp_path / "big.npz", **arrays)
    file = npz_format.TpuGraphsFile(tmp_path / "big.npz")
    tracemalloc.start()
    part = file.sample([3999, 0, 2500])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert np.array_equal(part.node_config_features, arrays["node_config_feat"][[3999, 0, 2500]])
    assert peak < arrays["node_config_feat"].nbytes / 4


def test_withheld_and_zero_runtimes(tmp_path):
    rng = np.random.default_rng(2)
    arrays = synthetic_tile(rng)
    arrays["config_runtime"][1] = 0  # an unmeasured config
    np.savez(tmp_path / "zero.npz", **arrays)
    sample = npz_format.read_npz(tmp_path / "zero.npz")
    assert np.isnan(sample.runtimes[1]) and np.isfinite(sample.runtimes[[0, 2, 3, 4]]).all()
    assert_same_arrays(tmp_path / "zero.npz", npz_format.write_npz(tmp_path / "zero2.npz", sample))
    # A test split without runtime arrays: NaN runtimes, and none written back.
    hidden = {k: v for k, v in arrays.items() if not k.startswith("config_runtime")}
    np.savez(tmp_path / "hidden.npz", **hidden)
    sample = npz_format.read_npz(tmp_path / "hidden.npz")
    assert sample.num_configs == 5 and np.isnan(sample.runtimes).all()
    assert_same_arrays(tmp_path / "hidden.npz", npz_format.write_npz(tmp_path / "hidden2.npz", sample))
    # A runtime without a normalizer cannot be normalized.
    arrays["config_runtime_normalizers"][3] = 0
    np.savez(tmp_path / "bad_normalizer.npz", **arrays)
    with pytest.raises(ValueError, match=r"bad_normalizer.npz: config 3 "):
        npz_format.read_npz(tmp_path / "bad_normalizer.npz")


def test_bad_npz_files_name_the_file(tmp_path):
    rng = np.random.default_rng(3)
    arrays = synthetic_layout(rng, configs=200)
    good = tmp_path / "good.npz"
    np.savez_compressed(good, **arrays)
    data = good.read_bytes()

    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"truncated\.npz: not a readable npz file"):
        npz_format.TpuGraphsFile(truncated)

    # Damage the compressed bytes of node_config_feat: the headers still read, the data not.
    with zipfile.ZipFile(good) as archive:
        info = archive.getinfo("node_config_feat.npy")
    corrupted = tmp_path / "corrupted.npz"
    damaged = bytearray(data)
    middle = info.header_offset + 30 + len(info.filename) + info.compress_size // 2
    damaged[middle:middle + 64] = bytes(64)
    corrupted.write_bytes(bytes(damaged))
    with pytest.raises(ValueError, match=r"corrupted\.npz.*node_config_feat"):
        npz_format.read_npz(corrupted)

    (tmp_path / "text.npz").write_text("not a zip")
    with pytest.raises(ValueError, match=r"text\.npz"):
        npz_format.TpuGraphsFile(tmp_path / "text.npz")
    incomplete = {k: v for k, v in arrays.items() if k != "node_config_ids"}
    np.savez(tmp_path / "incomplete.npz", **incomplete)
    with pytest.raises(ValueError, match=r"incomplete\.npz: TpuGraphs layout file lacks arrays \['node_config_ids'\]"):
        npz_format.TpuGraphsFile(tmp_path / "incomplete.npz")
    np.savez(tmp_path / "neither.npz", node_feat=arrays["node_feat"])
    with pytest.raises(ValueError, match=r"neither\.npz: neither a TpuGraphs tile file"):
        npz_format.TpuGraphsFile(tmp_path / "neither.npz")
    mismatched = dict(arrays, node_opcode=arrays["node_opcode"][:-1])
    np.savez(tmp_path / "mismatched.npz", **mismatched)
    with pytest.raises(ValueError, match=r"mismatched\.npz: inconsistent array shapes"):
        npz_format.TpuGraphsFile(tmp_path / "mismatched.npz")
    out_of_range = dict(arrays, edge_index=arrays["edge_index"] + 5)
    np.savez(tmp_path / "edges.npz", **out_of_range)
    with pytest.raises(ValueError, match=r"edges\.npz: edge_index refers to nodes outside"):
        npz_format.read_npz(tmp_path / "edges.npz")


def test_bad_raw_files_name_the_file(tmp_path, capsys):
    record = proto.ModuleTuningData()
    computation = record.module.computations.add(name="main", id=1, root_id=1)
    computation.instructions.add(name="p", opcode="parameter", id=1)
    record.runs.add(is_default=True).profile.compute_time_ns = 5
    record.runs[0].module_config.layout_config.nodes.add()
    record.config_index_to_node.append(0)
    data = record.SerializeToString()
    ok = tmp_path / "ok.pb"
    ok.write_bytes(data)
    [sample] = read_raw(ok)
    assert sample.num_configs == 1 and sample.node_config_features.shape == (1, 1, 18)
    truncated = tmp_path / "truncated.pb"
    truncated.write_bytes(data[:-3])
    with pytest.raises(ValueError, match=r"truncated\.pb"):
        read_raw(truncated)
    (tmp_path / "empty.pb").write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.pb"):
        read_raw(tmp_path / "empty.pb")
    record.config_index_to_node.append(0)  # two slots, but runs configure one node
    (tmp_path / "slots.pb").write_bytes(record.SerializeToString())
    with pytest.raises(ValueError, match=r"slots\.pb: runs\[0\] configures 1 nodes"):
        read_raw(tmp_path / "slots.pb")
    tuning = proto.TuningData()
    kernel = tuning.modules.add()
    kernel.module.CopyFrom(record.module)
    kernel.runs.add().op_config.tile_size_config.output_bounds.append(4)
    kernel.runs[0].profile.compute_time_ns = 100
    (tmp_path / "no_default.pb").write_bytes(tuning.SerializeToString())
    with pytest.raises(ValueError, match=r"no_default\.pb: modules\[0\].*is_default"):
        read_raw(tmp_path / "no_default.pb")
    assert tpugraphs.main(["convert", str(truncated), "--out", str(tmp_path / "out")]) == 1
    assert "truncated.pb" in capsys.readouterr().err


@needs_raw
def test_convert_cli(tmp_path):
    result = subprocess.run([sys.executable, "-m", "extract.tpugraphs", "convert", str(TILE_PB),
                             "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert len(list(tmp_path.glob("*.npz"))) == 15
    assert "runs left out: {'error': 2}" in result.stdout
    file = npz_format.TpuGraphsFile(tmp_path / "op_tuning_data.fusion.191.npz")
    assert (file.kind, file.num_configs, file.num_nodes) == ("tile", 579, 31)


def test_arrays_outside_the_format_are_listed_not_read(tmp_path, caplog):
    arrays = synthetic_tile(np.random.default_rng(4))
    np.savez(tmp_path / "extra.npz", argsort_config_runtime=np.arange(5), **arrays)
    with caplog.at_level("WARNING"):
        sample = npz_format.read_npz(tmp_path / "extra.npz")
    assert sample.meta.tpugraphs["ignored_arrays"] == ["argsort_config_runtime"]
    assert "extra.npz" in caplog.text and "argsort_config_runtime" in caplog.text


def _with_context(arrays):
    nc = arrays["node_config_ids"].shape[0]
    roles = np.full((nc, 18), -1, np.int8)
    roles[:, :2] = [3, 4]                       # left-free, right-free output dimensions
    return dict(arrays, node_config_roles=roles, node_config_default=arrays["node_config_feat"][0])


def test_the_configurable_nodes_roles_and_xlas_layouts_read_back_and_are_checked(tmp_path):
    arrays = _with_context(synthetic_layout(np.random.default_rng(5), configs=6))
    path = npz_format.write_arrays(tmp_path / "roles.npz", arrays)
    file = npz_format.TpuGraphsFile(path)
    graph = file.graph_arrays()
    assert graph["node_config_roles"].dtype == np.int8
    np.testing.assert_array_equal(graph["node_config_default"], arrays["node_config_default"])
    sample = npz_format.read_npz(path)
    assert "ignored_arrays" not in sample.meta.tpugraphs       # part of the format, not ignored
    again = npz_format.write_npz(tmp_path / "again.npz", sample)
    back = dict(np.load(again))
    for key in ("node_config_roles", "node_config_default"):
        np.testing.assert_array_equal(back[key], arrays[key])
        assert back[key].dtype == np.asarray(arrays[key]).dtype
    bad = {
        "alone": ({k: v for k, v in arrays.items() if k != "node_config_default"},
                  r"alone\.npz: has node_config_roles but not node_config_default"),
        "short": (dict(arrays, node_config_roles=arrays["node_config_roles"][:-1]),
                  r"short\.npz: .*node_config_roles .* vs node_config_ids"),
        "role": (dict(arrays, node_config_roles=np.where(arrays["node_config_roles"] == 4, 6,
                                                         arrays["node_config_roles"]).astype(np.int8)),
                 r"role\.npz: node_config_roles is 6 at configurable node 0, column 1; roles are -1\.\.5"),
        "nan": (dict(arrays, node_config_default=np.where(arrays["node_config_default"] == 0, np.nan,
                                                          arrays["node_config_default"]).astype(np.float32)),
                r"nan\.npz: node_config_default has a non-finite value \(nan\) at configurable node"),
    }
    for name, (broken, message) in bad.items():
        np.savez(tmp_path / f"{name}.npz", **broken)
        with pytest.raises(ValueError, match=message):
            npz_format.TpuGraphsFile(tmp_path / f"{name}.npz").graph_arrays()


def test_one_runtime_rule_for_samples_lazy_rows_and_chunks(tmp_path):
    rng = np.random.default_rng(5)
    tile = synthetic_tile(rng, configs=7)
    tile["config_runtime"][[1, 4]] = 0  # unmeasured
    np.savez(tmp_path / "tile.npz", **tile)
    np.savez(tmp_path / "layout.npz", **synthetic_layout(rng, configs=9))
    for name in ("tile", "layout"):
        file = npz_format.TpuGraphsFile(tmp_path / f"{name}.npz")
        whole = file.sample().runtimes
        assert np.array_equal(file.runtimes(file.config_arrays()), whole, equal_nan=True)
        chunks = [file.runtimes(rows) for _, rows in file.iter_config_chunks(2)]
        assert np.array_equal(np.concatenate(chunks), whole, equal_nan=True)
        assert file.measured_configs().tolist() == np.flatnonzero(np.isfinite(whole)).tolist()
    assert npz_format.TpuGraphsFile(tmp_path / "tile.npz").measured_configs().tolist() == [0, 2, 3, 5, 6]
    # Runtimes withheld: nothing measured, NaN runtimes.
    hidden = {k: v for k, v in tile.items() if not k.startswith("config_runtime")}
    np.savez(tmp_path / "hidden.npz", **hidden)
    file = npz_format.TpuGraphsFile(tmp_path / "hidden.npz")
    assert file.measured_configs().size == 0
    assert np.isnan(file.runtimes(file.config_arrays())).all()


def test_folder_layout_both_ways(tmp_path):
    for collection in npz_format.COLLECTIONS:
        for split in npz_format.SPLITS:
            folder = npz_format.collection_dir(tmp_path, collection, split)
            assert npz_format.collection_of_path(folder / "g.npz") == collection
        assert npz_format.kind_of(collection) == collection.split(":")[0]
    assert npz_format.collection_of_path(tmp_path / "xla/train/g.npz") is None
    assert npz_format.collection_of_path("g.npz") is None


def test_write_arrays_validates_and_writes_whole_files(tmp_path):
    arrays = synthetic_layout(np.random.default_rng(6))
    path = npz_format.write_arrays(tmp_path / "ok.npz", arrays)
    with np.load(path) as z:
        assert all(np.array_equal(z[k], v) and z[k].dtype == v.dtype for k, v in arrays.items())
    bad = dict(arrays, edge_index=arrays["edge_index"] + 100)
    with pytest.raises(ValueError, match=r"bad\.npz: edge_index refers to nodes outside"):
        npz_format.write_arrays(tmp_path / "bad.npz", bad)
    negative = dict(arrays, config_runtime=-arrays["config_runtime"])
    with pytest.raises(ValueError, match="config_runtime 0 is negative"):
        npz_format.write_arrays(tmp_path / "negative.npz", negative)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.npz"]  # nothing torn or left over
