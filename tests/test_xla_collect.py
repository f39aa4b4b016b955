"""The measured XLA layout collection (extract/xla/collection/, `python -m extract.xla_collect`):
a tiny JAX program end to end into TpuGraphs layout npz, read back and trained on;
resume after a kill; one-line errors; the selection rule and the config sampling."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter

import numpy as np
import pytest

from extract.xla.hlo_graph import OPCODE_IDS
from extract.metaschedule.jsonl import read_jsonl
from extract.xla.npz_format import TpuGraphsFile, read_npz
from extract.xla.collection.collect import results
from extract.xla.collection.layouts import Candidate, Space, config_key, sample_configs
from extract.xla.collection.plan import (PlanSettings, distinct_configs, fill_space, remeasured, select_nodes,
                                         space_for)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_PROGRAM = '''
import jax.numpy as jnp

def mlp(w1, w2, x):
    h = jnp.tanh(x @ w1)
    return (h @ w2).reshape(-1, 8).T.sum(0)
'''
SHAPES = ["f32[64,64]", "f32[64,32]", "f32[16,64]"]
# core 0 is shared with other work here: CPU time, not wall time
BRIEF = ["--repeats", "2", "--min-repeat-ms", "2", "--max-probe", "4", "--remeasure", "0.5",
         "--clock", "cpu"]
NODE_OPCODES = {"parameter": "parameter", "dot_general": "dot", "reshape": "reshape",
                "transpose": "transpose"}


def collect_cli(tmp_path, *args, wait=True):
    """`python -m extract.xla_collect …` in a child (it pins its own process)."""
    (tmp_path / "tinyprog.py").write_text(textwrap.dedent(TINY_PROGRAM))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), REPO])}
    command = [sys.executable, "-m", "extract.xla_collect", *args]
    if not wait:
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def spare_core():
    """A core of this process's affinity besides the one it measures on (the last), or None."""
    cores = sorted(os.sched_getaffinity(0))
    return cores[0] if len(cores) > 1 else None


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    pytest.importorskip("jax")
    tmp = tmp_path_factory.mktemp("xla_collect")
    root = tmp / "root"
    helper = [] if spare_core() is None else ["--compile-core", str(spare_core())]  # as measured here
    done = collect_cli(tmp, "function", "tinyprog:mlp", "--shapes", *SHAPES, "--out", str(root),
                       "--configs", "3", *BRIEF, *helper)
    assert done.returncode == 0, done.stderr
    return root, done


def test_runs_per_repeat_are_calibrated_to_the_shortest_repeat(monkeypatch):
    """A repeat lasts at least --min-repeat-ms on the chosen clock, without overshooting it
    by much (the clock faked: a call of 0.3 ms wall, 0.1 ms CPU)."""
    from extract.xla.collection import measure

    monkeypatch.setattr(measure, "_repeat", lambda call, number: (number * 3e-4, number * 1e-4))
    for clock, per_call in ((0, 3e-4), (1, 1e-4)):
        number = measure._calibrate(lambda: None, 2.0, clock)
        assert 2e-3 <= number * per_call <= 2 * 2e-3


def test_function_is_measured_into_layout_npz(collection):
    root, done = collection
    plan = json.loads((root / "measurements/tinyprog.mlp.plan.json").read_text())
    rows = results(read_jsonl(str(root / "measurements/tinyprog.mlp.jsonl")))
    assert "1 of 1 programs measured" in done.stdout
    keys = list(dict.fromkeys(plan["configs"]["random"] + plan["configs"]["default"]))
    assert sorted(Counter((r["config"], r["pass"]) for r in rows).values()) == [1] * len(rows)
    assert {r["config"] for r in rows if r["pass"] == 1} == set(keys)
    assert {r["config"] for r in rows if r["pass"] == 2} == set(remeasured(keys, 0.5, 0))
    in_pass = Counter(r["pass"] for r in rows)
    for row in rows:
        assert len(row["repeats_s"]) == len(row["cpu_repeats_s"]) == 2 and row["clock"] == "cpu"
        assert row["runtime_s"] > 0 and row["min_s"] == min(row["cpu_repeats_s"])
        assert row["interleaved"] == in_pass[row["pass"]]  # a pass's configs timed in the same rounds
        assert row["number"] > 1   # a call of microseconds: calibrated to many per repeat (the rule: below)
    assert plan["configs"]["random"][0] == plan["configs"]["default"][0] == ""  # XLA's own
    assert read_jsonl(str(root / "reference.jsonl"))[0]["runtime_s"] > 0
    run = read_jsonl(str(root / "runs.jsonl"))[0]
    assert run["pinned"]["core"] in os.sched_getaffinity(0) and "--xla_cpu_multi_thread_eigen=false" \
        in run["pinned"]["xla_flags"] and run["machine"]["cpu"]
    assert run["machine"]["cpu_family_model"] is None or "/" in run["machine"]["cpu_family_model"]


