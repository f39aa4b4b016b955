"""Train / validation / test splits over samples' groups (workloads), by `--split` name.

* `cross-workload`: train on the training workloads (default ResNet-18's C1, C2, C4,
  C8, C9, C12), test on the test workloads (C3, C5, C6, C7, C10, C11); validation is a
  seeded `val_fraction` of each training workload's configs. Giving only one of the
  two lists makes the other "every other workload". No config of a test workload is
  ever in train or validation.
* `random`: 80/10/10 of each workload's configs.
* `official`: TpuGraphs' own train/valid/test folders (`--data tpugraphs:…` only; the
  folders are the split, see `simulator.data.tpugraphs`).
* `leave-network-out` (`--test-network bert`): test on every workload of that network
  and of its batch variants (`bert_b8`; a task two networks share included), train on all others (workloads of no network,
  e.g. the shipped conv2d templates given beside, are training workloads); validation
  as for cross-workload. Networks come from the samples' tags (`group_tags`: the
  networks dataset, `datasets.networks`).
* `leave-op-kind-out` (`--test-op-kind softmax`): the same with an operator kind
  (`meta.kind`, else the kind a MetaSchedule workload key or a template name starts with).

`train_task_fraction` T then keeps a seeded ⌈T·n⌉ of the n training workloads (with their
validation configs), and `train_fraction` F a seeded ⌈F·n⌉ of each kept workload's training
configs: the learning curves over tasks and over records per task; test stays whole.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from extract.sample import SampleMeta
from simulator.registry import Registry, SimulatorError
from .collection import canonical_workload

SPLITS: Registry = Registry("split")
register_split = SPLITS.register
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


@dataclass(frozen=True)
class GroupTags:
    """What the leave-one-out splits know of a workload group."""

    networks: Tuple[str, ...] = ()
    kind: Optional[str] = None


def kind_of(group: str, meta: SampleMeta) -> Optional[str]:
    """A sample's operator kind: its tag, else the kind its MetaSchedule workload key
    (`extract.tir.workload_key`) or its template's name starts with."""
    from extract.tir.workload_key import KINDS, parse_workload_key

    if meta.kind:
        return meta.kind
    try:
        head = parse_workload_key(group).kind
    except ValueError:
        head = (meta.template or "").split(".")[0]
    return next((k for k in sorted(KINDS, key=len, reverse=True) if head == k or head.startswith(k + "_")), None)


def group_tags(samples: Sequence[Any]) -> Dict[str, GroupTags]:
    """Group → networks (union over its samples' `meta.networks`) and operator kind."""
    networks: Dict[str, set] = {}
    kinds: Dict[str, Optional[str]] = {}
    for s in samples:
        networks.setdefault(s.group, set()).update(s.meta.networks or ())
        kinds.setdefault(s.group, kind_of(s.group, s.meta))
    return {g: GroupTags(tuple(sorted(networks[g])), kinds[g]) for g in networks}


def _train_val_test(groups: np.ndarray, rng: np.random.Generator, train: Sequence[str], test: Sequence[str],
                    val_fraction: float) -> Dict[str, np.ndarray]:
    """Test: every config of the test groups; validation: a seeded `val_fraction` of
    each training group's configs; training: the rest of them."""
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


@register_split("cross-workload")
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
    return _train_val_test(groups, rng, train, test, val_fraction)


def _leave_out(groups: np.ndarray, rng: np.random.Generator, held_out: Optional[str], val_fraction: float,
               members: Callable[[str], Sequence[str]], flag: str, what: str) -> Dict[str, np.ndarray]:
    """Test on the groups whose `members` include `held_out`, train on the others."""
    present = sorted(set(groups.tolist()))
    valid = sorted({m for g in present for m in members(g)})
    if not valid:
        raise SimulatorError(f"{flag}: the data's samples carry no {what} (they come from the task table of "
                             f"the networks dataset: --data datasets/networks_<cpu>)")
    if held_out is None or held_out not in valid:
        given = "is required" if held_out is None else f"{held_out!r} is not in the data"
        raise SimulatorError(f"{flag} {given} ({what}: {', '.join(valid)})")
    test = [g for g in present if held_out in members(g)]
    train = [g for g in present if g not in test]
    if not train:
        raise SimulatorError(f"{flag} {held_out}: every workload of the data is one of its, none is left to train on")
    return _train_val_test(groups, rng, train, test, val_fraction)


def _no_workload_lists(train_workloads, test_workloads) -> None:
    if train_workloads or test_workloads:
        raise SimulatorError("--train-workloads/--test-workloads apply to --split cross-workload only")


