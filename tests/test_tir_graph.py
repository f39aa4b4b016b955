"""TIR → graph: a known small schedule gives the expected nodes, edges and features."""
from collections import Counter

import numpy as np
import pytest

from extract.autotvm.templates import Conv2dWorkload, get_template
from extract.tir.graph import (
    COLUMN, CURVE_NAMES, FEATURE_NAMES, TYPE_ID, VOCABULARY, linear_coefficients, lower_for_features,
    tir_to_graph,
)

TINY = Conv2dWorkload(1, 4, 6, 6, 8, 3, 3, 1, 1)
TINY_CONFIG = {"tile_ic": [-1, 2], "tile_oc": [-1, 4], "tile_ow": [-1, 3], "unroll_kw": True,
               "tile_oh": 1, "unroll_ow": True}


@pytest.fixture(scope="module")
def tiny_graph():
    template = get_template("conv2d_NCHWc.x86")
    space = template.space(TINY)
    config = space.get(space.index_of(TINY_CONFIG))
    return tir_to_graph(lower_for_features(template.schedule(TINY, config).mod)["main"])


def test_node_types_and_counts(tiny_graph):
    counts = Counter(VOCABULARY[t] for t in tiny_graph.node_types)
    # data packing: parallel(b·cc·h) > w > cb; kernel packing: parallel(oc·kh) > ic > kw >
    # icb > vectorized ocb; conv: parallel > ow_chunk > [init: unrolled ow_b > vec ocb]
    # [update: ic_chunk > kh > ic_block > unrolled kw > unrolled ow_b > vec ocb]
    # [write-back: ow_b > vec ocb]; unpack: w_0 > w_1 > vec oc_1
    assert counts == {
        "PrimFunc": 1, "Allocate": 4,
        "For.parallel": 3, "For.serial": 12, "For.unrolled": 3, "For.vectorized": 5,
        "BufferStore": 6, "BufferLoad": 7, "Add": 1, "Mul": 1, "Call": 1,
    }
    assert not tiny_graph.unknown


def test_edges_form_a_tree_from_the_root(tiny_graph):
    n = len(tiny_graph.node_types)
    edges = tiny_graph.edges
    assert edges.shape == (n - 1, 2)
    assert tiny_graph.node_types[0] == TYPE_ID["PrimFunc"]
    # every node but the root has exactly one parent, and parents come first (pre-order)
    assert sorted(edges[:, 1].tolist()) == list(range(1, n))
    assert (edges[:, 0] < edges[:, 1]).all()


def test_feature_width_and_log_scaling(tiny_graph):
    f = tiny_graph.node_features
    assert f.shape == (len(tiny_graph.node_types), len(FEATURE_NAMES))
    loops = [i for i, t in enumerate(tiny_graph.node_types) if VOCABULARY[t].startswith("For.")]
    extents = sorted(round(2 ** f[i, COLUMN["loop_extent"]] - 1) for i in loops)
    # extents of the 23 loops listed in test_node_types_and_counts
    assert extents == sorted([16, 8, 2, 6, 2, 3, 2, 4, 12, 2, 3, 4, 2, 3, 2, 3, 3, 4, 3, 4, 2, 3, 4])


def test_reduction_update_access_features(tiny_graph):
    f, types = tiny_graph.node_features, tiny_graph.node_types
    stores = [i for i, t in enumerate(types) if t == TYPE_ID["BufferStore"]]
    accumulate = [i for i in stores if f[i, COLUMN["accumulate"]] == 1]
    assert len(accumulate) == 1  # conv_global[...] = conv_global[...] + a * b
    update = accumulate[0]
    assert f[update, COLUMN["depth"]] == 8  # parallel, ow_chunk, ic_chunk, kh, ic_block, kw, ow_b, ocb
    # accumulator: 3 (ow_b) × 4 (ocb) floats, innermost loop ocb walks it with stride 1
    assert f[update, COLUMN["stride_innermost"]] == pytest.approx(np.log2(2))
    assert f[update, COLUMN["bytes_touched"]] == pytest.approx(np.log2(1 + 3 * 4 * 4))
    assert f[update, COLUMN["scope_global"]] == 1
    # loads under the update: the accumulator, data_vec (invariant in ocb) and kernel_vec
    children = tiny_graph.edges[tiny_graph.edges[:, 0] == update + 1, 1]  # the Add's operands
    strides = sorted(f[c, COLUMN["stride_innermost"]] for c in children if types[c] == TYPE_ID["BufferLoad"])
    assert strides == [pytest.approx(np.log2(2))]  # only the accumulator; then Mul's loads
    mul = [c for c in children if types[c] == TYPE_ID["Mul"]][0]
    loads = tiny_graph.edges[tiny_graph.edges[:, 0] == mul, 1]
    innermost = sorted(float(f[c, COLUMN["stride_innermost"]]) for c in loads)
    assert innermost == [0.0, pytest.approx(1.0)]  # data_vec reused across ocb; kernel_vec stride 1


def test_curve_vector(tiny_graph):
    assert tiny_graph.curve.shape == (len(CURVE_NAMES),)
    assert np.isfinite(tiny_graph.curve).all() and tiny_graph.curve.max() > 0


def test_linear_coefficients_of_tiled_index():
    from tvm import tirx

    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    coefficients = linear_coefficients(i * 64 + tirx.floordiv(j, 4) * 8 + tirx.floormod(j, 4))
    assert coefficients[i] == 64 and coefficients[j] == pytest.approx(8 / 4 + 1)


def test_unknown_node_kind_maps_to_unk_and_is_counted():
    from extract.tir.graph import UNK, _Builder

    builder = _Builder()
    root, _ = builder.add("PrimFunc", None)
    builder.add("SomeFutureStmt", root)
    assert builder.types[-1] == UNK and builder.unknown == {"SomeFutureStmt": 1}
