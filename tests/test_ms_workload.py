"""Stable workload keys and operator kinds (extract.tir.workload_key), task tables (extract.metaschedule.tasks)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _conv(rank, groups, transposed, channels=8):
    """A TOPI convolution of `rank` spatial axes, grouped (`groups`), transposed or not."""
    from tvm import te, topi

    x = te.placeholder((1, channels, *{1: (12,), 2: (10, 10), 3: (6, 6, 6)}[rank]), name="x")
    kernel = (3,) * rank
    if transposed:
        w = te.placeholder((channels, channels // groups, *kernel), name="w")
        make = {1: topi.nn.group_conv1d_transpose_ncw, 2: topi.nn.group_conv2d_transpose_nchw,
                3: topi.nn.group_conv3d_transpose_ncdhw}[rank]
        out = make(x, w, (2,) * rank, (1,) * rank, "float32", (1,) * rank, groups)
    else:
        w = te.placeholder((channels, channels // groups, *kernel), name="w")
        if rank == 1:
            out = topi.nn.group_conv1d_ncw(x, w, 1, 1, 1, groups)
        elif rank == 2:
            out = (topi.nn.group_conv2d_nchw(x, w, 1, 1, 1, groups) if groups > 1
                   else topi.nn.conv2d_nchw(x, w, 1, 1, 1))
        else:
            out = topi.nn.conv3d_ncdhw(x, w, 1, 1, 1, groups)
    return te.create_prim_func([x, w, out])


def _conv_funcs():
    """Every convolution kind: rank 1–3 × plain/grouped/depthwise × direct/transposed."""
    return {f"{group}conv{rank}d{'_transpose' if t else ''}": _conv(rank, groups, t)
            for rank in (1, 2, 3) for group, groups in (("", 1), ("group_", 4), ("depthwise_", 8))
            for t in (False, True)}


def _prim_funcs():
    """One small TE PrimFunc per operator kind (several where a kind has several forms)."""
    from tvm import te, topi

    def pf(*tensors):
        return te.create_prim_func(list(tensors))

    x = te.placeholder((1, 16, 14, 14), name="x")
    a, b, bt = (te.placeholder(s, name=n) for s, n in [((8, 64), "a"), ((32, 64), "b"), ((64, 32), "bt")])
    ba, bb = te.placeholder((4, 8, 16), name="ba"), te.placeholder((4, 12, 16), name="bb")
    s, g, be = (te.placeholder(sh, name=n) for sh, n in [((4, 32), "s"), ((32,), "g"), ((32,), "be")])
    g16, b16 = te.placeholder((16,), name="g16"), te.placeholder((16,), name="b16")
    return {
        **{kind: [f] for kind, f in _conv_funcs().items()},
        "dense": [pf(a, b, topi.nn.dense(a, b)), pf(a, bt, topi.nn.matmul(a, bt))],
        "batch_matmul": [pf(ba, bb, topi.nn.batch_matmul(ba, bb))],
        "pool": [pf(x, topi.nn.pool2d(x, (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), "max", layout="NCHW")),
                 pf(x, topi.nn.global_pool(x, "avg", "NCHW")),
                 pf(x, topi.nn.adaptive_pool(x, (2, 2), "avg", "NCHW"))],
        "softmax": [pf(s, topi.nn.softmax(s))],
        "log_softmax": [pf(s, topi.nn.log_softmax(s))],
        "layer_norm": [pf(s, g, be, topi.nn.layer_norm(s, g, be, [1], 1e-5))],
        "rms_norm": [pf(s, g, topi.nn.rms_norm(s, g, [1], 1e-5))],
        "norm": [pf(x, g16, b16, topi.nn.group_norm(x, g16, b16, 4, 1, [2, 3], 1e-5)),
                 pf(x, g16, b16, topi.nn.instance_norm(x, g16, b16, 1, [2, 3], 1e-5))],
        "reduce": [pf(s, topi.sum(s, axis=1)), pf(s, topi.max(s, axis=1))],
        "elementwise": [pf(s, topi.nn.relu(s)), pf(s, topi.transpose(s))],
        "other": [pf(s, topi.argmax(s, axis=1))],
    }


@pytest.fixture(scope="module")
def target():
    from extract.metaschedule.runner import host_target

    return host_target()


def test_every_operator_kind_is_recognised_from_the_computation():
    from extract.tir.workload_key import KINDS, operator_kind

    funcs = _prim_funcs()
    assert set(funcs) == set(KINDS)
    assert {kind: [operator_kind(f) for f in fs] for kind, fs in funcs.items()} == \
        {kind: [kind] * len(fs) for kind, fs in funcs.items()}


def test_kind_does_not_come_from_block_names():
    """A 1-D convolution whose blocks TOPI names like a 2-D one's is still conv1d, and a
    depthwise convolution called "conv2d_nchw" is still depthwise."""
    from tvm import te, topi

    from extract.tir.workload_key import operator_kind

    x, w = te.placeholder((1, 8, 12), name="x"), te.placeholder((8, 8, 3), name="w")
    out = te.compute((1, 8, 10), lambda n, c, i: x[n, c, i], name="conv2d_nchw")
    k = te.reduce_axis((0, 3), name="k")
    conv1d = te.compute((1, 8, 10), lambda n, c, i: te.sum(x[n, c, i + k] * w[c, 0, k], axis=k),
                        name="conv2d_nchw")
    assert operator_kind(te.create_prim_func([x, w, conv1d])) == "depthwise_conv1d"
    assert operator_kind(te.create_prim_func([x, out])) == "elementwise"
    x2, w2 = te.placeholder((1, 8, 10, 10), name="x"), te.placeholder((16, 8, 3, 3), name="w")
    renamed = topi.nn.conv2d_nchw(x2, w2, 1, 1, 1)
    assert operator_kind(te.create_prim_func([x2, w2, renamed])) == "conv2d"


def _same_shape_pairs():
    """Pairs of different computations whose argument shapes and block chains agree."""
    from tvm import te, topi

    x, w = te.placeholder((1, 16, 14, 14), name="x"), te.placeholder((32, 16, 3, 3), name="w")
    padded_1 = te.create_prim_func([x, w, topi.nn.conv2d_nchw(x, w, 1, 1, 1)])
    dilated_2 = te.create_prim_func([x, w, topi.nn.conv2d_nchw(x, w, 1, 2, 2)])  # same output shape
    m = te.placeholder((16, 16), name="m")
    copied = te.create_prim_func([m, te.compute((16, 16), lambda i, j: m[i, j], name="T_copy")])
    transposed = te.create_prim_func([m, te.compute((16, 16), lambda i, j: m[j, i], name="T_copy")])
    return [(padded_1, dilated_2), (copied, transposed)]


def test_same_shapes_different_computation_get_distinct_keys(target):
    from extract.tir.workload_key import describe, parse_workload_key, workload_key

    for one, other in _same_shape_pairs():
        a, b = describe(one, target), describe(other, target)
        assert a.readable == b.readable and a.digest != b.digest
        assert workload_key(one, target) != workload_key(other, target)
        assert parse_workload_key(workload_key(one, target)) == a


def test_names_do_not_change_the_key(target):
    """The same computation with other buffer, block and function names: one key (records
    of one operator from two networks meet)."""
    from tvm import te, topi

    from extract.tir.workload_key import workload_key

    def conv(data, kernel, block):
        x, w = te.placeholder((1, 8, 10, 10), name=data), te.placeholder((16, 8, 3, 3), name=kernel)
        out = topi.nn.relu(topi.nn.conv2d_nchw(x, w, 1, 1, 1))
        func = te.create_prim_func([x, w, out])
        return func.with_attr("global_symbol", block)

    assert workload_key(conv("x", "w", "fused_conv2d_relu"), target) == \
        workload_key(conv("data", "weight", "fused_conv2d13_relu8"), target)


def test_key_parts_and_round_trip(target):
    from extract.tir.workload_key import describe, parse_workload_key, workload_key

    conv = _conv(2, 1, False)
    key = workload_key(conv, target)
    assert key.startswith("conv2d.pad-mac.1x8x10x10_8x8x3x3_1x8x10x10.float32.")
    assert key.endswith("-1c")
    assert parse_workload_key(key) == describe(conv, target)
    for bad in ("conv2d_1x16", "conv2d.mac.1x2.float32.llvm-rocketlake-1c",   # the old five-part form
                "conv2d.mac.1xA.float32.0123abcd.llvm-x-1c", "conv2d.mac.1x2.float32.xyz.llvm-x-1c"):
        with pytest.raises(ValueError):
            parse_workload_key(bad)


def _bert_keys_in_subprocess():
    code = ("import json; from extract.metaschedule.runner import host_target; "
            "from extract.metaschedule.tasks import network_tasks; "
            "print(json.dumps([t.key for t in network_tasks('bert', host_target())]))")
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_bert_tasks_stable_across_extractions(target):
    from extract.metaschedule.tasks import network_tasks

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
    from extract.metaschedule.tasks import TaskInfo, load_tasks, merge_tasks, save_tasks, summary

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


def _database_of(folder, funcs, target, records_each=3):
    """A MetaSchedule JSONDatabase holding `records_each` records of every PrimFunc in
    `funcs`: each a real schedule (the innermost loop split by a different factor), with
    made-up run times (only grouping is tested)."""
    import tvm
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms

    os.makedirs(folder, exist_ok=True)
    db = ms.database.JSONDatabase(os.path.join(folder, "database_workload.json"),
                                  os.path.join(folder, "database_tuning_record.json"))
    for n, func in enumerate(funcs):
        mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
        workload = db.commit_workload(mod)
        for r in range(records_each):
            sch = s_tir.Schedule(mod)
            loops = sch.get_loops(sch.get_sblock(_last_block(func)))
            sch.split(loops[-1], [None, [1, 2, 4][r % 3]])
            db.commit_tuning_record(ms.database.TuningRecord(
                sch.trace, workload, [1e-3 * (n + 1) * (r + 1)], target,
                ms.arg_info.ArgInfo.from_prim_func(func)))
    return folder


def _last_block(func):
    from extract.tir.workload_key import blocks_of

    return blocks_of(func)[-1].name


def test_same_shape_programs_are_separate_groups_in_every_reader(tmp_path, target):
    """Through the database reader, `datasets.load_collection` (what `simulator.train --data`
    reads) and the `extract.tvm_log` report: two groups, and the report says the two share a
    readable name."""
    from datasets import load_collection
    from extract.metaschedule.database import read_databases
    from extract.tir.workload_key import parse_workload_key
    from extract.tvm_log import LogReport

    (one, other), _ = _same_shape_pairs()
    folder = _database_of(str(tmp_path / "db"), [one, other], target)
    report = LogReport()
    jobs, _ = read_databases([folder], report=report)
    groups = sorted({job.group for job in jobs})
    assert len(groups) == 2 and len({parse_workload_key(g).readable for g in groups}) == 1
    collection = load_collection([folder], cache=str(tmp_path / "cache"), progress=False)
    assert sorted({s.group for s in collection.samples}) == groups
    assert [len([s for s in collection.samples if s.group == g]) for g in groups] == [3, 3]
    out = subprocess.run([sys.executable, "-m", "extract.tvm_log", folder, "--out", str(tmp_path / "out")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "different computations share the name" in out.stdout + out.stderr
    assert all(g in out.stdout + out.stderr for g in groups)
