"""docs/RELIABILITY.md, classes 1 and 8, XLA side: every numeric value the TpuGraphs npz reader and
the XLA converters load is checked. Non-finite features, negative or absurd runtimes and
normalizers, a runtime without a normalizer, a 0-node graph: refused with the file, the
array and the row, the same way by the whole-file reader and by every lazy/chunked read
the simulator uses (extract/xla/npz_format.py); bad runs of raw tuning records are counted
(extract/xla/convert_tuning.py); features an HLO module cannot have are refused
(extract/xla/hlo_graph.py)."""
from __future__ import annotations

import collections
import math
import re
import uuid
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extract.xla import convert_hlo as hlo, hlo_graph, proto, npz_format
from extract.xla.convert_tuning import read_raw
from extract.xla.npz_format import MAX_RUNTIME_NS, TpuGraphsFile

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
FLOAT32_MAX = float(np.finfo(np.float32).max)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("values")


def tile_arrays(rng: np.random.Generator, nodes: int, configs: int) -> dict:
    runtime = rng.integers(1_000, 10**9, size=configs)
    return {"node_feat": rng.normal(size=(nodes, 140)).astype(np.float32),
            "node_opcode": rng.integers(0, 121, size=nodes).astype(np.uint8),
            "edge_index": np.array([[i + 1, i] for i in range(nodes - 1)], np.int64).reshape(-1, 2),
            "config_feat": rng.integers(0, 64, size=(configs, 24)).astype(np.float32),
            "config_runtime": runtime.astype(np.int64),
            "config_runtime_normalizers": (runtime // 2 + 1).astype(np.int64)}


def layout_arrays(rng: np.random.Generator, nodes: int, configs: int, config_nodes: int) -> dict:
    config_nodes = min(config_nodes, nodes)
    return {"node_feat": rng.normal(size=(nodes, 140)).astype(np.float32),
            "node_opcode": rng.integers(0, 121, size=nodes).astype(np.int32),
            "edge_index": np.array([[i + 1, i] for i in range(nodes - 1)], np.int64).reshape(-1, 2),
            "node_config_ids": np.sort(rng.choice(nodes, config_nodes, replace=False)).astype(np.int64),
            "node_config_feat": rng.integers(-1, 6, size=(configs, config_nodes, 18)).astype(np.float32),
            "config_runtime": rng.integers(10**6, 10**9, size=configs).astype(np.int64)}


files = st.fixed_dictionaries({
    "kind": st.sampled_from(["tile", "layout"]), "seed": st.integers(0, 2**32 - 1),
    "nodes": st.integers(1, 9), "configs": st.integers(1, 9), "config_nodes": st.integers(1, 4),
    "compressed": st.booleans()})


def make_file(work: Path, spec: dict) -> dict:
    rng = np.random.default_rng(spec["seed"])
    if spec["kind"] == "tile":
        return tile_arrays(rng, spec["nodes"], spec["configs"])
    return layout_arrays(rng, spec["nodes"], spec["configs"], spec["config_nodes"])


def save(work: Path, arrays: dict, compressed: bool) -> Path:
    path = work / f"f{uuid.uuid4().hex[:12]}.npz"
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    return path


def message(call) -> str:
    with pytest.raises(ValueError) as info:
        call()
    text = str(info.value)
    assert "\n" not in text
    return text


# ---------------------------------------------------------------------------- features

@settings(max_examples=60, **SETTINGS)
@given(spec=files, where=st.sampled_from(["node_feat", "config"]),
       value=st.sampled_from([np.nan, np.inf, -np.inf]), position=st.data())
def test_non_finite_features_are_refused_by_every_read_path(work, spec, where, value, position):
    arrays = make_file(work, spec)
    key = where if where == "node_feat" else \
        ("config_feat" if spec["kind"] == "tile" else "node_config_feat")
    index = tuple(position.draw(st.integers(0, n - 1)) for n in arrays[key].shape)
    arrays[key][index] = value
    path = save(work, arrays, spec["compressed"])
    if key == "node_feat":
        at = f"node {index[0]}, feature {index[1]}"
    elif key == "config_feat":
        at = f"config {index[0]}, feature {index[1]}"
    else:
        at = f"config {index[0]}, configurable node {index[1]}, feature {index[2]}"
    expected = f"{path}: {key} has a non-finite value ({np.float32(value)}) at {at}"

    # The whole-file reader, the converters' writer and GraphSample building.
    assert message(lambda: npz_format.read_npz(path)) == expected
    assert message(lambda: npz_format.write_arrays(work / "out.npz", arrays)) == \
        expected.replace(str(path), str(work / "out.npz"))
    assert message(lambda: npz_format.sample_from_arrays(arrays, name="g", source="g")) == \
        expected.replace(str(path), "g")
    # Every lazy read that meets the value: what training, evaluation and prediction use.
    file = TpuGraphsFile(path)
    assert message(file.validate) == expected
    if key == "node_feat":
        assert message(file.graph_arrays) == expected
        assert message(lambda: file.sample([])) == expected
        file.config_arrays([0])  # the config rows are fine
    else:
        row = index[0]
        assert message(lambda: file.config_arrays([row])) == expected
        assert message(lambda: file.config_arrays([row, 0, row])) == expected
        chunk = position.draw(st.integers(1, spec["configs"] + 1))
        assert message(lambda: list(file.iter_config_chunks(chunk))) == expected
        assert message(lambda: list(file.iter_config_chunks(chunk, [key]))) == expected
        others = [r for r in range(spec["configs"]) if r != row]
        if others:
            assert file.config_arrays(others)[key].shape[0] == len(others)
        file.graph_arrays()  # the graph is fine


# ---------------------------------------------------------------------------- runtimes

faults = st.sampled_from(["negative runtime", "absurd runtime", "zero normalizer",
                          "negative normalizer", "absurd normalizer"])


@settings(max_examples=60, **SETTINGS)
@given(spec=files, fault=faults, amount=st.integers(1, 10**12), position=st.data())
def test_bad_runtimes_are_refused_alike_by_full_and_lazy_reads(work, spec, fault, amount, position):
    """A negative runtime or a zero normalizer is refused alike by the whole-file reader and
    by the lazy reads of training and prediction (never read as "unmeasured")."""
    if spec["kind"] == "layout" and "normalizer" in fault:
        spec = dict(spec, kind="tile")
    arrays = make_file(work, spec)
    row = position.draw(st.integers(0, spec["configs"] - 1))
    if fault == "negative runtime":
        arrays["config_runtime"][row] = -amount
        expected = f"config_runtime {row} is negative ({-amount})"
    elif fault == "absurd runtime":
        arrays["config_runtime"][row] = MAX_RUNTIME_NS + amount
        expected = f"config_runtime {row} is more than a day"
    elif fault == "zero normalizer":
        arrays["config_runtime_normalizers"][row] = 0
        expected = f"config {row} has a runtime but no positive config_runtime_normalizers entry"
    elif fault == "negative normalizer":
        arrays["config_runtime_normalizers"][row] = -amount
        expected = f"config_runtime_normalizers {row} is negative ({-amount})"
    else:
        arrays["config_runtime_normalizers"][row] = MAX_RUNTIME_NS + amount
        expected = f"config_runtime_normalizers {row} is more than a day"
    path = save(work, arrays, spec["compressed"])
    full = message(lambda: npz_format.read_npz(path))
    assert full.startswith(f"{path}: {expected}")

    file = TpuGraphsFile(path)  # headers only: opening is fine
    runtime_keys = [k for k in npz_format.RUNTIME_KEYS[file.kind]]
    lazy = [file.measured_configs,                                    # training's choice of configs
            lambda: file.config_arrays([row]),                        # a training step's rows
            lambda: file.runtimes(file.config_arrays([row])),
            lambda: file.config_arrays([row], keys=["config_runtime"]),  # normalizers come along
            lambda: list(file.iter_config_chunks(2, ["config_runtime"])),
            lambda: list(file.iter_config_chunks(spec["configs"])),
            lambda: file.runtimes({k: file.read(k) for k in runtime_keys}),  # evaluation's
            file.validate]
    for read in lazy:
        assert message(read) == full
    # The runtime rule itself refuses the rows (no NaN "unmeasured" for a bad runtime).
    rows = {k: arrays[k] for k in npz_format.CONFIG_KEYS[file.kind]}
    assert message(lambda: npz_format.config_runtimes(file.kind, rows)).endswith(
        full.split(": ", 1)[1])
    others = [r for r in range(spec["configs"]) if r != row]
    if others:
        assert np.isfinite(file.runtimes(file.config_arrays(others))).all()


def test_tile_runtimes_without_their_normalizers_are_an_error_not_unmeasured(work):
    arrays = tile_arrays(np.random.default_rng(0), 4, 5)
    path = save(work, arrays, False)
    file = TpuGraphsFile(path)
    rows = {"config_runtime": file.read("config_runtime", [1, 2])}
    assert "config_runtime_normalizers rows too" in message(lambda: file.runtimes(rows))
    # A file that has runtimes but no normalizer array at all.
    no_normalizers = {k: v for k, v in arrays.items() if k != "config_runtime_normalizers"}
    path = save(work, no_normalizers, True)
    file = TpuGraphsFile(path)
    expected = f"{path}: config 0 has a runtime but no positive config_runtime_normalizers entry"
    assert message(lambda: npz_format.read_npz(path)) == expected
    assert message(file.measured_configs) == expected
    assert message(lambda: list(file.iter_config_chunks(3))) == expected
    # Unmeasured (0) and withheld runtimes are still NaN, not errors.
    arrays["config_runtime"][2] = 0
    arrays["config_runtime_normalizers"][2] = 0
    file = TpuGraphsFile(save(work, arrays, False))
    assert file.measured_configs().tolist() == [0, 1, 3, 4]
    assert np.isnan(file.runtimes(file.config_arrays([2]))).all()


# ---------------------------------------------------------------------------- shapes, dtypes

@pytest.mark.parametrize("kind", ["tile", "layout"])
def test_a_zero_node_graph_is_refused_naming_the_file(work, kind):
    rng = np.random.default_rng(1)
    arrays = tile_arrays(rng, 3, 2) if kind == "tile" else layout_arrays(rng, 3, 2, 1)
    arrays.update(node_feat=np.zeros((0, 140), np.float32), node_opcode=np.zeros(0, np.uint8),
                  edge_index=np.zeros((0, 2), np.int64))
    if kind == "layout":
        arrays.update(node_config_ids=np.zeros(0, np.int64),
                      node_config_feat=np.zeros((2, 0, 18), np.float32))
    path = save(work, arrays, True)
    expected = f"{path}: the graph has 0 nodes (node_opcode is empty)"
    assert message(lambda: TpuGraphsFile(path)) == expected
    assert message(lambda: npz_format.read_npz(path)) == expected
    assert message(lambda: npz_format.write_arrays(path, arrays)) == expected


def test_a_zero_node_hlo_module_is_refused_naming_the_file(work):
    module = proto.HloModuleProto(name="m", entry_computation_name="main")
    module.computations.add(name="main", id=1)
    path = work / "empty_module.pb"
    path.write_bytes(module.SerializeToString())
    assert str(path) in message(lambda: hlo_graph.read_hlo_module(path))
    assert "no instructions" in message(lambda: hlo_graph.read_hlo_module(path))
    assert message(lambda: hlo_graph.featurize_module(module, source=str(path))) == \
        f"{path}: its computations have no instructions"
    assert message(lambda: hlo_graph.featurize_module(proto.HloModuleProto(), "x.pb")) == \
        "x.pb: it has no computations"


def test_arrays_of_the_wrong_kind_or_size_are_refused_at_open(work):
    arrays = tile_arrays(np.random.default_rng(2), 4, 3)
    for key, bad, expected in [
            ("node_feat", arrays["node_feat"].astype(np.complex64), "node_feat has dtype complex64"),
            ("config_feat", arrays["config_feat"].astype("U3"), "config_feat has dtype <U3"),
            ("config_runtime", arrays["config_runtime"].astype(np.float64),
             "config_runtime has dtype float64, expected integers")]:
        path = save(work, dict(arrays, **{key: bad}), False)
        assert message(lambda: TpuGraphsFile(path)).startswith(f"{path}: {expected}")
    for opcode in (-1, 256):
        path = save(work, dict(arrays, node_opcode=np.array([1, 2, opcode, 3], np.int32)), True)
        assert message(lambda: TpuGraphsFile(path).graph_arrays()) == \
            f"{path}: node_opcode of node 2 is {opcode}, outside TpuGraphs' opcode ids 0..255"
    # A header that claims more data than the member holds: refused from the headers,
    # before anything is allocated (it would be 560 GB here).
    path = save(work, arrays, False)
    damaged = path.with_name("damaged_header.npz")
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(damaged, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "node_feat.npy":  # same header length: 8 padding spaces fewer
                assert b"(4, 140), }" + b" " * 8 in data
                data = data.replace(b"(4, 140), }" + b" " * 8, b"(999999999, 140), }")
            target.writestr(info, data)
    text = message(lambda: TpuGraphsFile(damaged))
    assert text.startswith(f"{damaged}: not a readable npz file") and "node_feat" in text
    assert "(999999999, 140)" in text


def test_chunks_of_no_rows_are_an_error(work):
    file = TpuGraphsFile(save(work, tile_arrays(np.random.default_rng(3), 3, 4), False))
    assert "at least 1" in message(lambda: list(file.iter_config_chunks(0)))


# ---------------------------------------------------------------------------- training

@pytest.mark.parametrize("fault", ["nan node_feat", "inf config_feat", "negative runtime",
                                   "zero normalizer"])
def test_training_stops_at_a_bad_value_naming_file_and_array(tmp_path, capsys, fault):
    """End to end: `simulator.train` on a collection with one bad file exits 2 naming it
    (a NaN node feature used to train to NaN weights and report a Kaggle score of 1.0)."""
    from simulator import train
    from simulator.data.synthetic import write_tpugraphs_collection
    root = tmp_path / "root"
    write_tpugraphs_collection(str(root), "tile:xla", graphs=(4, 2, 1), seed=0)
    victim = root / "npz/tile/xla/train/g2.npz"
    with np.load(victim) as z:
        arrays = dict(z)
    if fault == "nan node_feat":
        arrays["node_feat"][3, 7], expected = np.nan, "node_feat has a non-finite value (nan)"
    elif fault == "inf config_feat":
        arrays["config_feat"][5, 1], expected = np.inf, "config_feat has a non-finite value (inf)"
    elif fault == "negative runtime":
        arrays["config_runtime"][2], expected = -5, "config_runtime 2 is negative"
    else:
        arrays["config_runtime_normalizers"][4], expected = 0, "config 4 has a runtime but no"
    np.savez(victim, **arrays)
    code = train.main(["--data", "tpugraphs:tile:xla", "--data-root", str(root),
                       "--out", str(tmp_path / "run"), "--threads", "1", "--epochs", "1",
                       "--width", "8", "--depth", "1"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{victim}: {expected}" in err


# ---------------------------------------------------------------------------- HLO features

def module_with_shape(dimensions, window) -> object:
    module = proto.HloModuleProto(name="m", entry_computation_name="main", entry_computation_id=1)
    main = module.computations.add(name="main", id=1, root_id=2)
    parameter = main.instructions.add(name="p", opcode="parameter", id=1)
    parameter.shape.element_type = 11
    parameter.shape.dimensions.extend(dimensions)
    window_op = main.instructions.add(name="rw", opcode="reduce-window", id=2, operand_ids=[1])
    window_op.shape.element_type = 11
    for size in window:
        window_op.window.dimensions.add(size=size, stride=1)
    return module


int64s = st.one_of(st.integers(0, 64), st.integers(-2**63, 2**63 - 1))


@settings(max_examples=80, **SETTINGS)
@given(dimensions=st.lists(int64s, max_size=12), window=st.lists(int64s, max_size=12))
def test_hlo_features_are_finite_or_refused(dimensions, window):
    module = module_with_shape(dimensions, window)
    fits = all(abs(math.prod(v)) <= FLOAT32_MAX and abs(sum(v)) <= FLOAT32_MAX
               for v in (dimensions, window))
    if fits:
        graph = hlo_graph.featurize_module(module, source="m.pb")
        assert np.isfinite(graph.node_feat).all()
        return
    text = message(lambda: hlo_graph.featurize_module(module, source="m.pb"))
    assert re.fullmatch(r"m\.pb: instruction (p|rw) \(node [01]\) has \w+ -?[0-9…]+.*"
                        r"more than float32 holds \(not a plausible module\)", text), text


def test_hlo_cli_reports_an_implausible_module(tmp_path, capsys):
    path = tmp_path / "huge.pb"
    path.write_bytes(module_with_shape([2**62] * 20, []).SerializeToString())
    assert hlo.main([str(path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert f"{path}: instruction p (node 0) has shape_dimensions_product" in err
    assert not list((tmp_path / "out").rglob("*.npz"))


# ---------------------------------------------------------------------------- raw records

def kernel_module() -> object:
    module = proto.HloModuleProto(name="fusion.1", entry_computation_name="fusion.1",
                                  entry_computation_id=5)
    fused = module.computations.add(name="fused_computation", id=4, root_id=41)
    fused.instructions.add(name="fp", opcode="parameter", id=40).shape.element_type = 11
    fused.instructions.add(name="neg", opcode="negate", id=41, operand_ids=[40]).shape.element_type = 11
    entry = module.computations.add(name="fusion.1", id=5, root_id=51)
    entry.instructions.add(name="parameter.0", opcode="parameter", id=50).shape.element_type = 11
    entry.instructions.add(name="fusion.1", opcode="fusion", id=51, operand_ids=[50],
                           called_computation_ids=[4]).shape.element_type = 11
    return module


runs = st.lists(st.fixed_dictionaries({
    "error": st.sampled_from([False, False, False, True]),
    "profile": st.sampled_from([True, True, True, False]),
    "config": st.sampled_from([True, True, True, False]),
    "runtime": st.one_of(st.integers(2, 10**9), st.integers(-2**63, 2**63 - 1),
                         st.sampled_from([-1, 0, 1, 2, MAX_RUNTIME_NS, MAX_RUNTIME_NS + 1])),
    "bounds": st.lists(int64s, max_size=8)}), min_size=1, max_size=8)


def expected_reason(run: dict) -> str:
    """What the converter must do with one run (TpuGraphs' rules, then the value checks)."""
    runtime = run["runtime"]
    prod = math.prod(run["bounds"]) if run["bounds"] else 0
    return ("error" if run["error"] else "no_profile" if not run["profile"]
            else "no_config" if not run["config"] else "negative_runtime" if runtime < 0
            else "no_runtime" if runtime < 2 else "absurd_runtime" if runtime > MAX_RUNTIME_NS
            else "bad_config" if abs(prod) > FLOAT32_MAX else "")


@settings(max_examples=80, **SETTINGS)
@given(runs=runs)
def test_bad_runs_of_a_raw_tile_record_are_counted_not_kept(work, runs):
    tuning = proto.TuningData()
    record = tuning.modules.add()
    record.module.CopyFrom(kernel_module())
    for index, spec in enumerate(runs):
        run = record.runs.add(error=spec["error"], is_default=index == 0)
        if spec["profile"]:
            run.profile.SetInParent()
            run.profile.compute_time_ns = spec["runtime"]
        if spec["config"]:
            run.op_config.tile_size_config.SetInParent()
            run.op_config.tile_size_config.kernel_bounds.extend(spec["bounds"])
    path = work / f"raw{uuid.uuid4().hex[:8]}.pb"
    path.write_bytes(tuning.SerializeToString())
    reasons = [expected_reason(spec) for spec in runs]
    if reasons[0]:  # the default run is not usable: nothing to normalize by
        text = message(lambda: read_raw(path))
        assert text.startswith(f"{path}: modules[0] (fusion.1): no usable run is marked "
                               "is_default") or (  # no run has a config: not a tile record
            all(not spec["config"] for spec in runs) and text.startswith(f"{path}: not a ")
            and "modules[0]: no run has a op_config" in text), text
        return
    [sample] = read_raw(path)
    kept = [spec for spec, reason in zip(runs, reasons) if not reason]
    assert sample.meta.extra["raw_runs"] == len(runs)
    assert sample.meta.extra["skipped_runs"] == dict(collections.Counter(r for r in reasons if r))
    assert sample.num_configs == len(kept)
    assert np.isfinite(sample.config_features).all()
    assert sample.runtimes.tolist() == [spec["runtime"] / runs[0]["runtime"] for spec in kept]


def layout_record(tensors_per_node=(2,), runtimes=(100,), config_index_to_node=(1,)) -> object:
    record = proto.ModuleTuningData()
    record.module.CopyFrom(kernel_module())
    for index, runtime in enumerate(runtimes):
        run = record.runs.add(is_default=index == 0)
        run.profile.compute_time_ns = runtime
        layout = run.module_config.layout_config
        for tensors in tensors_per_node:
            node = layout.nodes.add()
            for _ in range(tensors):
                node.tensors.add().dims.extend([1, 0])
    record.config_index_to_node.extend(config_index_to_node)
    return record


def test_raw_layout_records_count_bad_runs_and_check_their_nodes(work):
    path = work / "layout.pb"
    path.write_bytes(layout_record(runtimes=(100, -3, 0, MAX_RUNTIME_NS + 1, 200)).SerializeToString())
    [sample] = read_raw(path)
    assert sample.meta.extra["skipped_runs"] == {"negative_runtime": 1, "no_runtime": 1,
                                           "absurd_runtime": 1}
    assert sample.runtimes.tolist() == [100e-9, 200e-9]
    record = layout_record(tensors_per_node=(4,), runtimes=(100, 200))
    record.runs[0].module_config.layout_config.nodes[0].ClearField("tensors")
    path.write_bytes(record.SerializeToString())
    [sample] = read_raw(path)
    assert sample.meta.extra["skipped_runs"] == {"bad_config": 1} and sample.num_configs == 1
    for bad, expected in [
            (layout_record(config_index_to_node=(2**64 - 1,)),
             "config_index_to_node names node 18446744073709551615, but the module has 4"),
            (layout_record(tensors_per_node=(1, 1), config_index_to_node=(1, 1)),
             "config_index_to_node lists node 1 twice"),
            (layout_record(runtimes=()), "the record has no runs"),
            (layout_record(config_index_to_node=()),
             "runs[0] configures 1 nodes, config_index_to_node lists 0 (a file cut short")]:
        path.write_bytes(bad.SerializeToString())
        assert message(lambda: read_raw(path)).startswith(f"{path}: {expected}")
