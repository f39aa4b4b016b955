"""Networks → MetaSchedule tuning tasks, deduplicated across networks, as a task table.

    tasks = extract_tasks(["resnet50", "bert"], target)
    save_tasks("tasks.json", tasks); tasks = load_tasks("tasks.json")

Import path (what works with torch 2.13 and TVM 0.27 here): `torch.export.export` of the
module in eval mode → `from_exported_program(..., run_ep_decomposition=False)` (keeping
torch's high-level ops: linear stays a matmul+bias that fuses with its epilogue, GELU and
LayerNorm stay one operator each, as a deployment compiles them; with PyTorch's
decomposition a linear splits into reshape/matmul/add tasks; batch norm goes through
`_inference_batch_norm`, as TVM's converter misreads that overload's eps) → the passes of TVM's
`static_shape_tuning` pipeline before tuning (FoldBatchnormToConv2D, then
DecomposeOpsForInference, CanonicalizeBindings and the zero pipeline: legalise, fold
constants, fuse) → `ms.relax_integration.extract_tasks`. Weights are random constants
(nothing is downloaded); folding batch norm into the conv weights gives the conv + bias +
activation tasks a deployed network runs.

Each task keeps its weight (how often one inference calls it) per network of origin. Tasks
are merged across networks by their stable `workload_key` (two networks calling the same
computation on the same shapes give one task whose `networks` names both). The table
stores each task's IRModule (TVM JSON), so a measurement started from it never depends on
re-running the import.
"""
from __future__ import annotations

import gzip
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Dict, List, Sequence

from extract.fileio import atomic_write
from extract.tir.workload_key import describe

TABLE_VERSION = 2  # 2: keys carry the computation digest (datasets.rekey upgrades a table)


@dataclass
class TaskInfo:
    """One tuning task of the dataset (a row of `tasks.json`)."""

    key: str                        # extract.tir.workload_key.workload_key
    kind: str                       # operator kind (extract.tir.workload_key.KINDS)
    shapes: List[List[int]]         # argument shapes, output last
    dtype: str
    flops: float                    # TVM's estimate for one call
    networks: Dict[str, int]        # network → calls per inference (MetaSchedule's weight)
    task_names: Dict[str, str]      # network → Relax's name for it (fused_conv2d13_add15_…)
    mod_json: str = field(repr=False)  # tvm.ir.save_json of the task's IRModule

    @property
    def weight(self) -> int:
        """Calls per inference summed over the networks it appears in."""
        return sum(self.networks.values())

    @property
    def mod(self):
        import tvm

        return tvm.ir.load_json(self.mod_json)


def import_network(name: str):
    """The Relax IRModule of network `name` (see `extract.metaschedule.networks`), ready for task
    extraction (legalised and fused)."""
    import torch

    from .networks import get_network

    spec = get_network(name)
    torch.manual_seed(0)
    model = spec.build()
    return import_module(model, spec.example_inputs())


def import_module(model, inputs: tuple):
    """The Relax IRModule of torch `model` in eval mode called on `inputs` (its weights
    become constants), legalised and fused for task extraction."""
    import torch
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    with torch.no_grad():
        exported = torch.export.export(model.eval(), inputs)
    mod = from_exported_program(exported, keep_params_as_input=False, run_ep_decomposition=False,
                                custom_convert_map={"batch_norm.default": _inference_batch_norm})
    passes = [relax.transform.FoldBatchnormToConv2D(), relax.transform.DecomposeOpsForInference(),
              relax.transform.CanonicalizeBindings(), relax.get_pipeline("zero")]
    return tvm.transform.Sequential(passes)(mod)


def _inference_batch_norm(node, importer):
    """Relax for `aten.batch_norm(x, weight, bias, mean, var, training, momentum, eps, cudnn)`
    in eval mode. TVM 0.27's own converter reads this overload as if it were
    `_native_batch_norm_legit` (momentum taken for eps, training assumed), which gives
    eps 0.1 instead of the network's."""
    import numpy as np
    from tvm import relax

    x, weight, bias, mean, var, training, momentum, eps = node.args[:8]
    if training:
        raise ValueError(f"{node.name}: batch norm in training mode; networks are exported in eval mode")
    channels, dtype = int(importer.shape_of(importer.env[x])[1]), importer.env[x].ty.dtype.dtype

    def param(arg, fill: float):
        return importer.env[arg] if arg is not None else relax.const(np.full(channels, fill), dtype=dtype)

    norm = relax.op.nn.batch_norm(importer.env[x], param(weight, 1.0), param(bias, 0.0), param(mean, 0.0),
                                  param(var, 1.0), axis=1, epsilon=eps, center=bias is not None,
                                  scale=weight is not None, momentum=momentum, training=False)
    return importer.block_builder.emit(relax.TupleGetItem(importer.block_builder.emit(norm), 0))


