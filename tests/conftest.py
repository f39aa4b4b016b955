"""Shared fixtures: small synthetic GraphSamples (simulator.synthetic) and torch at one thread.

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
    from simulator.synthetic import make_synthetic_samples
    return make_synthetic_samples(num_workloads=12, configs_per_workload=16, nodes=(10, 20), seed=0)


@pytest.fixture(scope="session")
def dataset_path(tmp_path_factory, synthetic_samples):
    """A folder holding one .npz collection of the synthetic samples (groups C1…C12)."""
    from extract.sample import save_samples
    folder = tmp_path_factory.mktemp("data")
    save_samples(str(folder / "synthetic.npz"), synthetic_samples, info={"synthetic": True})
    return str(folder)
