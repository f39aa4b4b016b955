"""Train / validation / test splits over samples' groups (workloads), by `--split` name.

* `cross-workload`: train on the training workloads (default ResNet-18's C1, C2, C4,
  C8, C9, C12), test on the test workloads (C3, C5, C6, C7, C10, C11); validation is a
  seeded `val_fraction` of each training workload's configs. Giving only one of the
  two lists makes the other "every other workload". No config of a test workload is
  ever in train or validation.
* `random`: 80/10/10 of each workload's configs.
* `official`: TpuGraphs' own train/valid/test folders (`--data tpugraphs:…` only; the
  folders are the split, see `simulator.tpugraphs_source`).

`train_fraction` F then keeps a seeded ⌈F·n⌉ of each workload's training configs (the
data-efficiency sweep); validation and test stay whole.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

import numpy as np

from .data import canonical_workload
from .registry import Registry, SimulatorError

SPLITS: Registry = Registry("split")
DEFAULT_TRAIN = ["C1", "C2", "C4", "C8", "C9", "C12"]
DEFAULT_TEST = ["C3", "C5", "C6", "C7", "C10", "C11"]


def resolve_workloads(requested: Sequence[str], available: Sequence[str], flag: str) -> List[str]:
    """Map names given by the user (C2, a workload key, a group name) to group names."""
    by_canonical = {canonical_workload(a): a for a in available}
    out = []
    for r in requested:
        if r in available:
            out.append(r)
        elif canonical_workload(r) in by_canonical:
            out.append(by_canonical[canonical_workload(r)])
        else:
            raise SimulatorError(f"{flag}: workload {r!r} is not in the data (workloads: "
                                 f"{', '.join(sorted(available))})")
    return out


def _per_group(groups: np.ndarray) -> Dict[str, np.ndarray]:
    return {g: np.flatnonzero(groups == g) for g in sorted(set(groups.tolist()))}


@SPLITS.register("cross-workload")
def cross_workload(groups: np.ndarray, rng: np.random.Generator, train_workloads=None,
                   test_workloads=None, val_fraction: float = 0.2) -> Dict[str, np.ndarray]:
    available = sorted(set(groups.tolist()))
    if train_workloads is None and test_workloads is None:
        missing = [w for w in DEFAULT_TRAIN + DEFAULT_TEST
                   if w not in available and canonical_workload(w) not in map(canonical_workload, available)]
        if missing:
            raise SimulatorError(
                f"the default cross-workload split needs ResNet-18's C1…C12; the data lacks "
                f"{', '.join(missing)}: pass --train-workloads and --test-workloads "
                f"(workloads: {', '.join(available)})")
        train_workloads, test_workloads = DEFAULT_TRAIN, DEFAULT_TEST
    train = resolve_workloads(train_workloads, available, "--train-workloads") if train_workloads else None
    test = resolve_workloads(test_workloads, available, "--test-workloads") if test_workloads else None
    if train is None:
        train = [a for a in available if a not in test]
    if test is None:
        test = [a for a in available if a not in train]
    overlap = sorted(set(train) & set(test))
    if overlap:
        raise SimulatorError(f"workloads {', '.join(overlap)} are both training and test workloads")
    if not train or not test:
        raise SimulatorError("cross-workload split needs at least one training and one test workload")
    parts: Dict[str, List[np.ndarray]] = {"train": [], "val": [], "test": []}
    for g, idx in _per_group(groups).items():
        if g in test:
            parts["test"].append(idx)
        elif g in train:
            idx = rng.permutation(idx)
            n_val = int(round(val_fraction * len(idx)))
            parts["val"].append(np.sort(idx[:n_val]))
            parts["train"].append(np.sort(idx[n_val:]))
    return {k: np.sort(np.concatenate(v)) if v else np.zeros(0, np.int64) for k, v in parts.items()}


@SPLITS.register("random")
def random_split(groups: np.ndarray, rng: np.random.Generator, train_workloads=None,
                 test_workloads=None, val_fraction: float = 0.1) -> Dict[str, np.ndarray]:
    if train_workloads or test_workloads:
        raise SimulatorError("--train-workloads/--test-workloads apply to --split cross-workload only")
    parts: Dict[str, List[np.ndarray]] = {"train": [], "val": [], "test": []}
    for _, idx in _per_group(groups).items():
        idx = rng.permutation(idx)
        n_val = n_test = int(round(0.1 * len(idx)))
        parts["val"].append(idx[:n_val])
        parts["test"].append(idx[n_val:n_val + n_test])
        parts["train"].append(idx[n_val + n_test:])
    return {k: np.sort(np.concatenate(v)) for k, v in parts.items()}


@SPLITS.register("official")
def official_split(groups: np.ndarray, rng: np.random.Generator, train_workloads=None,
                   test_workloads=None, **_) -> Dict[str, np.ndarray]:
    raise SimulatorError("--split official is TpuGraphs' train/valid/test folders: it needs "
                         "--data tpugraphs:<collection> --data-root ROOT")


def make_split(groups: Sequence[str], split: str, seed: int, train_workloads: Optional[Sequence[str]] = None,
               test_workloads: Optional[Sequence[str]] = None, val_fraction: float = 0.2,
               train_fraction: float = 1.0) -> Dict[str, np.ndarray]:
    """Indices into the sample list for "train", "val" and "test" (sorted, disjoint)."""
    if not 0.0 < train_fraction <= 1.0:
        raise SimulatorError(f"--train-fraction {train_fraction} is not in (0, 1]")
    groups = np.asarray(groups)
    rng = np.random.default_rng([seed, 1])
    kwargs = {"val_fraction": val_fraction} if split == "cross-workload" else {}
    parts = SPLITS.get(split)(groups, rng, train_workloads, test_workloads, **kwargs)
    if train_fraction < 1.0:
        keep = []
        for g, idx in _per_group(groups[parts["train"]]).items():
            members = parts["train"][idx]
            n = max(1, math.ceil(train_fraction * len(members)))
            keep.append(rng.choice(members, n, replace=False))
        parts["train"] = np.sort(np.concatenate(keep))
    if len(parts["train"]) == 0:
        raise SimulatorError("the split leaves no training samples")
    return parts
