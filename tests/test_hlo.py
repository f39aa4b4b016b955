"""extract.xla.hlo_graph / extract.hlo: TpuGraphs node features, opcodes, edges and kernels
of XLA HLO modules, and their npz files.

Feature values are checked by hand against instructions of the real TpuGraphs raw
sample (values read off `protoc --decode` of the file) and of small JAX functions.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from extract.xla import convert_hlo as hlo, hlo_graph, proto, npz_format

from tpugraphs_raw import LAYOUT_PB, REPO, TILE_PB, needs_raw

F = hlo_graph.NODE_FEATURE_INDEX


def features_of(graph: hlo_graph.HloGraph, node: int, prefix: str, width: int) -> list:
    """Features `prefix_0 … prefix_{width-1}` of one node, as ints."""
    return [int(graph.node_feat[node, F[f"{prefix}_{i}"]]) for i in range(width)]


@pytest.fixture(scope="module")
def layout_record():
    return proto.parse(proto.ModuleTuningData, LAYOUT_PB)


@pytest.fixture(scope="module")
def layout_graph(layout_record):
    return hlo_graph.featurize_module(layout_record.module, source=str(LAYOUT_PB))


@pytest.fixture(scope="module")
def node_of(layout_graph):
    return {name: i for i, name in enumerate(layout_graph.node_names)}


def test_feature_names_follow_the_tpugraphs_readme():
    names = hlo_graph.NODE_FEATURE_NAMES
    assert len(names) == 140 == len(set(names))
    expected = {0: "is_root", 1: "element_size_in_bits", 2: "shape_element_type_is_invalid_type",
                13: "shape_element_type_is_f32", 15: "shape_element_type_is_bf16",
                18: "shape_element_type_is_tuple", 20: "shape_element_type_is_token",
                21: "shape_dimensions_0", 27: "shape_dimensions_sum",
                28: "shape_dimensions_product", 29: "shape_tuple_shapes_size",
                30: "parameter_number", 31: "dimensions_0", 36: "dimensions_5",
                37: "window_size_0", 44: "window_size_product", 45: "window_stride_0",
                53: "window_padding_low_0", 61: "window_padding_high_0",
                69: "window_window_dilation_0", 77: "window_base_dilation_0",
                85: "window_window_reversal_0", 91: "window_window_reversal_true_count",
                92: "window_window_reversal_false_count",
                93: "convolution_dim_numbers_input_batch_dim",
                95: "convolution_dim_numbers_input_spatial_dims_0",
                99: "convolution_dim_numbers_kernel_input_feature_dim",
                101: "convolution_dim_numbers_kernel_spatial_dims_0",
                106: "convolution_dim_numbers_output_feature_dim", 107: "feature_group_count",
                108: "batch_group_count", 109: "slice_dims_start_0", 113: "slice_dims_stride_0",
                117: "slice_dims_limit_0", 120: "slice_dims_limit_product",
                121: "dynamic_slice_sizes_0", 124: "dynamic_slice_sizes_product",
                125: "padding_config_edge_padding_low_0",
                129: "padding_config_edge_padding_high_0", 132: "padding_config_edge_padding_high_product",
                133: "is_stable", 134: "layout_minor_to_major_0", 139: "layout_minor_to_major_5"}
    assert {i: names[i] for i in expected} == expected


@needs_raw
def test_every_instruction_is_one_node_in_proto_order(layout_record, layout_graph):
    instructions = [i for c in layout_record.module.computations for i in c.instructions]
    assert len(layout_record.module.computations) == 143
    assert layout_graph.num_nodes == len(instructions) == 3163
    assert layout_graph.node_names == [i.name for i in instructions]
    assert layout_graph.node_feat.shape == (3163, 140) and layout_graph.node_feat.dtype == np.float32
    assert not layout_graph.unknown_opcodes


@needs_raw
def test_convolution_features_by_hand(layout_graph, node_of):
    # convolution.1043: bf16[2,96,96,96,32]{4,3,2,1,0}, window size=3x3x3 stride 1 pad 1_1,
    # dim numbers: input feature 4, spatial 1,2,3; kernel in 3 / out 4, spatial 0,1,2;
    # output feature 4; batch dims 0 (absent); feature/batch group count 1.
    g, n = layout_graph, node_of["convolution.1043"]
    assert g.node_opcode[n] == hlo_graph.OPCODE_IDS["convolution"] == 26
    one_hot = g.node_feat[n, 2:21]
    assert one_hot.sum() == 1 and g.node_feat[n, F["shape_element_type_is_bf16"]] == 1
    assert features_of(g, n, "shape_dimensions", 6) == [2, 96, 96, 96, 32, 0]
    assert g.node_feat[n, F["shape_dimensions_sum"]] == 322
    assert g.node_feat[n, F["shape_dimensions_product"]] == 2 * 96 ** 3 * 32
    assert features_of(g, n, "window_size", 6) == [3, 3, 3, 0, 0, 0]
    assert (g.node_feat[n, F["window_size_sum"]], g.node_feat[n, F["window_size_product"]]) == (9, 27)
    assert features_of(g, n, "window_stride", 6) == [1, 1, 1, 0, 0, 0]
    assert features_of(g, n, "window_padding_low", 6) == [1, 1, 1, 0, 0, 0]
    assert features_of(g, n, "window_padding_high", 6) == [1, 1, 1, 0, 0, 0]
    assert g.node_feat[n, F["window_padding_high_product"]] == 1
    assert features_of(g, n, "window_window_dilation", 6) == [1, 1, 1, 0, 0, 0]
    assert features_of(g, n, "window_base_dilation", 6) == [1, 1, 1, 0, 0, 0]
    assert g.node_feat[n, F["window_window_reversal_true_count"]] == 0
    assert g.node_feat[n, F["window_window_reversal_false_count"]] == 3
    conv = "convolution_dim_numbers_"
    assert g.node_feat[n, F[conv + "input_batch_dim"]] == 0
    assert g.node_feat[n, F[conv + "input_feature_dim"]] == 4
    assert features_of(g, n, conv + "input_spatial_dims", 4) == [1, 2, 3, 0]
    assert g.node_feat[n, F[conv + "kernel_input_feature_dim"]] == 3
    assert g.node_feat[n, F[conv + "kernel_output_feature_dim"]] == 4
    assert features_of(g, n, conv + "kernel_spatial_dims", 4) == [0, 1, 2, 0]
    assert g.node_feat[n, F[conv + "output_batch_dim"]] == 0
    assert g.node_feat[n, F[conv + "output_feature_dim"]] == 4
    assert g.node_feat[n, F["feature_group_count"]] == g.node_feat[n, F["batch_group_count"]] == 1
    assert features_of(g, n, "layout_minor_to_major", 6) == [4, 3, 2, 1, 0, 0]
    assert g.node_feat[n, F["is_root"]] == 0


@needs_raw
def test_window_of_reduce_window_by_hand(layout_graph, node_of):
    # reduce-window: window sizes 1x2x2x2x1, strides 1,2,2,2,1, no padding.
    g, n = layout_graph, node_of["reduce-window"]
    assert features_of(g, n, "window_size", 6) == [1, 2, 2, 2, 1, 0]
    assert (g.node_feat[n, F["window_size_sum"]], g.node_feat[n, F["window_size_product"]]) == (8, 8)
    assert features_of(g, n, "window_stride", 6) == [1, 2, 2, 2, 1, 0]
    assert (g.node_feat[n, F["window_padding_low_sum"]], g.node_feat[n, F["window_padding_low_product"]]) == (0, 0)


@needs_raw
def test_reshape_broadcast_slice_sort_by_hand(layout_graph, node_of):
    g = layout_graph
    # reshape.58: u32[] (scalar): no dimensions, so sum 0 and product 1 (TpuGraphs' empty product).
    n = node_of["reshape.58"]
    assert g.node_opcode[n] == 75 and g.node_feat[n, F["shape_element_type_is_u32"]] == 1
    assert features_of(g, n, "shape_dimensions", 6) == [0] * 6
    assert (g.node_feat[n, F["shape_dimensions_sum"]], g.node_feat[n, F["shape_dimensions_product"]]) == (0, 1)
    # A non-window op: window products are 1, sums 0.
    assert g.node_feat[n, F["window_size_product"]] == 1 and g.node_feat[n, F["window_size_sum"]] == 0
    # broadcast.7586: f32[2,96,96,96,4], dimensions={0,1,2,3}
    n = node_of["broadcast.7586"]
    assert features_of(g, n, "dimensions", 6) == [0, 1, 2, 3, 0, 0]
    assert features_of(g, n, "shape_dimensions", 6) == [2, 96, 96, 96, 4, 0]
    # slice.2: pred[1], slice={[0:1:1]}
    n = node_of["slice.2"]
    assert features_of(g, n, "slice_dims_start", 2) == [0, 0]
    assert (g.node_feat[n, F["slice_dims_start_sum"]], g.node_feat[n, F["slice_dims_start_product"]]) == (0, 0)
    assert features_of(g, n, "slice_dims_stride", 2) == [1, 0]
    assert features_of(g, n, "slice_dims_limit", 2) == [1, 0]
    assert g.node_feat[n, F["slice_dims_limit_product"]] == 1
    # dynamic-slice: u32[1], dynamic_slice_sizes={1}
    n = node_of["dynamic-slice"]
    assert features_of(g, n, "dynamic_slice_sizes", 2) == [1, 0]
    assert g.node_feat[n, F["dynamic_slice_sizes_sum"]] == g.node_feat[n, F["dynamic_slice_sizes_product"]] == 1
    # sort: stable, returns a 3-tuple, dimensions={0}
    n = node_of["sort"]
    assert g.node_feat[n, F["is_stable"]] == 1
    assert g.node_feat[n, F["shape_element_type_is_tuple"]] == 1
    assert g.node_feat[n, F["shape_tuple_shapes_size"]] == 3
    assert g.node_feat[n, F["dimensions_0"]] == 0


@needs_raw
def test_roots_parameters_and_edges(layout_record, layout_graph, node_of):
    g = layout_graph
    module = layout_record.module
    entry = module.computations[-1]
    assert entry.name == module.entry_computation_name == "main__.10904"
    root = [i for i in entry.instructions if i.id == entry.root_id][0]
    assert g.node_feat[node_of[root.name], F["is_root"]] == 1
    # One root per computation.
    assert g.node_feat[:, F["is_root"]].sum() == 143
    parameters = [i for c in module.computations for i in c.instructions if i.opcode == "parameter"]
    for p in parameters[:50]:
        assert g.node_feat[node_of[p.name], F["parameter_number"]] == p.parameter_number
    # edge_index is (consumer, producer), as TpuGraphs stores it: the convolution consumes
    # its two operands.
    conv = node_of["convolution.1043"]
    producers = sorted(g.edge_index[g.edge_index[:, 0] == conv, 1])
    by_id = {i.id: i.name for c in module.computations for i in c.instructions}
    conv_proto = [i for i in entry.instructions if i.name == "convolution.1043"][0]
    assert producers == sorted(node_of[by_id[o]] for o in conv_proto.operand_ids)
    # Edge count: distinct operands plus called computations, over all instructions.
    expected = sum(len(set(i.operand_ids)) + len(set(i.called_computation_ids))
                   for c in module.computations for i in c.instructions)
    assert len(g.edge_index) == expected == len({tuple(e) for e in g.edge_index.tolist()})
    assert (np.diff(g.edge_index[:, 0]) >= 0).all()  # sorted by consumer, as TpuGraphs'
    # node_splits: after computations named *while*, *cond* or *cluster*, then the end.
    sizes = np.cumsum([len(c.instructions) for c in module.computations])
    marked = [int(sizes[k]) for k, c in enumerate(module.computations)
              if any(m in c.name for m in ("while", "cond", "cluster"))]
    assert g.node_splits.tolist() == [0] + marked + ([3163] if marked[-1] != 3163 else [])


@needs_raw
def test_kernel_extraction_reproduces_tpugraphs_kernels():
    """Each raw tile record is a kernel module TpuGraphs cut out; cutting it again gives
    the same graph (features, opcodes, edges) — parameters, ids, callees and all."""
    tuning = proto.parse(proto.TuningData, TILE_PB)
    assert len(tuning.modules) == 15
    for record in tuning.modules:
        kernels = hlo_graph.kernel_modules(record.module)
        assert [k.name for k in kernels] == [record.module.name]
        original = hlo_graph.featurize_module(record.module)
        again = hlo_graph.featurize_module(kernels[0])
        assert np.array_equal(original.node_feat, again.node_feat), record.module.name
        assert np.array_equal(original.node_opcode, again.node_opcode)
        assert np.array_equal(original.edge_index, again.edge_index)


def test_unknown_opcode_is_unk_and_counted(tmp_path, capsys):
    module = proto.HloModuleProto(name="m", entry_computation_name="main", entry_computation_id=1)
    main = module.computations.add(name="main", id=1, root_id=3)
    main.instructions.add(name="p", opcode="parameter", id=1).shape.element_type = 11
    main.instructions.add(name="e", opcode="erf", id=2, operand_ids=[1])
    main.instructions.add(name="t", opcode="ragged-dot", id=3, operand_ids=[2, 1, 1])
    graph = hlo_graph.featurize_module(module)
    assert graph.node_opcode.tolist() == [63, hlo_graph.UNKNOWN_OPCODE_ID, hlo_graph.UNKNOWN_OPCODE_ID]
    assert graph.unknown_opcodes == {"erf": 1, "ragged-dot": 1}
    # Producer → consumer in the GraphSample, (consumer, producer) in the npz; repeated
    # operands give one edge.
    assert graph.edge_index.tolist() == [[1, 0], [2, 0], [2, 1]]
    sample = hlo.module_graphs(module, kind="layout")[0].sample()
    assert sample.edges.tolist() == [[0, 1], [0, 2], [1, 2]]
    assert sample.meta.extra["unknown_opcodes"] == {"erf": 1, "ragged-dot": 1}
    path = tmp_path / "m.pb"
    path.write_bytes(module.SerializeToString())
    assert hlo.main([str(path), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "erf ×1" in err and "ragged-dot ×1" in err and "UNK" in err
    assert npz_format.read_npz(tmp_path / "out/layout/m.npz").node_types.tolist() == [63, 0, 0]


def test_bad_module_files_name_the_file(tmp_path, capsys):
    module = proto.HloModuleProto(name="m")
    main = module.computations.add(name="main", id=1, root_id=2)
    main.instructions.add(name="p", opcode="parameter", id=1)
    main.instructions.add(name="n", opcode="negate", id=2, operand_ids=[1])
    data = module.SerializeToString()
    truncated = tmp_path / "truncated.pb"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated.pb"):
        hlo_graph.read_hlo_module(truncated)
    garbage = tmp_path / "garbage.pb"
    garbage.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ValueError, match="garbage.pb"):
        hlo_graph.read_hlo_module(garbage)
    with pytest.raises(ValueError, match="missing.pb"):
        hlo_graph.read_hlo_module(tmp_path / "missing.pb")
    dangling = tmp_path / "dangling.pb"
    main.instructions[1].operand_ids.append(99)
    dangling.write_bytes(module.SerializeToString())
    with pytest.raises(ValueError, match=r"dangling.pb.*instruction n .*operand id 99"):
        hlo_graph.featurize_module(hlo_graph.read_hlo_module(dangling), source=str(dangling))
    assert hlo.main([str(truncated), "--out", str(tmp_path / "out")]) == 1
    assert "truncated.pb" in capsys.readouterr().err


# ---------------------------------------------------------------------------- JAX

@pytest.fixture(scope="module")
def jax_modules(tmp_path_factory):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def f(x, kernel, w):
        y = jax.lax.conv_general_dilated(x, kernel, (2, 1), [(1, 1), (0, 2)])
        z = jnp.tanh(y.reshape(y.shape[0], -1) @ w)
        return jnp.pad(z, ((1, 0), (0, 2))).sum(axis=0)

    args = (jnp.ones((2, 3, 8, 8)), jnp.ones((4, 3, 3, 3)), jnp.ones((4 * 4 * 8, 5)))
    lowered = jax.jit(f).lower(*args)
    folder = tmp_path_factory.mktemp("jax")
    pre = folder / "f.pb"
    pre.write_bytes(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto())
    post = folder / "f_compiled.pb"
    post.write_bytes(lowered.compile().runtime_executable().hlo_modules()[0]
                     .as_serialized_hlo_module_proto())
    return f, args, pre, post


def test_jax_pre_fusion_module_features(jax_modules):
    _, _, pre, _ = jax_modules
    module = hlo_graph.read_hlo_module(pre)
    graph = hlo_graph.featurize_module(module)
    instructions = [i for c in module.computations for i in c.instructions]
    assert graph.num_nodes == len(instructions)
    node = {i.opcode: k for k, i in enumerate(instructions)}
    # conv_general_dilated(window (2, 1) strides, padding (1, 1), (0, 2)) on NCHW/OIHW.
    c = node["convolution"]
    assert features_of(graph, c, "window_size", 2) == [3, 3]
    assert features_of(graph, c, "window_stride", 2) == [2, 1]
    assert features_of(graph, c, "window_padding_low", 2) == [1, 0]
    assert features_of(graph, c, "window_padding_high", 2) == [1, 2]
    assert graph.node_feat[c, F["convolution_dim_numbers_input_feature_dim"]] == 1
    assert features_of(graph, c, "convolution_dim_numbers_input_spatial_dims", 4) == [2, 3, 0, 0]
    assert graph.node_feat[c, F["convolution_dim_numbers_kernel_output_feature_dim"]] == 0
    assert graph.node_feat[c, F["convolution_dim_numbers_kernel_input_feature_dim"]] == 1
    # output: 8 rows stride 2 with padding 1+1 → 4; 8 cols padding 0+2 → 8
    assert features_of(graph, c, "shape_dimensions", 4) == [2, 4, 4, 8]
    # pad(z, ((1, 0), (0, 2))) of f32[2, 5]
    p = node["pad"]
    assert features_of(graph, p, "padding_config_edge_padding_low", 2) == [1, 0]
    assert features_of(graph, p, "padding_config_edge_padding_high", 2) == [0, 2]
    assert graph.node_feat[p, F["padding_config_edge_padding_high_sum"]] == 2
    assert graph.node_feat[p, F["padding_config_edge_padding_high_product"]] == 0
    assert features_of(graph, p, "shape_dimensions", 2) == [3, 7]
    # The reshape of the f32[2,4,4,8] convolution output to (2, 128).
    r = node["reshape"]
    assert features_of(graph, r, "shape_dimensions", 3) == [2, 128, 0]
    assert graph.node_feat[r, F["shape_dimensions_product"]] == 256
    assert graph.node_feat[r, F["shape_element_type_is_f32"]] == 1


def test_from_jax_and_cli(jax_modules, tmp_path):
    f, args, pre, post = jax_modules
    samples = hlo.from_jax(f, *args)
    layout, tiles = samples[0], samples[1:]
    assert layout.meta.tpugraphs["kind"] == "layout" and layout.num_configs == 0
    pre_module = hlo_graph.read_hlo_module(pre)
    assert layout.num_nodes == sum(len(c.instructions) for c in pre_module.computations)
    assert tiles and all(t.meta.tpugraphs["kind"] == "tile" for t in tiles)
    # A kernel's last node is its instruction: the root of the entry, fed by parameters.
    for tile in tiles:
        assert tile.node_features[-1, F["is_root"]] == 1
        producers = tile.edges[tile.edges[:, 1] == tile.num_nodes - 1, 0]
        fed_by_parameters = tile.node_types[producers] == hlo_graph.OPCODE_IDS["parameter"]
        assert fed_by_parameters.sum() >= 1
    # The CLI on the compiled module: layout + one tile file per kernel, read back equal.
    out = tmp_path / "out"
    assert hlo.main([str(post), "--out", str(out)]) == 0
    compiled = hlo_graph.read_hlo_module(post)
    written_tiles = sorted((out / "tile").glob("*.npz"))
    assert len(written_tiles) == len(hlo_graph.kernel_modules(compiled)) == len(tiles)
    whole = npz_format.read_npz(out / "layout" / "f_compiled.npz")
    assert whole.num_nodes == sum(len(c.instructions) for c in compiled.computations)
    again = hlo.module_graphs(compiled, kind="layout", source=str(post))[0].sample()
    assert np.array_equal(whole.node_features, again.node_features)
    assert np.array_equal(whole.edges, again.edges)
    # An HloProto (what --xla_dump_hlo_as_proto writes) wrapping the module reads the same.
    wrapped = tmp_path / "module_0000.jit_f.hlo.pb"
    wrapped.write_bytes(proto.HloProto(hlo_module=compiled).SerializeToString())
    assert hlo_graph.read_hlo_module(wrapped) == compiled
    # The pre-fusion module has no kernels; the CLI says so and writes the layout graph.
    result = subprocess.run([sys.executable, "-m", "extract.hlo", str(pre), "--out", str(out),
                             "--overwrite"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert (out / "layout" / "f.npz").exists() and "no fusion instructions" in result.stderr


def test_cli_writes_the_featurized_arrays_as_they_are(jax_modules, tmp_path):
    """The npz files hold the featurizer's arrays unchanged (edges consumer → producer);
    only a GraphSample reverses the edges."""
    _, _, _, post = jax_modules
    out = tmp_path / "out"
    assert hlo.main([str(post), "--out", str(out)]) == 0
    compiled = hlo_graph.read_hlo_module(post)
    graphs = hlo.module_graphs(compiled, source=str(post))
    assert [g.kind for g in graphs] == ["layout"] + ["tile"] * (len(graphs) - 1)
    layout = hlo_graph.featurize_module(compiled)
    for graph in graphs:
        with np.load(hlo.npz_path(out, "f_compiled", graph)) as z:
            assert sorted(z.files) == sorted(graph.arrays)
            for key, values in graph.arrays.items():
                assert z[key].dtype == values.dtype and np.array_equal(z[key], values), key
        assert np.array_equal(graph.sample().edges, graph.arrays["edge_index"][:, ::-1])
    assert np.array_equal(graphs[0].arrays["edge_index"], layout.edge_index)
    assert graphs[0].num_configs == 0 and "node_splits" in graphs[0].arrays
    assert all("node_splits" not in g.arrays for g in graphs[1:])
