"""TVM's own MetaSchedule cost models: the gnn's rivals in `simulator.tune --cost-model` and
`benchmarks.metaschedule.tuning`, registered under names that say they are TVM's (the offline
models of `simulator.models`, `xgb` and `mlp` among them, are other models):

* `tvm-xgb` — MetaSchedule's `XGBModel` as TVM uses it: random until 100 measurements;
* `tvm-xgb-pretrained` — TenSet's recipe: `XGBModel` on MetaSchedule's PerStoreFeature rows,
  trained offline on a dataset's records (`pretrain_xgb`), no warm-up, retrained on all data
  at every update; from `--checkpoint` (a tar saved by `pretrain_xgb`) or `--pretrain-data`;
* `tvm-mlp` — MetaSchedule's `MLPModel` (see `mlp_cost_model`);
* `random` — MetaSchedule's `RandomModel`.

Each is wrapped in `TimedCostModel`, so its share of a tuning run is measured as the gnn's is.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

from simulator.registry import SimulatorError

from .cost_model import (CostModelOptionError, TimedCostModel, feature_context, measure_candidate,
                         register_tuning_cost_model)


def xgb_cost_model(seed: int = 0, warmup: int = 100, adaptive: bool = True):
    """MetaSchedule's XGBModel on one core (`warmup`: measurements before it stops
    predicting at random; TVM's default 100)."""
    from tvm.s_tir.meta_schedule.cost_model import XGBModel
    from tvm.s_tir.meta_schedule.cost_model.xgb_model import XGBConfig

    return XGBModel(config=XGBConfig(seed=seed, nthread=1), num_warmup_samples=warmup, num_tuning_cores=1,
                    verbose_eval=10 ** 6, adaptive_training=adaptive)


def pretrain_xgb(paths: Sequence[str], out: Optional[str] = None, seed: int = 0, progress: bool = False,
                 leave_out: Sequence[str] = ()):
    """TenSet's recipe: MetaSchedule's XGBModel trained offline on the successful
    records of the MetaSchedule databases `paths` (PerStoreFeature rows of each record's
    replayed schedule, costs normalised per workload as XGBModel does), then set to
    update online with no warm-up and a full retrain at every update. Saved to `out`
    (XGBModel's own tar of model and data) if given. `leave_out`: workload keys whose
    records are not trained on (a tuned network's tasks, for a fair comparison)."""
    from tvm.s_tir import meta_schedule as ms

    from extract.metaschedule.database import read_databases, target_of, workload_module

    try:
        jobs, report = read_databases(list(paths), skip_bad=True)
    except (OSError, ValueError) as e:
        raise SimulatorError(f"--pretrain-data: {e}") from None
    by_group: Dict[str, List[Any]] = {}
    skip = set(leave_out)
    for job in jobs:
        if job.group not in skip:
            by_group.setdefault(job.group, []).append(job)
    model = xgb_cost_model(seed, warmup=0, adaptive=True)
    counts = {"records": 0, "workloads": 0, "bad_lines": len(report.bad_lines), "no_longer_apply": 0,
              "errors_set_aside": sum(sum(c.values()) for c in report.errors.values())}
    for i, (group, group_jobs) in enumerate(sorted(by_group.items())):
        model.adaptive_training = i < len(by_group) - 1  # the last group's update trains on all
        context = feature_context(workload_module(group_jobs[0].workload), target_of(group_jobs[0].target))
        candidates, results = [], []
        for job in group_jobs:
            try:
                sch = job.schedule()
            except Exception:  # noqa: BLE001 - a trace that no longer applies: counted, not trained on
                counts["no_longer_apply"] += 1
                continue
            candidates.append(measure_candidate(sch))
            results.append(ms.runner.RunnerResult(run_secs=list(job.run_secs), error_msg=None))
        if progress:
            print(f"xgb pre-training: {group}: {len(candidates)} records", flush=True)
        counts["records"] += len(candidates)
        counts["workloads"] += bool(candidates)
        model.update(context, candidates, results)
    if not counts["records"]:
        first = f"; first bad line {report.bad_lines[0][0]}:{report.bad_lines[0][1]}: {report.bad_lines[0][2]}" \
            if report.bad_lines else ""
        raise SimulatorError(f"--pretrain-data {' '.join(paths)}: no successful record to pre-train on "
                             f"({describe_pretraining(counts)}{first})")
    model.adaptive_training = False
    model.pretraining = counts
    if out:
        model.save(out)
    return model