def test_npz_reads_back_with_configurable_nodes_at_their_instructions(collection):
    root, _ = collection
    plan = json.loads((root / "measurements/tinyprog.mlp.plan.json").read_text())
    rows = {r["config"]: r for r in results(read_jsonl(str(root / "measurements/tinyprog.mlp.jsonl")))
            if r["pass"] == 1}
    candidates = {c["id"]: c for c in plan["candidates"]}
    for search in ("random", "default"):
        path = root / "npz/layout/xla" / search / "train/tinyprog.mlp.npz"
        file, sample = TpuGraphsFile(path), read_npz(path)
        assert file.kind == "layout" and file.num_configs == len(plan["configs"][search])
        expected = [rows[k]["runtime_s"] for k in plan["configs"][search]]
        np.testing.assert_allclose(sample.runtimes, expected, rtol=0, atol=0.6e-9)  # whole ns
        nodes = [candidates[i] for i in plan["nodes"]]
        assert list(sample.node_config_ids) == [c["node"] for c in nodes]
        for c, node in zip(nodes, sample.node_config_ids):
            assert sample.node_types[node] == OPCODE_IDS[NODE_OPCODES[c["kind"]]]
        features = sample.node_config_features
        for row, c in enumerate(nodes):  # config 0 = XLA's layouts, minor-to-major
            rank = len(c["shape"])
            assert list(features[0, row, :rank]) == list(reversed(c["default"]))
            assert (features[0, row, rank:6] == -1).all()
        if len(plan["configs"][search]) > 1:
            assert not np.array_equal(features[0], features[1])
        graph = file.graph_arrays()
        np.testing.assert_array_equal(graph["node_config_default"], features[0])
        for row, c in enumerate(nodes):   # x @ w1 and h @ w2: free and contracted dimensions
            expected = {"parameter": [0, 0] + [-1] * 16,
                        "dot_general": [3, 4, -1, -1, -1, -1, 3, 2, -1, -1, -1, -1, 2, 4, -1, -1, -1, -1]}
            if c["kind"] in expected:
                assert list(graph["node_config_roles"][row]) == expected[c["kind"]], c


def test_collection_trains_through_the_tpugraphs_source(collection, tmp_path):
    from simulator import train
    root, _ = collection
    source = root / "npz/layout/xla/random/train/tinyprog.mlp.npz"
    data = tmp_path / "data"
    for split in ("train", "valid", "test"):  # the one program stands in for each split
        folder = data / "npz/layout/xla/random" / split
        folder.mkdir(parents=True)
        (folder / f"tiny_{split}.npz").write_bytes(source.read_bytes())
    args = ["--data", "tpugraphs:layout:xla:random", "--data-root", str(data), "--out",
            str(tmp_path / "run"), "--threads", "1", "--epochs", "1", "--width", "8", "--depth", "1"]
    assert train.main(args) == 0
    metrics = json.loads((tmp_path / "run/metrics.json").read_text())
    assert "kendall_tau" in json.dumps(metrics["val"])


