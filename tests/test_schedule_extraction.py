"""Extraction from any schedule (`sample_from_schedule`), the workload notion, typed jobs,
and a new operator added as one file's worth of code plus registration."""
import dataclasses
import pickle
from dataclasses import dataclass
from typing import List, Optional

import numpy as np
import pytest

from extract import tvm_log
from extract import schedules as tvm_graph
from extract.autotvm import records, timing
from extract.autotvm.space import ConfigSpace, OptionKnob, SplitKnob
from extract.autotvm.templates import Template, get_template
from extract.autotvm.templates import base as template_base
from extract.sample import ExtractorInfo, load_info, load_samples, save_samples
from extract.tir.graph import EXTRACTOR_VERSION, FEATURE_NAMES, VOCABULARY
from extract.tir.workloads import TensorSpec, Workload, parse_workload, register_workload
from extract.tir.workloads import base as workload_base

X86 = "conv2d_NCHWc.x86"
TINY = "1x8x8x8_8x3x3_s1_p1"


def assert_same_graph(a, b):
    for key in ("edges", "node_features", "node_types"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
    assert a.vectors.keys() == b.vectors.keys()
    for key in a.vectors:
        np.testing.assert_array_equal(a.vectors[key], b.vectors[key])


# ---------------------------------------------------------------- a new operator kind
@dataclass(frozen=True)
class ToyMatmul(Workload):
    """C = A·B, float32: the whole of a new workload kind."""

    kind = "toymatmul"
    spec_help = "toymatmul_MxNxK"

    m: int
    n: int
    k: int

    @property
    def key(self) -> str:
        return f"toymatmul_{self.m}x{self.n}x{self.k}"

    @classmethod
    def from_spec(cls, spec: str) -> Optional["ToyMatmul"]:
        if not spec.startswith("toymatmul_"):
            return None
        return cls(*(int(x) for x in spec[len("toymatmul_"):].split("x")))

    def prim_func(self):
        from tvm import te
        a = te.placeholder((self.m, self.k), name="A")
        b = te.placeholder((self.k, self.n), name="B")
        r = te.reduce_axis((0, self.k), name="r")
        c = te.compute((self.m, self.n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
        return te.create_prim_func([a, b, c])

    def inputs(self) -> List[TensorSpec]:
        return [TensorSpec((self.m, self.k)), TensorSpec((self.k, self.n))]

    def reference(self, a, b):
        return [(a @ b).astype("float32")]


class ToyMatmulTemplate(Template[ToyMatmul]):
    name = "toy/matmul"
    workload_type = ToyMatmul

    def space(self, wl):
        return ConfigSpace([SplitKnob("tile_i", wl.m, 2), SplitKnob("tile_j", wl.n, 2),
                            OptionKnob("unroll", [False, True])])

    def schedule(self, wl, config):
        from tvm import s_tir
        sch = s_tir.Schedule(wl.prim_func())
        i, j, r = sch.get_loops(sch.get_sblock("C"))
        io, ii = sch.split(i, [None, config["tile_i"][-1]])
        jo, ji = sch.split(j, [None, config["tile_j"][-1]])
        sch.reorder(io, jo, r, ii, ji)
        if config["unroll"]:
            sch.unroll(ji)
        return sch

    def make_target(self, num_cores: int = 1):
        from tvm.target import Target
        return Target({"kind": "llvm", "mtriple": "x86_64-linux-gnu", "num-cores": num_cores})


@pytest.fixture
def toy(monkeypatch):
    """Register the toy kind and template for one test (registries restored after)."""
    monkeypatch.setattr(workload_base, "WORKLOAD_KINDS", dict(workload_base.WORKLOAD_KINDS))
    monkeypatch.setattr(template_base, "TEMPLATES", dict(template_base.TEMPLATES))
    register_workload(ToyMatmul)
    template_base.register_template(ToyMatmulTemplate)
    return get_template("toy/matmul")


def test_a_new_operator_is_one_class_and_one_template(toy):
    wl = parse_workload("toymatmul_16x8x4")
    assert wl == ToyMatmul(16, 8, 4) and parse_workload(wl.key) == wl
    assert parse_workload("C2").kind == "conv2d"  # the other kinds still dispatch
    samples = tvm_graph.samples_for_configs("toy/matmul", wl, [0, 3, len(toy.space(wl)) - 1])
    assert [s.name for s in samples] == [f"{wl.key}/{i}" for i in (0, 3, len(toy.space(wl)) - 1)]
    assert all(s.group == wl.key and np.isnan(s.runtimes[0]) for s in samples)
    assert samples[0].num_nodes != samples[-1].num_nodes or not np.array_equal(
        samples[0].node_features, samples[-1].node_features)  # configs differ in their graphs
    # measured against the workload's own NumPy reference, not a conv2d
    assert wl.measurable
    result = timing.measure_one("toy/matmul", wl, 3, repeat=1, min_repeat_ms=1)
    assert result.error_no == records.NO_ERROR and np.isfinite(result.costs).all()


def test_a_wrong_reference_is_a_wrong_answer(toy, monkeypatch):
    wl = ToyMatmul(8, 8, 8)
    monkeypatch.setattr(ToyMatmul, "reference", lambda self, a, b: [(a @ b + 1).astype("float32")])
    timing._inputs.pop(wl, None)
    result = timing.measure_one("toy/matmul", wl, 0, repeat=1, min_repeat_ms=1)
    timing._inputs.pop(wl, None)
    assert result.error_no == records.WRONG_ANSWER and "max abs error 1" in result.error_msg


def test_templates_are_typed_to_their_workload_kind(toy):
    with pytest.raises(TypeError, match="schedules conv2d workloads"):
        tvm_graph.config_sample(get_template(X86), ToyMatmul(8, 8, 8), toy.space(ToyMatmul(8, 8, 8)).get(0))
    with pytest.raises(TypeError, match="schedules toymatmul workloads"):
        tvm_graph.config_jobs("toy/matmul", parse_workload("C2"))


# ---------------------------------------------------------------- any schedule
def test_sample_from_a_schedule_module_or_prim_func(toy):
    wl = ToyMatmul(16, 16, 16)
    sch = toy.schedule(wl, toy.space(wl).get(5))
    by_schedule = tvm_graph.sample_from_schedule(sch, "llvm", [1e-3, 3e-3], "mm", "mm/a",
                                                 meta={"source": "hand"}, per_store=True)
    assert by_schedule.runtimes[0] == pytest.approx(2e-3) and by_schedule.runtime_std[0] == pytest.approx(1e-3)
    assert by_schedule.meta.as_dict() == {"source": "hand", "extractor": EXTRACTOR_VERSION}
    assert by_schedule.group == "mm" and by_schedule.name == "mm/a"
    assert by_schedule.vectors["per_store"].shape == (1, 328)
    assert by_schedule.node_features.shape[1] == len(FEATURE_NAMES)
    by_module = tvm_graph.sample_from_schedule(sch.mod, "llvm", None, "mm", per_store=True)
    by_func = tvm_graph.sample_from_schedule(sch.mod["main"], toy.make_target(), 2e-3, "mm", per_store=True)
    import tvm
    renamed = tvm_graph.sample_from_schedule(tvm.IRModule({"mm": sch.mod["main"]}), "llvm", None, "mm",
                                             per_store=True)
    for other in (by_module, by_func, renamed):
        assert_same_graph(by_schedule, other)
    assert np.isnan(by_module.runtimes[0]) and by_func.runtimes[0] == 2e-3 and by_func.runtime_std[0] == 0
    with pytest.raises(ValueError, match="need the target"):
        tvm_graph.sample_from_schedule(sch, None, None, "mm", per_store=True)
    with pytest.raises(TypeError, match="Schedule, IRModule or PrimFunc"):
        tvm_graph.sample_from_schedule("not a schedule", "llvm", None, "mm")


def test_template_config_is_its_schedule_through_the_core():
    template = get_template(X86)
    wl = parse_workload(TINY)
    config = template.space(wl).get(17)
    sample, unknown = tvm_graph.config_sample(template, wl, config, (1e-3, 2e-3), per_store=True)
    assert unknown == {} and sample.name == f"{wl.key}/17" and sample.group == wl.key
    assert sample.meta.as_dict() == {"template": X86, "workload": wl.key, "index": 17, "config": config.values,
                           "extractor": EXTRACTOR_VERSION}
    direct = tvm_graph.sample_from_schedule(template.schedule(wl, config), template.make_target(),
                                            [1e-3, 2e-3], sample.group, meta=sample.meta, per_store=True)
    assert_same_graph(sample, direct)
    np.testing.assert_array_equal(sample.runtimes, direct.runtimes)
    # a schedule replayed from its trace (what a MetaSchedule database holds) gives the same sample
    from tvm import s_tir
    from tvm.s_tir.schedule import Trace
    trace = template.schedule(wl, config).trace.as_json()
    replayed = s_tir.Schedule(template.compute(wl, config["tile_ic"][-1], config["tile_oc"][-1]))
    Trace.apply_json_to_schedule(trace, replayed)
    assert_same_graph(sample, tvm_graph.sample_from_schedule(replayed, template.make_target(), None,
                                                             sample.group, meta=sample.meta, per_store=True))


# ---------------------------------------------------------------- jobs and collections
def test_jobs_are_parsed_once_and_self_contained(monkeypatch):
    jobs, _ = tvm_log.read_jobs(["tests/data/autotvm_v02.jsonl"])
    assert all(isinstance(j, tvm_graph.ConfigJob) for j in jobs)
    first = jobs[0]
    assert first.workload == parse_workload("C3") and first.name == f"C3/{first.config.index}"
    assert first.costs and all(c > 0 for c in first.costs)
    assert pickle.loads(pickle.dumps(first)) == first
    # the worker does not parse again: task args and entities are not looked at any more
    template = get_template(first.template)

    def no_parsing(*args, **kwargs):
        raise AssertionError("parsed again")

    monkeypatch.setattr(type(template), "parse_task_args", no_parsing)
    monkeypatch.setattr(ConfigSpace, "from_entity", no_parsing)
    samples, unknown = tvm_graph.extract_many(jobs[:2], workers=1, progress=False, per_store=False)
    assert [s.name for s in samples] == [j.name for j in jobs[:2]] and unknown == {}


def test_collections_carry_the_extractor_vocabulary(tmp_path):
    import datasets

    samples = tvm_graph.samples_for_configs(X86, parse_workload(TINY), [0, 1])
    save_samples(str(tmp_path / "a.npz"), samples, info={"note": 1})
    info = load_info(str(tmp_path / "a.npz"))
    assert info["vocabulary"] == list(VOCABULARY) and info["feature_names"] == list(FEATURE_NAMES)
    assert info["extractor"] == EXTRACTOR_VERSION and info["note"] == 1
    assert ExtractorInfo.from_info(info) == tvm_graph.TIR_EXTRACTOR
    loaded = datasets.load_collection(str(tmp_path))
    assert loaded.info == tvm_graph.TIR_EXTRACTOR.as_info() and len(loaded.samples) == 2
    # a collection of another extractor cannot be mixed in
    other = ExtractorInfo("hlo-v9", ("UNK", "add"), ("f",))
    for s in samples:
        s.meta = dataclasses.replace(s.meta, extractor="hlo-v9")
    save_samples(str(tmp_path / "b.npz"), samples, extractor=other)
    assert ExtractorInfo.from_info(load_info(str(tmp_path / "b.npz"))) == other
    with pytest.raises(datasets.DatasetError, match="different extractors"):
        datasets.load_collection(str(tmp_path))
    with pytest.raises(ValueError, match="contradict"):
        save_samples(str(tmp_path / "c.npz"), samples, info={"extractor": "x"}, extractor=other)
    assert len(load_samples(str(tmp_path / "b.npz"))) == 2


def test_shipped_collection_names_its_extractor():
    import datasets

    assert datasets.load_collection("shipped", progress=False).info == tvm_graph.TIR_EXTRACTOR.as_info()