def network_tasks(name: str, target) -> List[TaskInfo]:
    """The tasks of one network, one per distinct workload key."""
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.analysis import estimate_tir_flops

    with target:
        mod = import_network(name)
    tasks: Dict[str, TaskInfo] = {}
    for task in ms.relax_integration.extract_tasks(mod, target):
        func_mod = task.dispatched[0]
        parts = describe(func_mod, target)
        key = str(parts)
        if key in tasks:  # structurally different IR (block names) computing the same thing
            tasks[key].networks[name] += int(task.weight)
            continue
        tasks[key] = TaskInfo(key, parts.kind, [list(s) for s in parts.shapes], parts.dtype,
                              float(estimate_tir_flops(func_mod)), {name: int(task.weight)},
                              {name: str(task.task_name)}, tvm.ir.save_json(func_mod))
    return list(tasks.values())


def merge_tasks(per_network: Sequence[Sequence[TaskInfo]]) -> List[TaskInfo]:
    """One task per key over all networks, weights and names kept per network; the
    order is first appearance (networks in the order given)."""
    merged: Dict[str, TaskInfo] = {}
    for tasks in per_network:
        for task in tasks:
            if task.key not in merged:
                merged[task.key] = TaskInfo(**{**asdict(task), "networks": dict(task.networks),
                                               "task_names": dict(task.task_names)})
                continue
            into = merged[task.key]
            for net, weight in task.networks.items():
                into.networks[net] = into.networks.get(net, 0) + weight
            into.task_names.update(task.task_names)
    return list(merged.values())


def extract_tasks(networks: Sequence[str], target) -> List[TaskInfo]:
    """The deduplicated tasks of `networks` for `target`."""
    return merge_tasks([network_tasks(name, target) for name in networks])


def save_tasks(path: str, tasks: Sequence[TaskInfo], target_json: str = "") -> None:
    """Write the task table (one JSON document; `target_json` records the target)."""
    doc = {"version": TABLE_VERSION, "target": target_json,
           "tasks": [asdict(t) for t in tasks]}
    with atomic_write(path) as f:
        json.dump(doc, f, indent=1)


def load_tasks(path: str) -> List[TaskInfo]:
    """The task table at `path` (`tasks.json`, or gzip-compressed as shipped); anything
    else is a ValueError naming the file (and the row)."""
    try:
        with _open_text(path) as f:
            doc = json.load(f)
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path}: not a task table (JSON, or gzip of it): {e}") from None
    if not isinstance(doc, dict) or doc.get("version") != TABLE_VERSION:
        found = doc.get("version") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"{path}: task table version {found}, expected {TABLE_VERSION}"
                         + (" (keys without the computation digest: `python -m datasets.rekey FOLDER`)"
                            if found == 1 else ""))
    rows = doc.get("tasks")
    if not isinstance(rows, list):
        raise ValueError(f"{path}: a task table holds a list under \"tasks\"")
    return [_task_row(path, i, row) for i, row in enumerate(rows)]


def _open_text(path: str):
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", encoding="utf-8") if gzipped else open(path, encoding="utf-8")


def _task_row(path: str, index: int, row) -> TaskInfo:
    wanted = {f.name: f.type for f in fields(TaskInfo)}
    if not isinstance(row, dict) or set(row) != set(wanted):
        have = sorted(row) if isinstance(row, dict) else type(row).__name__
        raise ValueError(f"{path}: task {index}: not a task row (fields {have}, expected {sorted(wanted)})")
    for name, kind in (("key", str), ("kind", str), ("dtype", str), ("mod_json", str), ("networks", dict),
                       ("task_names", dict), ("shapes", list)):
        if not isinstance(row[name], kind):
            raise ValueError(f"{path}: task {index}: {name} is {type(row[name]).__name__}, expected {kind.__name__}")
    return TaskInfo(**row)


def summary(tasks: Sequence[TaskInfo]) -> Dict[str, Dict[str, int]]:
    """Counts of tasks per network and per operator kind (a task in two networks counts
    in both)."""
    per_network: Dict[str, int] = {}
    per_kind: Dict[str, int] = {}
    for task in tasks:
        per_kind[task.kind] = per_kind.get(task.kind, 0) + 1
        for net in task.networks:
            per_network[net] = per_network.get(net, 0) + 1
    return {"tasks": {"total": len(tasks)}, "per_network": per_network, "per_kind": per_kind}