def test_a_shipped_collection_reads_as_its_root_and_is_not_measured_into(collection, tmp_path, capsys):
    import gzip
    from benchmarks.xla_layout import program_facts
    from extract.xla.collection.cli import main
    root, _ = collection
    out = tmp_path / "shipped"
    assert main(["ship", str(root), "--out", str(out)]) == 0
    assert main(["summary", str(root)]) == 0
    assert main(["summary", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2] == lines[-1] and "tinyprog.mlp: " in lines[-1]  # the same summary, read back
    assert program_facts(out, "tinyprog.mlp", "random") == program_facts(root, "tinyprog.mlp", "random")
    journal = results(read_jsonl(str(root / "measurements/tinyprog.mlp.jsonl")))
    shipped = read_jsonl(str(out / "measurements/tinyprog.mlp.jsonl.gz"))
    assert [r["runtime_s"] for r in shipped] == [r["runtime_s"] for r in journal]  # exact
    for mine, theirs in zip(shipped, journal):
        np.testing.assert_allclose(mine["repeats_s"], theirs["repeats_s"], rtol=5e-4)
    for search in ("random", "default"):
        name = f"npz/layout/xla/{search}/train/tinyprog.mlp.npz"
        assert (out / name).read_bytes() == (root / name).read_bytes()
    readme = (out / "README.md").read_text()
    assert "1 JAX programs" in readme and f"ship {root} --out {out}" in readme and lines[-1] in readme
    first = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert main(["ship", str(root), "--out", str(out)]) == 2
    assert "not empty (pass --overwrite" in capsys.readouterr().err
    (out / "measurements/tinyprog.mlp.jsonl").write_text("{}\n")   # an older shipping's journal
    assert main(["ship", str(root), "--out", str(out), "--overwrite"]) == 0
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == first  # deterministic, replaced
    assert gzip.decompress(first["tinyprog.mlp.jsonl.gz"])  # a plain gzip file
    assert main(["function", "tinyprog:mlp", "--shapes", *SHAPES, "--out", str(out), *BRIEF]) == 2
    assert "a shipped collection (measurements/*.jsonl.gz), not a collector's root" in capsys.readouterr().err
    assert main(["ship", str(out), "--out", str(tmp_path / "again")]) == 2       # not shipped twice
    assert "a shipped collection (measurements/*.jsonl.gz), not a collector's root" in capsys.readouterr().err


def test_older_npz_gain_the_roles_from_their_plans_without_measuring(collection, tmp_path, capsys, monkeypatch):
    from extract.xla.collection.cli import main
    from extract.xla.collection.collect import rewrite_npz
    from extract.xla.collection.functions import function_program
    from extract.xla.npz_format import LAYOUT_CONTEXT_KEYS
    root, _ = collection
    monkeypatch.syspath_prepend(str(root.parent))                  # tinyprog.py
    copy = tmp_path / "shipped"
    assert main(["ship", str(root), "--out", str(copy)]) == 0      # timings read from the shipped gzip
    files = sorted(copy.glob("npz/layout/xla/*/train/tinyprog.mlp.npz"))
    before = {f: dict(np.load(f)) for f in files}
    for f, arrays in before.items():                               # as written before the roles
        np.savez_compressed(f, **{k: v for k, v in arrays.items() if k not in LAYOUT_CONTEXT_KEYS})
    journal = sorted(p.name for p in copy.rglob("*.jsonl*"))
    program = function_program("tinyprog:mlp", SHAPES)
    assert rewrite_npz(copy, {"tinyprog.mlp": program}, say=lambda line: None) == 0
    for f, arrays in before.items():
        again = dict(np.load(f))
        assert sorted(again) == sorted(arrays)
        for key, value in arrays.items():
            np.testing.assert_array_equal(again[key], value)
    assert sorted(p.name for p in copy.rglob("*.jsonl*")) == journal   # nothing measured
    other = function_program("tinyprog:mlp", ["f32[64,64]", "f32[64,32]", "f32[8,64]"])
    said = []
    assert rewrite_npz(copy, {"tinyprog.mlp": other}, say=said.append) == 1
    assert "made for another version of program tinyprog.mlp" in said[0]
    assert main(["npz", str(copy)]) == 1                           # not a zoo program
    assert "tinyprog.mlp: not a program of the zoo" in capsys.readouterr().err
    assert main(["npz", str(copy), "--programs", "resnet.infer"]) == 2
    assert "no plan for resnet.infer; planned: tinyprog.mlp" in capsys.readouterr().err


def test_roles_say_what_each_dimension_is_to_dots_and_convolutions():
    import jax
    import jax.numpy as jnp
    from extract.xla.collection.layouts import Constrained
    from extract.xla.collection.roles import roles_of

    def program(q, k, image, kernel):
        scores = jnp.einsum("bqd,bkd->bqk", q, k)          # batch, contracted d, free q and k
        out = jax.lax.conv_general_dilated(image, kernel, (1, 1), "SAME",
                                           dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return scores.reshape(2, -1).sum() + out.sum()

    args = [np.ones(s, np.float32) for s in [(2, 5, 4), (2, 6, 4), (2, 8, 8, 3), (3, 3, 3, 7)]]
    candidates = Constrained(program, args).candidates.values()
    found = {c.kind: c.roles for c in candidates}
    batch, contracted, left, right, spatial = 1, 2, 3, 4, 5
    assert found["dot_general"] == ((batch, left, right), (batch, left, contracted), (batch, right, contracted))
    assert found["conv_general_dilated"] == ((left, spatial, spatial, right), (left, spatial, spatial, contracted),
                                             (spatial, spatial, contracted, right))
    assert all(c.roles == ((0,) * c.rank,) for c in candidates if c.kind == "parameter")
    assert found["reshape"] == ((0, 0), (0, 0, 0))                   # no role: not a dot or convolution
    closed = jax.make_jaxpr(lambda a, b: jax.lax.dot_general(a, b, (((0,), (1,)), ((), ()))))(
        np.ones((3, 4), np.float32), np.ones((5, 3), np.float32))
    assert roles_of(closed.jaxpr.eqns[0]) == ((left, right), (contracted, left), (right, contracted))


def test_an_unfinished_collection_is_not_shipped(collection, tmp_path, capsys):
    import shutil
    from extract.xla.collection.cli import main
    root = tmp_path / "root"
    shutil.copytree(collection[0], root)
    journal = root / "measurements/tinyprog.mlp.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    last_timing = max(i for i, line in enumerate(lines) if '"runtime_s"' in line)
    journal.write_text("".join(lines[:last_timing] + lines[last_timing + 1:]))
    assert main(["ship", str(root), "--out", str(tmp_path / "out")]) == 2
    assert f"{root}: still to measure: tinyprog.mlp (1 timing)" in capsys.readouterr().err
    assert main(["ship", str(root), "--out", str(root / "shipped")]) == 2
    assert "inside ROOT" in capsys.readouterr().err
    assert not (tmp_path / "out/measurements").exists()


@pytest.mark.parametrize("machines, seen", [
    ([{"cpu": "Xeon"}, {"cpu": "EPYC"}], "2 CPU models (EPYC, Xeon)"),
    ([{"cpu": "EPYC", "cpu_family_model": "25/1"}, {"cpu": "EPYC", "cpu_family_model": "25/17"}],
     "2 CPU models (EPYC (family/model 25/1), EPYC (family/model 25/17))"),
])
def test_a_collection_of_two_cpu_models_is_not_shipped(tmp_path, capsys, machines, seen):
    from extract.xla.collection.cli import main
    runs = [{"machine": m, "measure": {"remeasure_fraction": 0.1}} for m in machines]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    assert main(["ship", str(tmp_path), "--out", str(tmp_path.parent / "out2")]) == 2
    assert f"runs.jsonl: {seen}; a collection is measured on one" in capsys.readouterr().err


def test_a_config_that_kills_the_collector_twice_is_recorded_as_failed():
    from extract.xla.collection.collect import _given_up
    rows = [{"config": "p0=1,0", "pass": 1, "started": 1.0}, {"config": "", "pass": 1, "runtime_s": 1e-3}]
    assert not _given_up(rows, "p0=1,0", 1)
    rows.append({"config": "p0=1,0", "pass": 1, "started": 2.0})
    assert _given_up(rows, "p0=1,0", 1) and not _given_up(rows, "p0=1,0", 2)
    killed_while_timing = [{"config": "p0=1,0", "pass": 1, event: t} for t in (1.0, 2.0)
                           for event in ("started", "compiled")]
    assert not _given_up(killed_while_timing, "p0=1,0", 1)
    assert results(rows) == [{"config": "", "pass": 1, "runtime_s": 1e-3}]


def test_a_killed_run_resumes_where_it_stopped(tmp_path):
    pytest.importorskip("jax")
    root = tmp_path / "root"
    args = ["function", "tinyprog:mlp", "--shapes", *SHAPES, "--out", str(root), "--configs", "6",
            "--batch", "2", *BRIEF]
    journal = root / "measurements/tinyprog.mlp.jsonl"
    child = collect_cli(tmp_path, *args, wait=False)
    deadline = time.monotonic() + 300
    while len(results(read_jsonl(str(journal)))) < 2 and child.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.communicate()
    before = results(read_jsonl(str(journal)))
    assert 2 <= len(before)
    plan_text = (root / "measurements/tinyprog.mlp.plan.json").read_text()
    done = collect_cli(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    after = results(read_jsonl(str(journal)))
    assert after[:len(before)] == before                      # nothing measured twice
    assert sorted(Counter((r["config"], r["pass"]) for r in after).values()) == [1] * len(after)
    assert (root / "measurements/tinyprog.mlp.plan.json").read_text() == plan_text
    plan = json.loads(plan_text)
    keys = set(plan["configs"]["random"] + plan["configs"]["default"])
    assert {r["config"] for r in after if r["pass"] == 1} == keys


def test_a_helper_on_another_core_compiles_a_batch_for_the_measuring_process(tmp_path, monkeypatch, caplog):
    """With a compile core, the configs of a batch the helper compiled are loaded from JAX's
    cache instead of compiled again; outside a batch nothing is cached (the probe compiles
    XLA's layout several times on purpose), and after it the helper and the cache are gone."""
    pytest.importorskip("jax")
    if spare_core() is None:
        pytest.skip("needs two cores in this process's affinity")
    import logging
    import multiprocessing

    from extract.xla.collection.compile_ahead import CompileAhead
    from extract.xla.collection.functions import function_program
    from extract.xla.collection.layouts import parse_config_key
    from extract.xla.collection.runner import ProgramRunner

    (tmp_path / "tinyprog.py").write_text(textwrap.dedent(TINY_PROGRAM))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), REPO]))  # the helper imports it too
    program = function_program("tinyprog:mlp", SHAPES)
    runner = ProgramRunner(program.fn, program.args())
    keys = ["", "p0=1,0", "p1=1,0", "p0=1,0;p1=1,0"]
    caplog.set_level(logging.DEBUG, logger="jax._src.compiler")

    def loaded() -> int:  # the program's compiles JAX took from the cache (not its arguments' relayouts)
        return sum("cache hit for 'jit_program'" in r.getMessage() for r in caplog.records)

    folder = tmp_path / "cache"
    with CompileAhead(program, spare_core(), folder).batch(keys):
        deadline = time.monotonic() + 240
        while len(list(folder.glob("jit_program-*-cache"))) < len(keys) and time.monotonic() < deadline:
            time.sleep(0.1)
        prepared = runner.prepare([parse_config_key(k) for k in keys])
    assert loaded() == len(keys)          # every config loaded, none compiled twice
    for p in prepared:
        np.testing.assert_allclose(np.asarray(p.call()), np.asarray(program.fn(*program.args())), rtol=1e-5)
    assert not multiprocessing.active_children() and not list(folder.iterdir())
    for _ in range(2):
        runner.lower(parse_config_key(keys[1])).compile()
    assert loaded() == len(keys)          # no cache outside a batch: the second compiles anew


