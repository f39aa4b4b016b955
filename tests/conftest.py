"""Shared fixtures: small synthetic GraphSamples (simulator.data.synthetic) and torch at one thread.

The synthetic samples keep simulator tests fast and independent of the shipped data;
they have the GraphSample shape the extractors produce (edges parent → child, node
features, node types, one runtime per sample, vectors["curve"/"per_store"]).
"""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def synthetic_samples():
    from simulator.data.synthetic import make_synthetic_samples
    return make_synthetic_samples(num_workloads=12, configs_per_workload=16, nodes=(10, 20), seed=0)


@pytest.fixture(scope="session")
def dataset_path(tmp_path_factory, synthetic_samples):
    """A folder holding one .npz collection of the synthetic samples (groups C1…C12)."""
    from extract.sample import save_samples
    folder = tmp_path_factory.mktemp("data")
    save_samples(str(folder / "synthetic.npz"), synthetic_samples, info={"synthetic": True})
    return str(folder)


# ---------------------------------------------------------------- MetaSchedule
MS_SMALL = os.path.join(ROOT, "tests", "data", "ms_small")  # a committed pass folder in miniature


class _Spy:
    """What a cost model was asked and answered during a tuning run."""

    def __init__(self):
        self.predicted = []   # (scheduled modules, output) per predict call
        self.updated = []     # (modules, run_secs or None) per update call


def _spying(inner, spy):
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.cost_model import PyCostModel

    @derived_object
    class SpyCostModel(PyCostModel):
        stats = property(lambda self: inner.stats)

        def predict(self, context, candidates):
            out = inner.predict(context, candidates)
            spy.predicted.append(([c.sch.mod for c in candidates], out))
            return out

        def update(self, context, candidates, results):
            spy.updated.append(([c.sch.mod for c in candidates], [r.run_secs for r in results]))
            inner.update(context, candidates, results)

        def save(self, path):
            inner.save(path)

        def load(self, path):
            inner.load(path)

    return SpyCostModel()


@pytest.fixture(scope="session")
def ms_tuned(tmp_path_factory):
    """One real `python -m simulator.tune` run (in this process) of a tiny dense with a cold
    GNNCostModel that trains after the first 8 measurements, its predict/update calls
    recorded: 16 trials in 2 rounds of 8, population 32, measured with extract.metaschedule.runner's
    protocol on the last core this process may use (under `taskset -c 0`: core 0).
    Yields (work dir, spy, summary, inner cost model)."""
    from unittest import mock

    from simulator.metaschedule import cost_model as ms_costmodel, tune

    work = str(tmp_path_factory.mktemp("ms_tuned") / "dense")
    spy = _Spy()
    made = {}
    original = ms_costmodel.make_cost_model

    def make(*args, **kwargs):
        made["inner"] = original(*args, **kwargs)
        return _spying(made["inner"], spy)

    argv = ["dense_32x32x48", "--cost-model", "gnn", "--trials", "16", "--trials-per-iter", "8",
            "--population", "32", "--init-min-unmeasured", "8", "--genetic-iters", "1", "--min-measured", "8",
            "--update-steps", "2", "--work-dir", work, "--seed", "3"]
    with mock.patch.object(ms_costmodel, "make_cost_model", make):
        summary = tune.run(argv)
    return work, spy, summary, made["inner"]
