"""Stable workload keys and operator kinds (extract.ms_workload), task tables (extract.ms_tasks)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _prim_funcs():
    """One small TE PrimFunc per operator kind."""
    from tvm import te, topi

    def pf(*tensors):
        return te.create_prim_func(list(tensors))

    x = te.placeholder((1, 16, 14, 14), name="x")
    w, dw, gw = (te.placeholder(s, name=n) for s, n in
                 [((32, 16, 3, 3), "w"), ((16, 1, 3, 3), "dw"), ((32, 4, 3, 3), "gw")])
    a, b = te.placeholder((8, 64), name="a"), te.placeholder((32, 64), name="b")
    ba, bb = te.placeholder((4, 8, 16), name="ba"), te.placeholder((4, 12, 16), name="bb")
    s, g, be = (te.placeholder(sh, name=n) for sh, n in [((4, 32), "s"), ((32,), "g"), ((32,), "be")])
    return {
        "conv2d": pf(x, w, topi.nn.relu(topi.nn.conv2d_nchw(x, w, 1, 1, 1))),
        "depthwise_conv2d": pf(x, dw, topi.nn.depthwise_conv2d_nchw(x, dw, 1, 1, 1)),
        "group_conv2d": pf(x, gw, topi.nn.group_conv2d_nchw(x, gw, 1, 1, 1, 4)),
        "pool": pf(x, topi.nn.pool2d(x, (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), "max", layout="NCHW")),
        "dense": pf(a, b, topi.nn.dense(a, b)),
        "batch_matmul": pf(ba, bb, topi.nn.batch_matmul(ba, bb)),
        "softmax": pf(s, topi.nn.softmax(s)),
        "layer_norm": pf(s, g, be, topi.nn.layer_norm(s, g, be, [1], 1e-5)),
        "elementwise": pf(s, topi.nn.relu(s)),
        "reduce": pf(s, topi.sum(s, axis=1)),
    }


@pytest.fixture(scope="module")
def target():
    from extract.ms_runner import host_target

    return host_target()


def test_operator_kinds(target):
    from extract.ms_workload import KINDS, operator_kind

    funcs = _prim_funcs()
    assert set(funcs) == set(KINDS)
    assert {kind: operator_kind(f) for kind, f in funcs.items()} == {k: k for k in funcs}


def test_key_parts_and_round_trip(target):
    from extract.ms_workload import describe, parse_workload_key, workload_key

    conv = _prim_funcs()["conv2d"]
    key = workload_key(conv, target)
    assert key.startswith("conv2d.pad-mac-relu.1x16x14x14_32x16x3x3_1x32x14x14.float32.llvm-")
    assert key.endswith("-1c")
    assert parse_workload_key(key) == describe(conv, target)
    # the chain tells a fused ReLU apart; the key does not depend on buffer or block names
    plain = workload_key(_prim_funcs()["depthwise_conv2d"], target)
    assert plain.split(".")[1] == "pad-mac"
    with pytest.raises(ValueError):
        parse_workload_key("conv2d_1x16")


def _bert_keys_in_subprocess():
    code = ("import json; from extract.ms_runner import host_target; "
            "from extract.ms_tasks import network_tasks; "
            "print(json.dumps([t.key for t in network_tasks('bert', host_target())]))")
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_bert_tasks_stable_across_extractions(target):
    from extract.ms_tasks import network_tasks

    tasks = network_tasks("bert", target)
    keys = [t.key for t in tasks]
    assert len(keys) == len(set(keys)) == 11
    assert _bert_keys_in_subprocess() == keys  # another process, same names in the same order
    kinds = {}
    for t in tasks:
        kinds[t.kind] = kinds.get(t.kind, 0) + 1
    assert kinds == {"dense": 4, "batch_matmul": 2, "softmax": 1, "layer_norm": 1, "elementwise": 3}
    weights = {t.key.split(".")[0] + "." + t.key.split(".")[2]: t.weight for t in tasks}
    assert weights["layer_norm.1x128x768_768_768_1x128x768"] == 2  # two LayerNorms per layer
    assert weights["dense.1x128x768_768x768_768_1x128x768"] == 3  # Q, K, V projections
    assert all(t.networks == {"bert": t.weight} for t in tasks)


def test_merge_keeps_every_origin_and_table_round_trip(tmp_path):
    from extract.ms_tasks import TaskInfo, load_tasks, merge_tasks, save_tasks, summary

    def task(key, net, weight):
        return TaskInfo(key, key.split(".")[0], [[1, 4]], "float32", 8.0, {net: weight},
                        {net: f"fused_{key[:4]}"}, "{}")

    merged = merge_tasks([[task("dense.mac.a", "bert", 3), task("softmax.x.b", "bert", 1)],
                          [task("dense.mac.a", "vit", 2)]])
    assert [t.key for t in merged] == ["dense.mac.a", "softmax.x.b"]
    assert merged[0].networks == {"bert": 3, "vit": 2} and merged[0].weight == 5
    assert set(merged[0].task_names) == {"bert", "vit"}
    assert summary(merged)["per_network"] == {"bert": 2, "vit": 1}
    save_tasks(str(tmp_path / "tasks.json"), merged, target_json="t")
    assert load_tasks(str(tmp_path / "tasks.json")) == merged