@pytest.mark.parametrize("core, message", [("-1", "the measuring core"), ("9999", "this machine has cores")])
def test_a_compile_core_that_cannot_help_is_refused(tmp_path, core, message):
    if core == "-1":
        core = str(sorted(os.sched_getaffinity(0))[-1])  # the core it measures on
    done = collect_cli(tmp_path, "function", "tinyprog:mlp", "--shapes", *SHAPES, "--out", str(tmp_path / "o"),
                       "--compile-core", core)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: compile core") and message in lines[0], done.stderr


def test_a_compile_core_for_a_program_no_other_process_can_build_is_refused(tmp_path):
    from extract.xla.collection.compile_ahead import CompileAhead
    from extract.xla.collection.programs import Program

    program = Program("mine", "mine", lambda x: x, lambda: [np.ones((4, 4), np.float32)])   # no recipe
    with pytest.raises(ValueError, match=r"^mine: a compile core \(0\) needs the program's recipe"):
        CompileAhead(program, 0, tmp_path)
    assert CompileAhead(program, None, tmp_path).core is None               # measured without a helper


@pytest.mark.parametrize("spec, shapes, message", [
    ("nosuchmodule_xyz:f", SHAPES, "nosuchmodule_xyz:f: cannot import module nosuchmodule_xyz"),
    ("tinyprog:nothere", SHAPES, "tinyprog:nothere: module tinyprog has no attribute nothere"),
    ("tinyprog", SHAPES, "tinyprog: expected MODULE:FUNCTION"),
    ("tinyprog:mlp", ["f32[64,x]"], "f32[64,x]: not an argument shape"),
    ("tinyprog:mlp", ["f32[3,3]", "f32[3,3]", "f32[5,5]"], "tinyprog:mlp: does not run on"),
])
def test_bad_function_is_one_line_naming_it(tmp_path, spec, shapes, message):
    done = collect_cli(tmp_path, "function", spec, "--shapes", *shapes, "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), done.stderr


# ---------------------------------------------------------------- selection rule, sampling
def test_selection_keeps_nodes_above_noise_and_says_when_it_fills_up():
    probed = {"noise": 0.05, "effects": {"a": 0.5, "b": -0.2, "c": 0.08, "d": None, "e": 0.01}}
    chosen = select_nodes(probed, PlanSettings(min_nodes=2))
    assert chosen == {"selected": ["a", "b"], "threshold": pytest.approx(0.1), "below_noise": False}
    quiet = {"noise": 0.3, "effects": {"a": 0.5, "b": -0.2, "c": 0.08}}
    chosen = select_nodes(quiet, PlanSettings(min_nodes=2))
    assert chosen["selected"] == ["a", "b"] and chosen["below_noise"]
    assert select_nodes(quiet, PlanSettings(min_nodes=1))["selected"] == ["a"]


def test_a_space_too_small_for_the_configs_is_filled_by_the_next_largest_effects():
    matrices = {f"m{i}": Candidate(f"m{i}", "parameter", (8, 4), node=i, default=(0, 1)) for i in range(6)}
    probed = {"noise": 0.01, "effects": {"m0": 0.5, "m1": -0.3, "m2": 0.001, "m3": -0.004,
                                         "m4": None, "m5": 0.002}}
    plan = PlanSettings(configs=12, min_nodes=2)
    chosen = fill_space(select_nodes(probed, plan), probed, matrices, plan)
    # two matrices admit 4 configs; m3 then m5 (largest effects below the bar) make 16 ≥ 12
    assert chosen["selected"] == ["m0", "m1", "m3", "m5"] and chosen["filled"] == ["m3", "m5"]
    assert distinct_configs(space_for(chosen["selected"], matrices), plan) >= 12
    assert distinct_configs(space_for(["m0", "m1", "m3"], matrices), plan) < 12
    roomy = fill_space(select_nodes(probed, PlanSettings(configs=4)), probed, matrices, PlanSettings(configs=4))
    assert roomy["selected"] == ["m0", "m1"] and roomy["filled"] == []
    # every probed candidate in, still short: the plan keeps what there is (m4 failed its probe)
    short = fill_space(select_nodes(probed, PlanSettings(configs=100)), probed, matrices,
                       PlanSettings(configs=100))
    assert sorted(short["selected"]) == ["m0", "m1", "m2", "m3", "m5"]


def space():
    return Space((Candidate("p0", "parameter", (8, 4), node=1, default=(0, 1)),
                  Candidate("n0", "dot_general", (8, 4, 2), ("p0", ""), node=3, default=(0, 1, 2)),
                  Candidate("n1", "transpose", (4, 8), ("n0",), node=5, default=(1, 0))))


@pytest.mark.parametrize("search", ["random", "default"])
def test_configs_start_with_xlas_own_and_are_distinct(search):
    configs = sample_configs(space(), 20, search, seed=3)
    keys = [config_key(c) for c in configs]
    assert keys[0] == "" and len(set(keys)) == len(keys) == 20
    for config in configs[1:]:
        if search == "default":  # 1..3 nodes moved away from XLA's layout
            assert 1 <= len(config) <= 3
            assert all(perm != {c.id: c.default for c in space().nodes}[k] for k, perm in config.items())
        else:
            assert set(config) == {"p0", "n0", "n1"}


def test_features_are_minor_to_major_of_node_and_operands():
    features = space().features({"p0": (1, 0), "n0": (2, 0, 1)})
    assert list(features[0]) == [0, 1, -1, -1, -1, -1] + [-1] * 12
    assert list(features[1]) == [1, 0, 2, -1, -1, -1] + [0, 1, -1, -1, -1, -1] + [-1] * 6
    assert list(features[2]) == [0, 1, -1, -1, -1, -1] + [1, 0, 2, -1, -1, -1] + [-1] * 6


def test_measuring_settings_refuse_what_cannot_be_measured():
    from extract.xla.collection.measure import MeasureSettings, measuring_core, time_call
    allowed = sorted(os.sched_getaffinity(0))
    assert measuring_core(-1) == allowed[-1]
    with pytest.raises(ValueError, match="core 999 is not one this process may run on"):
        measuring_core(999)
    with pytest.raises(ValueError, match="clock 'gpu'"):
        MeasureSettings(clock="gpu")
    with pytest.raises(ValueError, match="remeasure fraction 1.5"):
        MeasureSettings(remeasure_fraction=1.5)
    with pytest.raises(ValueError, match="batch \\(0\\) must be ≥ 1"):
        MeasureSettings(batch=0)
    timing = time_call(lambda: time.sleep(0.001), MeasureSettings(repeats=3, min_repeat_ms=5))
    assert len(timing["repeats_s"]) == 3 and timing["number"] * timing["repeats_s"][0] >= 0.005
    assert timing["min_s"] == min(timing["repeats_s"]) >= 0.001 and timing["runtime_s"] > 0.0009
    assert max(timing["cpu_repeats_s"]) < timing["min_s"]  # sleeping costs no CPU time


def test_configs_timed_in_shared_rounds_rank_right_while_the_machine_drifts(monkeypatch):
    """Three configs 1.0 : 1.1 : 1.2, on a machine that runs at half speed every other
    second stretch: timed one after another the slowdowns would decide their order; timed
    in shuffled rounds and divided by their neighbours, their ratios come out."""
    from extract.xla.collection import measure
    cost, ran = {0: 1.0, 1: 1.1, 2: 1.2}, []
    calls = [lambda i=i: ran.append(i) for i in cost]

    def repeat(call, number):
        for _ in range(number):
            call()
        drift = 2.0 if (len(ran) // 40) % 2 else 1.0  # the machine's speed, changing over time
        return number * 1e-3 * cost[ran[-1]] * drift, 0.0

    monkeypatch.setattr(measure, "_repeat", repeat)
    timed = measure.time_interleaved(calls, measure.MeasureSettings(repeats=30, min_repeat_ms=1))
    assert [t["interleaved"] for t in timed] == [3, 3, 3] and all(len(t["repeats_s"]) == 30 for t in timed)
    runtimes = [t["runtime_s"] for t in timed]
    assert runtimes == sorted(runtimes)
    assert runtimes[1] / runtimes[0] == pytest.approx(1.1, rel=0.02)
    assert runtimes[2] / runtimes[0] == pytest.approx(1.2, rel=0.02)
    first_round = 4 * len(cost)  # after each config's warm-up run and three calibrating repeats
    timed_rounds = [ran[k:k + 3] for k in range(first_round, len(ran), 3)]
    assert all(sorted(r) == [0, 1, 2] for r in timed_rounds) and len({tuple(r) for r in timed_rounds}) > 1


class PrefixRunner:
    """A runner whose process holds `room` compiled configs at a time."""

    def __init__(self, room):
        self.room, self.batches = room, []

    def prepare(self, configs, journal):
        for i in range(min(self.room, len(configs))):
            journal(i, "started")
            journal(i, "compiled")
        return [None] * min(self.room, len(configs))

    def time_all(self, prepared, settings, seed):
        self.batches.append(len(prepared))
        return [{"runtime_s": 1e-3}] * len(prepared)


def test_a_pass_is_measured_in_batches_as_large_as_the_process_holds(tmp_path):
    import io
    from extract.metaschedule.jsonl import JsonlLog
    from extract.metaschedule.progress import Counts, Progress
    from extract.xla.collection.collect import _measure_pass, passes
    from extract.xla.collection.measure import MeasureSettings

    a, b, c, d, e = "", "p0=1,0", "p0=0,1", "n0=1,0", "n0=0,1"
    todo = [(a, 1), (b, 1), (c, 1), (d, 1), (e, 1), (a, 2), (d, 2)]
    assert passes(todo) == [todo[:5], todo[5:]]
    rows = [{"config": e, "pass": 1, "started": 1.0}] * 2  # crashed the collector twice
    runner, stream = PrefixRunner(room=2), io.StringIO()
    progress = Progress(Counts(), stream=stream)
    reference = type("NotDue", (), {"due": lambda self: False})()
    with JsonlLog(str(tmp_path / "j.jsonl")) as log:
        _measure_pass("p", todo[:5], rows, runner, (log, None), MeasureSettings(batch=3), progress, reference)
    journal = results(read_jsonl(str(tmp_path / "j.jsonl")))
    assert runner.batches == [2, 2]  # batches of 3 cut to what fits; e (given up) not compiled
    assert sorted(r["config"] for r in journal) == sorted([a, b, c, d, e])
    assert "error" in next(r for r in journal if r["config"] == e)
    assert "fill this process's memory maps" in stream.getvalue()
    assert progress.counts.records == 5 and progress.counts.errors == 1


def test_configs_compile_in_order_with_their_errors_as_many_as_the_process_holds(monkeypatch):
    pytest.importorskip("jax")
    from extract.xla.collection import runner as runner_module
    from extract.xla.collection.measure import MeasureSettings
    from extract.xla.collection.runner import ProgramRunner

    def mlp(w, x):
        return (x @ w).T

    args = [np.arange(32, dtype=np.float32).reshape(4, 8), np.ones((2, 4), np.float32)]
    runner = ProgramRunner(mlp, args)
    configs = [{}, {"p0": (0, 0)}, {"p0": (0, 1)}, {"p0": (1, 0)}]  # the second is no permutation
    seen = []
    prepared = runner.prepare(configs, journal=lambda i, event: seen.append((i, event)))
    assert seen == [(i, event) for i in range(4) for event in ("started", "compiled")]
    assert [p.call is None for p in prepared] == [False, True, False, False]
    assert "error" in prepared[1].info and all(p.info["compile_s"] >= 0 for p in prepared)
    expected = mlp(*args)
    for p in (prepared[0], prepared[2], prepared[3]):
        np.testing.assert_allclose(np.asarray(p.call()), expected)  # any layout, the same values
    monkeypatch.setattr(runner_module, "room_for_more", lambda: False)  # memory maps full
    assert len(runner.prepare(configs)) == 1
    measured = runner.measure(configs, MeasureSettings(repeats=2, min_repeat_ms=1, clock="cpu"))
    assert ["error" in m for m in measured] == [False, True, False, False]
    assert [m.get("interleaved") for m in measured] == [1, None, 1, 1]  # one batch each


def test_a_program_keeps_its_fingerprint_whatever_was_lowered_before():
    """A resumed campaign lowers a program first that the killed one lowered after others:
    the plan must still be its own (the serialized proto's ids differ, the text does not)."""
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from extract.xla.collection.plan import fingerprint, same_program
    from extract.xla.collection.runner import ProgramRunner

    def mlp(w1, w2, x):
        return (jnp.tanh(x @ w1) @ w2).sum(0)

    def other(a):
        return (a @ a.T).sum()

    args = [np.ones((8, 8), np.float32), np.ones((8, 4), np.float32), np.ones((2, 8), np.float32)]
    first = ProgramRunner(mlp, args)
    ProgramRunner(other, [np.ones((4, 4), np.float32)])
    again = ProgramRunner(mlp, args)
    assert fingerprint(first) == fingerprint(again) and fingerprint(first).startswith("text:")
    assert fingerprint(ProgramRunner(other, [np.ones((4, 4), np.float32)])) != fingerprint(first)
    saved = {"fingerprint": fingerprint(first), "dropped": first.dropped,
             "candidates": json.loads(json.dumps([c.as_dict() for c in first.candidates.values()]))}
    assert same_program(saved, again)
    # a plan of the earlier proto fingerprint: judged by its candidates, nodes and defaults
    old = dict(saved, fingerprint="b5816bc9b4c2f6e6")
    assert same_program(old, again)
    moved = dict(old, candidates=[dict(c, node=c["node"] + 1) for c in old["candidates"]])
    assert not same_program(moved, again)
    assert not same_program(dict(saved, fingerprint="text:0000000000000000"), again)


def test_noise_is_told_apart_from_a_shift_the_whole_second_pass_shares():
    from extract.xla.collection.collect import summarize
    saved = {"program": "p", "nodes": ["n0"], "below_noise": False}
    first = {"": 1.0, "n0=1,0": 1.2, "n0=0,1": 1.1, "n0=2,1,0": 1.3}
    rows = [{"config": k, "pass": 1, "runtime_s": t} for k, t in first.items()]
    rows += [{"config": k, "pass": 2, "runtime_s": t * 1.05} for k, t in first.items()]
    s = summarize(saved, rows)
    assert s["noise_rel"] == pytest.approx(0.05) and s["pass_shift"] == pytest.approx(0.05)
    assert s["noise_rel_beside_shift"] == pytest.approx(0.0, abs=1e-12) and s["noise_tau"] == 1.0


def test_timings_too_short_to_see_stay_finite():
    from extract.xla.collection.measure import relative_to_neighbours
    ratios = relative_to_neighbours([(0, 0.0), (1, 0.0), (0, 1e-6), (1, 0.0)], 2)
    assert all(np.isfinite(r) for rs in ratios for r in rs)
    assert relative_to_neighbours([(0, 2e-3)], 1) == [[1.0]]  # a lone timing is its own scale


def test_the_readme_says_in_how_many_runs_a_helper_compiled():
    from extract.xla.collection.ship import protocol
    measure = {"core": 1, "clock": "wall", "batch": 200, "repeats": 50, "min_repeat_ms": 20.0,
               "remeasure_fraction": 0.25, "reference_every_s": 300.0}

    def run(compile_core):
        return {"measure": dict(measure, compile_core=compile_core), "pinned": {"xla_flags": "--flags"}}
    alone, helped = run(None), run(0)
    assert "helper" not in protocol([alone, alone])
    assert "half of them by a helper on core 0, stopped before the timing" in protocol([helped, helped])
    assert "by a helper on core 0 in 1 of the 3 runs, stopped" in protocol([alone, alone, helped])
    older = {"measure": measure, "pinned": {"xla_flags": "--flags"}}   # recorded before the option existed
    assert "in 1 of the 2 runs" in protocol([older, helped])