@register_split("leave-network-out")
def leave_network_out(groups: np.ndarray, rng: np.random.Generator, train_workloads=None, test_workloads=None,
                      val_fraction: float = 0.2, tags: Optional[Mapping[str, GroupTags]] = None,
                      held_out: Optional[str] = None) -> Dict[str, np.ndarray]:
    _no_workload_lists(train_workloads, test_workloads)
    tags = tags or {}
    return _leave_out(groups, rng, held_out, val_fraction, lambda g: network_members(tags.get(g, GroupTags()).networks),
                      "--test-network", "networks")


def network_members(networks: Sequence[str]) -> List[str]:
    """A task's networks and the networks they are batch variants of: holding out `resnet50`
    holds out `resnet50_b8`'s tasks too (the same architecture at another batch)."""
    from extract.metaschedule.networks import family

    return sorted(set(networks) | {family(n) for n in networks})


@register_split("leave-op-kind-out")
def leave_op_kind_out(groups: np.ndarray, rng: np.random.Generator, train_workloads=None, test_workloads=None,
                      val_fraction: float = 0.2, tags: Optional[Mapping[str, GroupTags]] = None,
                      held_out: Optional[str] = None) -> Dict[str, np.ndarray]:
    _no_workload_lists(train_workloads, test_workloads)
    tags = tags or {}
    return _leave_out(groups, rng, held_out, val_fraction,
                      lambda g: [k for k in (tags.get(g, GroupTags()).kind,) if k], "--test-op-kind", "operator kinds")


@register_split("random")
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


def keep_training_tasks(parts: Dict[str, np.ndarray], groups: np.ndarray, fraction: float,
                        rng: np.random.Generator) -> Dict[str, np.ndarray]:
    """`parts` with a seeded ⌈fraction·n⌉ of the n training workloads left in "train" and
    "val" (whole); test unchanged."""
    tasks = sorted(set(groups[parts["train"]].tolist()))
    kept = rng.choice(tasks, max(1, math.ceil(fraction * len(tasks))), replace=False)
    return {part: idx[np.isin(groups[idx], kept)] if part in ("train", "val") else idx for part, idx in parts.items()}


@register_split("official")
def official_split(groups: np.ndarray, rng: np.random.Generator, train_workloads=None,
                   test_workloads=None, **_) -> Dict[str, np.ndarray]:
    raise SimulatorError("--split official is TpuGraphs' train/valid/test folders: it needs "
                         "--data tpugraphs:<collection> --data-root ROOT")


HELD_OUT_FLAGS = {"leave-network-out": "--test-network", "leave-op-kind-out": "--test-op-kind"}


def _split_kwargs(split: str, val_fraction: float, tags: Optional[Mapping[str, GroupTags]],
                  test_network: Optional[str], test_op_kind: Optional[str]) -> Dict[str, Any]:
    """The keyword arguments a split takes; a held-out flag given to another split is an error."""
    held = {"leave-network-out": test_network, "leave-op-kind-out": test_op_kind}
    for name, value in held.items():
        if value is not None and split != name:
            raise SimulatorError(f"{HELD_OUT_FLAGS[name]} applies to --split {name} only (not {split})")
    if split in held:
        return {"val_fraction": val_fraction, "tags": tags, "held_out": held[split]}
    return {"val_fraction": val_fraction} if split == "cross-workload" else {}


def make_split(groups: Sequence[str], split: str, seed: int, train_workloads: Optional[Sequence[str]] = None,
               test_workloads: Optional[Sequence[str]] = None, val_fraction: float = 0.2,
               train_fraction: float = 1.0, tags: Optional[Mapping[str, GroupTags]] = None,
               test_network: Optional[str] = None, test_op_kind: Optional[str] = None,
               train_task_fraction: float = 1.0) -> Dict[str, np.ndarray]:
    """Indices into the sample list for "train", "val" and "test" (sorted, disjoint).
    `tags` (`group_tags(samples)`): the groups' networks and operator kinds, for the
    leave-network-out (`test_network`) and leave-op-kind-out (`test_op_kind`) splits."""
    for flag, fraction in (("--train-fraction", train_fraction), ("--train-task-fraction", train_task_fraction)):
        if not 0.0 < fraction <= 1.0:
            raise SimulatorError(f"{flag} {fraction} is not in (0, 1]")
    groups = np.asarray(groups)
    rng = np.random.default_rng([seed, 1])
    kwargs = _split_kwargs(split, val_fraction, tags, test_network, test_op_kind)
    parts = SPLITS.get(split)(groups, rng, train_workloads, test_workloads, **kwargs)
    if train_task_fraction < 1.0:
        parts = keep_training_tasks(parts, groups, train_task_fraction, np.random.default_rng([seed, 2]))
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
