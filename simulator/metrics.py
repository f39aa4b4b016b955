"""Metrics per workload, and their mean over workloads, by name.

Each metric takes the predicted and measured runtimes (seconds) of one workload's
configs. Ratios are fractions (0.05 = 5%); the table prints them as percentages.

* l1_log        mean |log p − log t|                      (natural log)
* l1_ms         mean |p − t| in milliseconds
* mape          mean |p − t| / t
* kendall_tau   scipy.stats.kendalltau(p, t) (τ-b); 0 if all predictions are equal
* opa           ordered-pair accuracy: over pairs with t_i ≠ t_j, the fraction whose
                predicted order agrees (a tie in p counts ½)
* topK_slowdown (min t over the K configs with the smallest p − min t) / min t
* top1_ape      |p − t| / t of the config with the smallest p
* best_ms       the fastest measured runtime of the workload (ms): with a top-K slowdown,
                what `topk_score` weighs tasks by
* kaggle_score  1 − top5_slowdown: TpuGraphs' tile score (not in the default set; see
                TILE_METRICS)

TpuGraphs collections are evaluated per graph over all its measured configs with
TILE_METRICS / LAYOUT_METRICS (ranking metrics only: a ranking-trained model is right
up to a per-graph shift, and tile runtimes are ratios to the default config anyway).

`topk_score` is TenSet's network-level score (Zheng et al., NeurIPS 2021, "top-k
score"): over a network's tasks t with weights w_t (the task's calls in the network),
Σ_t w_t·L*_t / Σ_t w_t·min_{j ∈ top-k predicted} L_{t,j}, L*_t the task's fastest
measured latency; 1 when every task's pick is its best. Per workload it needs
`best_ms` and `topK_slowdown` (min over the top k = L*·(1 + slowdown)).

Means say over how many workloads they are: a workload where a metric has no value
(τ of a single config, OPA without two different runtimes, an overflow) is `None` in
`per_workload`, and the metric's `count` is the number of workloads its `mean` is
over (`mean over 5 of 6 workloads` is printed under the table). The inputs themselves
must be finite: a NaN/inf prediction or measured runtime is an error (`evaluate`
raises), never a value dropped from some means and kept in others.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
from scipy import stats

from .registry import Registry, SimulatorError

METRICS: Registry = Registry("metric")


@dataclass
class Metric:
    fn: Callable[[np.ndarray, np.ndarray], float]
    higher_is_better: bool = False
    percent: bool = False  # printed as a percentage
    default: bool = True   # part of evaluate()'s default set


def register_metric(name: str, higher_is_better: bool = False, percent: bool = False,
                    default: bool = True):
    def add(fn):
        METRICS.register(name)(Metric(fn, higher_is_better, percent, default))
        return fn
    return add


@register_metric("l1_log")
def l1_log(p, t):
    return float(np.mean(np.abs(np.log(p) - np.log(t))))


@register_metric("l1_ms")
def l1_ms(p, t):
    return float(np.mean(np.abs(p - t)) * 1e3)


@register_metric("mape", percent=True)
def mape(p, t):
    return float(np.mean(np.abs(p - t) / t))


@register_metric("kendall_tau", higher_is_better=True)
def kendall_tau(p, t):
    if len(p) < 2:
        return float("nan")
    if np.all(p == p[0]):
        return 0.0
    return float(stats.kendalltau(p, t).statistic)


@register_metric("opa", higher_is_better=True)
def ordered_pair_accuracy(p, t):
    dt = np.sign(t[:, None] - t[None, :])
    dp = np.sign(p[:, None] - p[None, :])
    valid = np.triu(dt != 0, k=1)
    if not valid.any():
        return float("nan")
    score = np.where(dp == dt, 1.0, np.where(dp == 0, 0.5, 0.0))
    return float(score[valid].mean())


def top_k_slowdown(p, t, k):
    chosen = np.argsort(p, kind="stable")[:k]
    best = t.min()
    return float((t[chosen].min() - best) / best)


for _k in (1, 5, 10):
    register_metric(f"top{_k}_slowdown", percent=True)(lambda p, t, k=_k: top_k_slowdown(p, t, k))


def top_k_recall(p, t, k):
    """Share of the k fastest measured configs that are among the model's k first (no
    value when a group has at most k configs: every choice would hold them all)."""
    if len(t) <= k:
        return float("nan")
    chosen = set(np.argsort(p, kind="stable")[:k].tolist())
    return len(chosen & set(np.argsort(t, kind="stable")[:k].tolist())) / k


register_metric("top5_recall", higher_is_better=True, percent=True)(lambda p, t: top_k_recall(p, t, 5))


def picks_to_within(p, t, slowdown):
    """How many of the model's first configs must be measured before one is within `slowdown`
    of the group's best measured config (1: the first pick is): a tuner's budget to get there."""
    order = np.argsort(p, kind="stable")
    return float(np.argmax(t[order] <= t.min() * (1 + slowdown)) + 1)


register_metric("picks_to_25", default=False)(lambda p, t: picks_to_within(p, t, 0.25))


# TpuGraphs' tile metric: google-research-datasets/tpu_graphs,
# tpu_graphs/baselines/tiles/metrics.py, `top_error_performance`: "(ModelChosen - Best) /
# Best, where ModelChosen is the (measured) runtime of configuration chosen by model (we
# select the least of the top-k of the model) and Best is the minimum runtime of all
# configurations", averaged over kernels, for k in (1, 5, 10) — our topK_slowdown. The
# Kaggle competition ("Google - Fast or Slow?", tile:xla) scores a kernel by
# 2 − min(runtime of the 5 submitted configs) / min(all runtimes) = 1 − top5_slowdown.
@register_metric("kaggle_score", higher_is_better=True, default=False)
def kaggle_score(p, t):
    return 1.0 - top_k_slowdown(p, t, 5)


@register_metric("top1_ape", percent=True)
def top1_ape(p, t):
    i = int(np.argsort(p, kind="stable")[0])
    return float(abs(p[i] - t[i]) / t[i])


@register_metric("best_ms")
def best_ms(p, t):
    return float(t.min() * 1e3)


def topk_score(best: Sequence[float], slowdown: Sequence[float], weight: Sequence[float]) -> float:
    """TenSet's top-k score of a set of tasks (see the module docstring): Σ w·L* / Σ w·L*·(1 + s),
    from each task's fastest measured latency L* (`best`), the top-k slowdown s of the model's
    picks and the task's weight w. A non-finite, negative or empty input is an error (a score
    is never silently made of fewer tasks)."""
    best, slowdown, weight = (np.asarray(v, np.float64) for v in (best, slowdown, weight))
    if not (best.shape == slowdown.shape == weight.shape) or best.ndim != 1 or not len(best):
        raise SimulatorError(f"topk_score: best, slowdown and weight must be equal-length lists of tasks "
                             f"(got shapes {best.shape}, {slowdown.shape}, {weight.shape})")
    for name, v in (("best", best), ("slowdown", slowdown), ("weight", weight)):
        if not np.isfinite(v).all() or (v < 0).any():
            raise SimulatorError(f"topk_score: {name} holds a negative or non-finite value")
    if not (best > 0).all() or weight.sum() <= 0:
        raise SimulatorError("topk_score: every task needs a positive best latency, and the weights a positive sum")
    return float((weight * best).sum() / (weight * best * (1.0 + slowdown)).sum())


TILE_METRICS = ["kendall_tau", "top1_slowdown", "top5_slowdown", "top10_slowdown", "kaggle_score"]
# Kendall τ over all configs of a graph is the TpuGraphs/Kaggle layout metric. (opa is
# left out for TpuGraphs: it builds c × c matrices, and layout graphs have thousands of
# configs.)
LAYOUT_METRICS = ["kendall_tau", "top1_slowdown", "top5_slowdown", "top10_slowdown"]


def default_metric_names():
    return [n for n in METRICS.names() if METRICS.get(n).default]


def _clean(x: float) -> Optional[float]:
    return None if x is None or not math.isfinite(x) else x


def _check_finite(values: np.ndarray, groups: np.ndarray, what: str) -> None:
    bad = ~np.isfinite(values)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise SimulatorError(f"{what} is {values[first]} for {int(bad.sum())} of {len(values)} configs "
                             f"(first in workload {groups[first]}); no metric is computed from it")


def evaluate(pred_log: np.ndarray, true_log: np.ndarray, groups: Sequence[str],
             names: Optional[Sequence[str]] = None) -> Dict[str, Dict]:
    """{metric: {"mean": m, "count": k, "per_workload": {group: v}}} from log runtimes
    (natural log); the mean is over the k workloads where the metric has a value (None
    in per_workload: e.g. τ of one config). Non-finite inputs are an error."""
    names = list(names or default_metric_names())
    pred_log, true_log = np.asarray(pred_log, np.float64), np.asarray(true_log, np.float64)
    groups = np.asarray(groups)
    _check_finite(pred_log, groups, "the predicted log runtime")
    _check_finite(true_log, groups, "the measured log runtime")
    out: Dict[str, Dict] = {n: {"mean": None, "count": 0, "per_workload": {}} for n in names}
    for g in sorted(set(groups.tolist()), key=_natural_key):
        member = groups == g
        p, t = np.exp(np.clip(pred_log[member], -700, 700)), np.exp(true_log[member])
        for n in names:
            out[n]["per_workload"][g] = _clean(METRICS.get(n).fn(p, t))
    for n in names:
        values = [v for v in out[n]["per_workload"].values() if v is not None]
        out[n]["mean"] = float(np.mean(values)) if values else None
        out[n]["count"] = len(values)
    return out


def merge(results: Sequence[Dict[str, Dict]]) -> Dict[str, Dict]:
    """`evaluate`'s results of disjoint sets of workloads as one result: the per-workload
    values side by side (in `evaluate`'s order) and their mean, as `evaluate` of all of
    them at once would give."""
    out: Dict[str, Dict] = {}
    for result in results:
        for name, value in result.items():
            out.setdefault(name, {"mean": None, "count": 0, "per_workload": {}})["per_workload"].update(
                value["per_workload"])
    for value in out.values():
        value["per_workload"] = {g: value["per_workload"][g] for g in sorted(value["per_workload"], key=_natural_key)}
        values = [v for v in value["per_workload"].values() if v is not None]
        value["mean"] = float(np.mean(values)) if values else None
        value["count"] = len(values)
    return out


def coverage_notes(result: Dict[str, Dict]) -> List[str]:
    """One line per set of metrics whose mean is over fewer workloads than the table has:
    `mean over 5 of 6 workloads for kendall_tau, opa (no value: C7)`."""
    by_missing: Dict[tuple, List[str]] = {}
    for name, block in result.items():
        per = block.get("per_workload", {})
        missing = tuple(g for g, v in per.items() if v is None)
        if missing:
            by_missing.setdefault(missing, []).append(name)
    lines = []
    for missing, metrics in by_missing.items():
        total = len(result[metrics[0]]["per_workload"])
        shown = ", ".join(missing[:5]) + (f", … ({len(missing)})" if len(missing) > 5 else "")
        lines.append(f"mean over {total - len(missing)} of {total} workloads for {', '.join(metrics)} "
                     f"(no value: {shown})")
    return lines


def _natural_key(name: str):
    """C2 before C10."""
    import re
    return [int(s) if s.isdigit() else s for s in re.split(r"(\d+)", name)]


def format_table(result: Dict[str, Dict], title: str = "") -> str:
    """Workloads as rows, metrics as columns, the mean last."""
    names = list(result)
    if not names:
        return title
    groups = list(next(iter(result.values()))["per_workload"])
    header = ["workload"] + names
    rows = []
    for g in groups + ["mean"]:
        cells = [g]
        for n in names:
            v = result[n]["mean"] if g == "mean" else result[n]["per_workload"].get(g)
            if v is None:
                cells.append("-")
            elif METRICS.get(n).percent:
                cells.append(f"{100 * v:.2f}%")
            else:
                cells.append(f"{v:.4f}")
        rows.append(cells)
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = [title] if title else []
    lines.append("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for r in rows:
        if r[0] == "mean":
            lines.append("  ".join("-" * w for w in widths))
        lines.append("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    lines += coverage_notes(result)
    return "\n".join(lines)


def higher_is_better(name: str) -> bool:
    return METRICS.get(name).higher_is_better
