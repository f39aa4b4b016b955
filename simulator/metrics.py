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
* kaggle_score  1 − top5_slowdown: TpuGraphs' tile score (not in the default set; see
                TILE_METRICS)

TpuGraphs collections are evaluated per graph over all its measured configs with
TILE_METRICS / LAYOUT_METRICS (ranking metrics only: a ranking-trained model is right
up to a per-graph shift, and tile runtimes are ratios to the default config anyway).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence

import numpy as np
from scipy import stats

from .registry import Registry

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


TILE_METRICS = ["kendall_tau", "top1_slowdown", "top5_slowdown", "top10_slowdown", "kaggle_score"]
# Kendall τ over all configs of a graph is the TpuGraphs/Kaggle layout metric. (opa is
# left out for TpuGraphs: it builds c × c matrices, and layout graphs have thousands of
# configs.)
LAYOUT_METRICS = ["kendall_tau", "top1_slowdown", "top5_slowdown", "top10_slowdown"]


def default_metric_names():
    return [n for n in METRICS.names() if METRICS.get(n).default]


def _clean(x: float) -> Optional[float]:
    return None if x is None or not math.isfinite(x) else x


def evaluate(pred_log: np.ndarray, true_log: np.ndarray, groups: Sequence[str],
             names: Optional[Sequence[str]] = None) -> Dict[str, Dict]:
    """{metric: {"mean": m, "per_workload": {group: v}}} from log runtimes (natural log);
    the mean is over workloads; NaN (e.g. τ of one config) is None and left out of it."""
    names = list(names or default_metric_names())
    pred_log, true_log = np.asarray(pred_log, np.float64), np.asarray(true_log, np.float64)
    groups = np.asarray(groups)
    out: Dict[str, Dict] = {n: {"mean": None, "per_workload": {}} for n in names}
    for g in sorted(set(groups.tolist()), key=_natural_key):
        member = groups == g
        p, t = np.exp(np.clip(pred_log[member], -700, 700)), np.exp(true_log[member])
        for n in names:
            out[n]["per_workload"][g] = _clean(METRICS.get(n).fn(p, t))
    for n in names:
        values = [v for v in out[n]["per_workload"].values() if v is not None]
        out[n]["mean"] = float(np.mean(values)) if values else None
    return out


def merge(results: Sequence[Dict[str, Dict]]) -> Dict[str, Dict]:
    """`evaluate`'s results of disjoint sets of workloads as one result: the per-workload
    values side by side (in `evaluate`'s order) and their mean, as `evaluate` of all of
    them at once would give."""
    out: Dict[str, Dict] = {}
    for result in results:
        for name, value in result.items():
            out.setdefault(name, {"mean": None, "per_workload": {}})["per_workload"].update(value["per_workload"])
    for value in out.values():
        value["per_workload"] = {g: value["per_workload"][g] for g in sorted(value["per_workload"], key=_natural_key)}
        values = [v for v in value["per_workload"].values() if v is not None]
        value["mean"] = float(np.mean(values)) if values else None
    return out


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
    return "\n".join(lines)


def higher_is_better(name: str) -> bool:
    return METRICS.get(name).higher_is_better
