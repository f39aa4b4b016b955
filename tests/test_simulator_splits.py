"""Splits: no config of a test workload reaches training; fractions are seeded."""
import numpy as np
import pytest

from simulator.data.splits import DEFAULT_TEST, DEFAULT_TRAIN, make_split
from simulator.registry import SimulatorError

GROUPS = [f"C{w}" for w in range(1, 13) for _ in range(20)]


def groups_of(idx, groups=GROUPS):
    return {groups[i] for i in idx}


def test_cross_workload_default_has_no_leakage():
    parts = make_split(GROUPS, "cross-workload", seed=0)
    assert groups_of(parts["test"]) == set(DEFAULT_TEST)
    assert groups_of(parts["train"]) == groups_of(parts["val"]) == set(DEFAULT_TRAIN)
    assert not groups_of(np.concatenate([parts["train"], parts["val"]])) & set(DEFAULT_TEST)
    all_idx = np.concatenate(list(parts.values()))
    assert len(all_idx) == len(set(all_idx.tolist())) == len(GROUPS)   # disjoint and complete
    assert len(parts["val"]) == 6 * 4                                   # 20% of each training workload


def test_cross_workload_overrides_and_aliases():
    groups = ["C2"] * 5 + ["conv2d_1x3x32x32_8x3x3_s1_p1"] * 5 + ["mine"] * 5
    # C2's key answers to C2; giving only the test list trains on everything else
    parts = make_split(groups, "cross-workload", 0, test_workloads=["conv2d_1x64x56x56_64x3x3_s1_p1"])
    assert groups_of(parts["test"], groups) == {"C2"}
    assert groups_of(parts["train"], groups) == {"conv2d_1x3x32x32_8x3x3_s1_p1", "mine"}
    parts = make_split(groups, "cross-workload", 0, train_workloads=["mine"], test_workloads=["C2"])
    assert "conv2d_1x3x32x32_8x3x3_s1_p1" not in groups_of(np.concatenate(list(parts.values())), groups)
    with pytest.raises(SimulatorError, match="'C13' is not in the data"):
        make_split(groups, "cross-workload", 0, test_workloads=["C13"])
    with pytest.raises(SimulatorError, match="both training and test"):
        make_split(groups, "cross-workload", 0, train_workloads=["C2"], test_workloads=["C2"])
    with pytest.raises(SimulatorError, match="--train-workloads"):
        make_split(groups, "cross-workload", 0)   # no C1…C12 here: the default split cannot apply


def test_random_split_is_80_10_10_per_workload():
    parts = make_split(GROUPS, "random", seed=3)
    for w in set(GROUPS):
        counts = [sum(GROUPS[i] == w for i in parts[k]) for k in ("train", "val", "test")]
        assert counts == [16, 2, 2]


def test_train_fraction_is_a_seeded_subsample():
    full = make_split(GROUPS, "cross-workload", seed=0)
    a = make_split(GROUPS, "cross-workload", seed=0, train_fraction=0.25)
    b = make_split(GROUPS, "cross-workload", seed=0, train_fraction=0.25)
    c = make_split(GROUPS, "cross-workload", seed=1, train_fraction=0.25)
    assert np.array_equal(a["train"], b["train"]) and not np.array_equal(a["train"], c["train"])
    assert set(a["train"].tolist()) <= set(full["train"].tolist())
    assert len(a["train"]) == 6 * 4                           # ⌈0.25 · 16⌉ per workload
    assert np.array_equal(a["val"], full["val"]) and np.array_equal(a["test"], full["test"])
    with pytest.raises(SimulatorError, match="train-fraction"):
        make_split(GROUPS, "cross-workload", seed=0, train_fraction=0.0)


def test_train_task_fraction_keeps_whole_seeded_workloads():
    full = make_split(GROUPS, "cross-workload", seed=0)
    a = make_split(GROUPS, "cross-workload", seed=0, train_task_fraction=0.5)
    b = make_split(GROUPS, "cross-workload", seed=0, train_task_fraction=0.5)
    others = [make_split(GROUPS, "cross-workload", seed=s, train_task_fraction=0.5) for s in range(1, 6)]
    kept = groups_of(a["train"])
    assert len(kept) == 3 and kept < set(DEFAULT_TRAIN)            # ⌈0.5 · 6⌉ of the training workloads
    assert np.array_equal(a["train"], b["train"])
    assert any(groups_of(o["train"]) != kept for o in others)      # another seed, other workloads
    assert len(a["train"]) == 3 * 16                               # each kept one whole
    assert groups_of(a["val"]) == kept and np.array_equal(a["test"], full["test"])
    both = make_split(GROUPS, "cross-workload", seed=0, train_task_fraction=0.5, train_fraction=0.25)
    assert groups_of(both["train"]) == kept and len(both["train"]) == 3 * 4
    with pytest.raises(SimulatorError, match="train-task-fraction"):
        make_split(GROUPS, "cross-workload", seed=0, train_task_fraction=1.5)
