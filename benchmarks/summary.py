"""The one-screen summary that opens docs/RESULTS.md: the few figures a user reads first,
each from the same result files as its section and linked to it.

Rows appear only for the results that exist; a row names its section by the heading the
report wrote, so a renamed section cannot leave a dead link.
"""
from __future__ import annotations

import glob
import os
import re
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .common import best_by, fmt, load_json, markdown_table
from .metaschedule.tuning import GNN_FILTER
from .networks import dataset_name, load_results, result_label
from .xla_layout import load_results as xla_layout_results, summary_row as xla_layout_row

# what a summary row is about → the start of its section's heading
SECTIONS = {"tuning": "MetaSchedule tuning of held-out operators",
            "networks": "Cross-network and cross-operator generalisation",
            "accuracy": "Accuracy: cross-workload split",
            "speed": "Speed and memory",
            "cross_cpu": "New hardware",
            "xla_layout": "Measured XLA layout collection (",   # not its ", programs held out" section
            "xla_layout_programs": "Measured XLA layout collection, programs held out"}
TUNING_POINT = 64   # trials: the first point of the tuning benchmark (its first round)


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading ('## A (b)' → '#a-b')."""
    text = heading.lstrip("#").strip().lower()
    return "#" + re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _link(text: str, topic: str, headings: Sequence[str]) -> str:
    """A link to the section of `topic` ('networks', or 'networks:<dataset>' for one dataset's)."""
    topic, _, detail = topic.partition(":")
    found = next((h for h in headings if h.lstrip("#").strip().startswith(SECTIONS[topic])
                  and (not detail or f"`{detail}`" in h)), None)
    return f"[{text}]({anchor(found)})" if found else text


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def tuning_rows(res: Dict[str, Any]) -> List[List[str]]:
    """Per held-out operator: the best latency of the gnn as `simulator.tune` runs it by default
    (two-stage scoring, `gnn-filter`, where the benchmark ran it; else the plain gnn), then the
    other gnn, TVM's XGBModel (tvm-xgb), the pre-trained XGBModel (tvm-xgb-pretrained) and
    random, at the benchmark's first point and its last (means over seeds), and the CPU they
    were timed on where the result recorded it."""
    rows = []
    cpu = (res.get("machine") or {}).get("llvm_cpu")
    where = f"held out, timed on `{cpu}`" if cpu else "held out"
    for op in res["held_out"]:
        mine = [r for r in res["summary"] if r["workload"] == op]
        default = next((m for m in (GNN_FILTER, "gnn") if any(r["cost_model"] == m for r in mine)), None)
        if default is None:
            continue
        points = sorted({r["trials"] for r in mine if r["cost_model"] == default})
        points = [TUNING_POINT if TUNING_POINT in points else points[0]] + ([points[-1]] if len(points) > 1 else [])
        at = {(r["cost_model"], r["trials"]): r for r in mine}

        def best(model: str) -> Optional[str]:
            found = [at.get((model, p)) for p in points]
            return None if None in found else " / ".join(_us(r["mean_s"]) for r in found)
        label = "gnn (`simulator.tune`'s default: two-stage)" if default == GNN_FILTER else "gnn"
        names = ([("gnn scoring every candidate", "gnn")] if default == GNN_FILTER else []) + \
            [(m, m) for m in ("tvm-xgb", "tvm-xgb-pretrained", "random")]
        rivals = [f"{name} {best(model)}" for name, model in names if best(model)]
        rows.append([f"tuning `{op}` ({where}), best after {' / '.join(map(str, points))} trials, "
                     f"mean of {at[(default, points[0])]['seeds']} seeds",
                     f"{label} **{best(default)}**; " + ", ".join(rivals), "tuning"])
    return rows


def _mean(values) -> Optional[float]:
    values = [v for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(values)) if values else None


def network_rows(nets: Dict[str, Any]) -> List[List[str]]:
    """Leave one network out: each model's mean τ over the held-out networks (and TenSet's
    top-k scores where the rows have them), best first, against the measurement ceiling."""
    rows = [r for r in nets["rows"] if r["axis"] == "network" and not r.get("shipped")]
    helds = sorted({r["held"] for r in rows})
    if not rows:
        return []
    ceiling = _mean(nets["ceilings"].get(f"network:{h}", {}).get("tau") for h in helds)
    by_model: Dict[str, Dict[str, Optional[float]]] = {}
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        by_model[model] = {k: _mean(r.get(k) for r in mine) for k in ("kendall_tau", "top1_score", "top5_score")}
    ranked = sorted(by_model, key=lambda m: -(by_model[m]["kendall_tau"] or -1))[:3]
    cells = []
    for m in ranked:
        v = by_model[m]
        scores = (f" (top-1 / top-5 score {v['top1_score']:.2f} / {v['top5_score']:.2f})"
                  if v["top1_score"] is not None and v["top5_score"] is not None else "")
        cells.append(f"{m} τ {v['kendall_tau']:.3f}{scores}")
    ceiling_text = f"; measurement ceiling τ {ceiling:.3f}" if ceiling is not None else ""
    dataset = dataset_name(nets.get("dataset", ""))
    return [[f"ranking schedules of a network never trained on ({result_label(nets)}, leave one of {len(helds)} "
             "out, mean)",
             "; ".join(cells) + ceiling_text, f"networks:{dataset}"]]


def networks_rows(results: str) -> List[List[str]]:
    """Leave one network out from the dataset with the most records; leave one operator kind
    out from the largest dataset whose results have that axis."""
    found = load_results(results)
    return (next(filter(None, map(network_rows, found)), [])
            + next(filter(None, map(kind_rows, found)), []))


def kind_rows(nets: Dict[str, Any]) -> List[List[str]]:
    """Leave one operator kind out: the best model's mean τ against the noise ceiling."""
    summary = nets.get("kind_summary") or []
    ceiling = next((r for r in summary if r["model"] == "noise ceiling"), None)
    models = [r for r in summary if r["model"] != "noise ceiling" and r.get("mean_tau") is not None]
    if not models:
        return []
    best = max(models, key=lambda r: r["mean_tau"])
    text = f"{best['model']} τ {best['mean_tau']:.3f} (worst kind {best['worst_tau']:.3f})"
    if ceiling:
        text += f"; measurement ceiling τ {ceiling['mean_tau']:.3f}"
    dataset = dataset_name(nets.get("dataset", ""))
    return [[f"ranking schedules of an operator kind never trained on ({result_label(nets)}, leave one of "
             f"{best['kinds']} out, mean)",
             text, f"networks:{dataset}"]]


def xla_layout_rows(results: str) -> List[List[str]]:
    """The measured XLA layout collection: the best model on the held-out model families, and
    on the held-out programs."""
    return [row for res in xla_layout_results(results) for row in xla_layout_row(res)]


def accuracy_rows(acc: Dict[str, Any]) -> List[List[str]]:
    """AutoTVM conv2d, held-out workloads: the best model's τ and top-5 slowdown."""
    summary = acc.get("summary") or {}
    if not summary:
        return []
    best = best_by(summary, lambda m: summary[m]["mean"]["kendall_tau"][0])
    if best is None:
        return []
    tau, std, seeds = summary[best]["mean"]["kendall_tau"]
    top5 = summary[best]["mean"].get("top5_slowdown", [None])[0]
    return [[f"AutoTVM conv2d, {len(summary[best]) - 1} held-out workloads (mean of {seeds} seeds)",
             f"{best} τ {fmt(tau, 'kendall_tau', std)}, top-5 slowdown {fmt(top5, 'top5_slowdown')}", "accuracy"]]


def cross_cpu_rows(res: Dict[str, Any]) -> List[List[str]]:
    """A model pre-trained on one CPU ranking another's tasks, before and after fine-tuning,
    against a model trained on the new CPU alone."""
    rows = {(r["model"], r["k"]): r for r in res["summary"]}
    ks = sorted({k for _, k in rows})
    cells = [f"{model} k={k}: τ {rows[model, k]['kendall_tau'][0]:.3f}, top-5 score {rows[model, k]['top5_score'][0]:.2f}"
             for model in dict.fromkeys(m for m, _ in rows) for k in (ks[0], ks[-1]) if (model, k) in rows
             and rows[model, k]["kendall_tau"][0] is not None]
    return [[f"new hardware: pre-trained on {res['source_cpu']}, ranking {res['tasks']} tasks on {res['target_cpu']} "
             f"(k of its records per task to fine-tune)", "; ".join(cells), "cross_cpu"]]


def speed_rows(speed: Dict[str, Any]) -> List[List[str]]:
    gcn = speed.get("models", {}).get("gcn", {}).get("infer_configs_per_s")
    return [["scoring speed (2 cores, batched)", f"gcn {gcn:,.0f} configs/s", "speed"]] if gcn else []


def summary_section(results: str, headings: Sequence[str]) -> List[str]:
    """'## In one screen': the rows whose results exist, each linked to its section."""
    rows = []
    tuning = load_json(results, "ms_tuning.json")
    acc, speed = load_json(results, "accuracy.json"), load_json(results, "speed.json")
    rows += tuning_rows(tuning) if tuning else []
    rows += networks_rows(results)
    rows += xla_layout_rows(results)
    for path in sorted(glob.glob(os.path.join(results, "cross_cpu_*_*.json"))):
        rows += cross_cpu_rows(load_json(results, os.path.basename(path)))
    rows += accuracy_rows(acc) if acc else []
    rows += speed_rows(speed) if speed else []
    if not rows:
        return []
    table = [[question, answer, _link("details", topic, headings)] for question, answer, topic in rows]
    return ["## In one screen", "", markdown_table(["question", "answer", ""], table, "lll"), ""]