def describe_pretraining(counts: Dict[str, int]) -> str:
    """`1200 records of 40 workloads; 3 bad lines skipped, 2 traces no longer apply, 9 failed
    records set aside` (what `pretrain_xgb` trained on and left out)."""
    return (f"{counts['records']} records of {counts['workloads']} workloads; {counts['bad_lines']} bad lines "
            f"skipped, {counts['no_longer_apply']} traces no longer apply, {counts['errors_set_aside']} failed "
            f"records set aside")


def load_pretrained_xgb(path: str, seed: int = 0):
    """A saved pre-trained XGBModel (`pretrain_xgb(..., out=path)`), set to update online
    with a full retrain at every update."""
    model = xgb_cost_model(seed, warmup=0, adaptive=False)
    model.load(path)
    return model


def _step_lr_class(base):
    class StepLR(base):
        """StepLR without the `verbose` argument TVM's MLPModel passes (removed in torch 2.x)."""

        def __init__(self, *args, verbose=None, **kwargs):  # noqa: ARG002
            super().__init__(*args, **kwargs)

    return StepLR


def mlp_cost_model(seed: int = 0):
    """MetaSchedule's MLPModel (segment-sum MLP on PerStoreFeature rows), untrained, with
    two fixes: its full training passes `verbose` to torch's StepLR, which this torch no
    longer takes (a subclass that drops it is swapped in for the call); and it holds out
    `floor(0.2 × tasks)` tasks for validation, none when fewer than 5 tasks are tuned, and fails (`need at least one array to
    concatenate`); here it validates on the training tasks in that case."""
    import random

    from tvm.s_tir.meta_schedule.cost_model import mlp_model

    class Trainer(mlp_model.SegmentSumMLPTrainer):
        def train_full(self):  # noqa: D102
            step_lr = mlp_model.torch.optim.lr_scheduler.StepLR
            mlp_model.torch.optim.lr_scheduler.StepLR = _step_lr_class(step_lr)
            try:
                return self._train_full()
            finally:
                mlp_model.torch.optim.lr_scheduler.StepLR = step_lr

        def _train_full(self):
            keys = list(self.state.data.keys())
            if math.floor(len(keys) * self.test_split) >= 1:
                return super().train_full()
            saved_data, saved_random = self.state.data, mlp_model.random
            copies = {f"{k}#validation": g for k, g in saved_data.items()}

            class Picker:  # the held-out "tasks": copies of the training tasks
                @staticmethod
                def sample(population, k):
                    return [p for p in population if p in copies]

            from collections import OrderedDict
            self.state.data = OrderedDict(list(saved_data.items()) + list(copies.items()))
            mlp_model.random = Picker
            try:
                return super().train_full()
            finally:
                mlp_model.random = saved_random
                self.state.data = saved_data

    random.seed(seed)
    return mlp_model.MLPModel(trainer=Trainer())


def _check_pretrained_options(given: Dict[str, Any]) -> None:
    if bool(given.get("checkpoint")) == bool(given.get("pretrain_data")):
        raise CostModelOptionError("tvm-xgb-pretrained needs one of --checkpoint (a saved pre-trained XGBModel) "
                                   "or --pretrain-data (MetaSchedule databases to train on)")


@register_tuning_cost_model("tvm-xgb")
def _tvm_xgb(checkpoint: Optional[str], seed: int, workers: int, pretrain_data: Sequence[str]) -> TimedCostModel:
    return TimedCostModel(xgb_cost_model(seed))


@register_tuning_cost_model("tvm-xgb-pretrained", options=("checkpoint", "pretrain_data"),
                            check=_check_pretrained_options)
def _tvm_xgb_pretrained(checkpoint: Optional[str], seed: int, workers: int,
                        pretrain_data: Sequence[str]) -> TimedCostModel:
    if checkpoint:
        return TimedCostModel(load_pretrained_xgb(checkpoint, seed))
    if not pretrain_data:
        raise SimulatorError("tvm-xgb-pretrained needs --checkpoint (a saved pre-trained XGBModel) or "
                             "--pretrain-data (MetaSchedule databases to train on)")
    return TimedCostModel(pretrain_xgb(pretrain_data, seed=seed))


@register_tuning_cost_model("tvm-mlp")
def _tvm_mlp(checkpoint: Optional[str], seed: int, workers: int, pretrain_data: Sequence[str]) -> TimedCostModel:
    return TimedCostModel(mlp_cost_model(seed))


@register_tuning_cost_model("random")
def _random(checkpoint: Optional[str], seed: int, workers: int, pretrain_data: Sequence[str]) -> TimedCostModel:
    from tvm.s_tir.meta_schedule.cost_model import RandomModel

    return TimedCostModel(RandomModel(seed=seed))
