"""Why the program graphs do not transfer between workloads, measured.

    python -m benchmarks.transfer.analysis [--spec gcn-inv-arf-noext-lane | --model-flags FLAGS …]
        [--data shipped] [--results docs/results] [--epochs 40] [--seed 0]
        [--train-workloads C1 … C12] [--tag TAG]

The model is a transfer spec (`--spec`, a name of `benchmarks.transfer.specs.MODEL_SPECS`,
default `DEFAULT_SPEC`, the best one-workload model of the transfer matrix) or raw
simulator.train flags (`--model-flags`, last on the line); either way it is trained
exactly as the transfer matrix trains it (`benchmarks.transfer.flags_argv`: the
cross-workload split, 20% of the training workload's configs for validation, one thread).

Two measurements, written to RESULTS/transfer_analysis[_TAG].json and drawn in
RESULTS/transfer_features[_TAG].png:

1. **Which node features shift between workloads**, over every column the data has —
   each extracted column (`node_features`) and each derived column
   (`simulator.data.features.DERIVED`) computed from them — each marked `read_by_model` when
   the model reads it. For each column, over the nodes of the types it applies to (the
   types on which it is ever non-zero), each config's graph is summarised by the
   column's mean over those nodes; then
   * `between_share`: the share of the variance of that summary that lies between
     workloads (η² of a one-way ANOVA by workload): near 1 the column mostly says
     *which workload* this is, near 0 it varies with the config;
   * `out_of_range`: the share of a test workload's node values (nodes of those types)
     outside the range the training workload's nodes of the same type take, mean over
     the ordered pairs of workloads: where a model trained on one must extrapolate;
   * `within_rho`: Spearman ρ of the summary with the log runtime within each
     workload, its mean and `sign_agreement`, the share of workloads where ρ has the
     sign of the median ρ (a column whose relation to runtime flips between workloads
     cannot transfer).
2. **What the model keys on.** The model is trained on each single workload; then each
   column *the model reads* (its feature set, derived columns included: the source's
   `ModelInfo.feature_names`) is in turn *ablated* in the model's input — set, on every
   node, to the training nodes' mean of that input for the node's type — and the model
   re-scored: Δτ on the training workload's own validation configs (how much the model
   relies on the column) and on the eleven other workloads (Δτ > 0: the model ranks
   other workloads *better* without the column, i.e. the column misleads it there), and
   the change of the top-5 slowdown on the other workloads.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..common import COUNT, DEFAULT_RESULTS, SEED, cli, locked_outputs, log, natural_key, write_json

# the transfer spec analysed by default (and by benchmarks.all): the best one-workload model
DEFAULT_SPEC = "gcn-inv-arf-noext-lane"


def model_flags(spec: Optional[str] = None, flags: Optional[Sequence[str]] = None) -> Tuple[str, List[str]]:
    """(name, simulator.train model flags) of the analysed model: transfer spec `spec`
    (`benchmarks.transfer.specs.MODEL_SPECS`), or raw `flags` (named by them); neither: `DEFAULT_SPEC`."""
    from simulator.registry import SimulatorError

    from .specs import MODEL_SPECS
    if spec is not None and flags:
        raise SimulatorError("give the analysed model as --spec or as --model-flags, not both")
    if flags:
        return " ".join(flags), list(flags)
    spec = spec or DEFAULT_SPEC
    if spec not in MODEL_SPECS:
        raise SimulatorError(f"unknown transfer spec {spec!r} (known: {', '.join(MODEL_SPECS)})")
    return spec, list(MODEL_SPECS[spec])


# ---------------------------------------------------------------- 1. which columns shift
def data_columns(samples, collection) -> Tuple[List[str], List[np.ndarray]]:
    """Every column of the data: its extracted columns (named by `collection`, else f0, f1,
    …) and the derived columns they give (`simulator.data.features.DERIVED`); each sample's
    (nodes, columns) matrix of them."""
    from simulator.data.features import derivable, named_columns, with_derived
    width = int(samples[0].node_features.shape[1])
    names = named_columns(getattr(collection, "feature_names", None), width)
    if names is None:
        return [f"f{i}" for i in range(width)], [np.asarray(s.node_features, np.float64) for s in samples]
    derived = derivable(names)
    return names + derived, [np.asarray(with_derived(s.node_features, names, derived, s.edges), np.float64)
                             for s in samples]


class _Nodes:
    """Every node of every sample, concatenated: type, feature row, sample and workload."""

    def __init__(self, samples, features: Sequence[np.ndarray]):
        self.types = np.concatenate([np.asarray(s.node_types, np.int64) for s in samples])
        self.x = np.concatenate(list(features), axis=0)
        counts = np.array([len(s.node_types) for s in samples])
        self.sample = np.repeat(np.arange(len(samples)), counts)
        self.num_samples = len(samples)
        groups = [s.group for s in samples]
        self.workloads = sorted(set(groups), key=natural_key)
        where = {g: i for i, g in enumerate(self.workloads)}
        self.sample_group = np.array([where[g] for g in groups])
        self.group = self.sample_group[self.sample]

    def applicable(self, column: int) -> np.ndarray:
        """Node-type ids on which `column` is ever non-zero."""
        return np.unique(self.types[self.x[:, column] != 0])

    def summary(self, column: int, types: np.ndarray) -> np.ndarray:
        """Per sample: the column's mean over its nodes of `types` (0 where it has none)."""
        on = np.isin(self.types, types)
        total = np.bincount(self.sample[on], weights=self.x[on, column], minlength=self.num_samples)
        count = np.bincount(self.sample[on], minlength=self.num_samples)
        return np.where(count > 0, total / np.maximum(count, 1), 0.0)


def applicable_types(samples, column: int) -> np.ndarray:
    """Node-type ids on which `column` (of `node_features`) is ever non-zero."""
    return _Nodes(samples, [s.node_features for s in samples]).applicable(column)


def feature_shift(samples, feature_names: Sequence[str],
                  features: Optional[Sequence[np.ndarray]] = None) -> Dict[str, Dict[str, float]]:
    """Per column (of `features`, one (nodes, columns) matrix per sample; default the
    samples' `node_features`): between-workload variance share, share out of the training
    workload's range, within-workload ρ with the log runtime. Columns never non-zero are left out."""
    from scipy.stats import spearmanr
    nodes = _Nodes(samples, features if features is not None else [s.node_features for s in samples])
    y = np.log([s.runtimes[0] for s in samples])
    g = nodes.sample_group
    out: Dict[str, Dict[str, float]] = {}
    for c, name in enumerate(feature_names):
        types = nodes.applicable(c)
        if types.size == 0:
            continue
        summary = nodes.summary(c, types)
        total = summary.var()
        means = np.array([summary[g == k].mean() for k in range(len(nodes.workloads))])
        between = np.mean((means[g] - summary.mean()) ** 2) if total > 0 else 0.0
        rhos = np.array([float(spearmanr(summary[g == k], y[g == k]).statistic)
                         for k in range(len(nodes.workloads)) if np.ptp(summary[g == k]) > 0])
        median = np.median(rhos) if rhos.size else 0.0
        out[name] = {"between_share": float(between / total) if total > 0 else 0.0,
                     "out_of_range": _out_of_range(nodes, c, types),
                     "within_rho": float(rhos.mean()) if rhos.size else 0.0,
                     "within_abs_rho": float(np.abs(rhos).mean()) if rhos.size else 0.0,
                     "sign_agreement": float(np.mean(np.sign(rhos) == np.sign(median))) if rhos.size else 0.0,
                     "workloads_varying": int(rhos.size)}
    return out


def out_of_range(samples, column: int, types: np.ndarray) -> float:
    """Mean over ordered pairs of workloads (a, b) of the share of b's node values (nodes of
    `types`) outside the range a's nodes of the same type take: what a model trained on a
    sees only on b, where it must extrapolate."""
    return _out_of_range(_Nodes(samples, [s.node_features for s in samples]), column, types)


def _out_of_range(nodes: _Nodes, column: int, types: np.ndarray) -> float:
    k = len(nodes.workloads)
    values = {(w, int(t)): nodes.x[(nodes.group == w) & (nodes.types == t), column] for w in range(k) for t in types}
    shares = []
    for a in range(k):
        for b in range(k):
            if a == b:
                continue
            outside = total = 0
            for t in types:
                vb, va = values[(b, int(t))], values[(a, int(t))]
                if vb.size == 0:
                    continue
                total += vb.size
                outside += vb.size if va.size == 0 else int(((vb < va.min()) | (vb > va.max())).sum())
            if total:
                shares.append(outside / total)
    return float(np.mean(shares)) if shares else 0.0


# ---------------------------------------------------------------- 2. what the model keys on
def type_means(items) -> np.ndarray:
    """(node types, model columns): the mean of each model input over the nodes of each
    type in prepared `items` (0 for a type without nodes)."""
    x = np.concatenate([it.x.numpy() for it in items]).astype(np.float64)
    types = np.concatenate([it.types.numpy() for it in items])
    n = int(types.max()) + 1 if types.size else 1
    count = np.bincount(types, minlength=n)
    sums = np.stack([np.bincount(types, weights=x[:, c], minlength=n) for c in range(x.shape[1])], axis=1)
    return sums / np.maximum(count, 1)[:, None]


def ablated(items, column: int, means: np.ndarray):
    """`items` (prepared, the model's input) with input `column` of every node set to
    `means[node type, column]` (a type the means do not know: 0); the items are not changed."""
    out = []
    for it in items:
        x = it.x.clone()
        t = it.types.numpy()
        known = t < means.shape[0]
        col = np.zeros(len(t))
        col[known] = means[t[known], column]
        x[:, column] = _tensor(col, x.dtype)
        out.append(dataclasses.replace(it, x=x))
    return out


def _tensor(values: np.ndarray, dtype):
    import torch
    return torch.from_numpy(values).to(dtype)


def score_items(model, items, groups: Sequence[str], batch_size: int = 512) -> Dict[str, float]:
    """Mean over the workloads (`groups`, one per item) of Kendall τ and top-5 slowdown of
    the model's predictions for prepared `items`."""
    from simulator.metrics import evaluate
    spec = model.batch_spec
    pred = np.concatenate([model.predict_batch(spec.make(items[i:i + batch_size]))
                           for i in range(0, len(items), batch_size)])
    true = np.concatenate([it.y.double().numpy() for it in items])
    rows = [g for g, it in zip(groups, items) for _ in range(len(it.y))]
    r = evaluate(pred, true, rows, ["kendall_tau", "top5_slowdown"])
    return {"kendall_tau": r["kendall_tau"]["mean"], "top5_slowdown": r["top5_slowdown"]["mean"]}


def ablate_model(model, parts, batch_size: int = 512) -> Tuple[List[str], Dict[str, Any]]:
    """The model's columns and, for a model trained on `parts["train"]`: τ / top-5 on
    `parts["val"]` and `parts["test"]`, whole and with each model column ablated. A model
    that reads no node features (a vector baseline) is refused."""
    spec = model.batch_spec
    if not spec.graph:
        from simulator.registry import SimulatorError
        raise SimulatorError("transfer_analysis ablates node-feature columns: the analysed model reads a vector "
                             f"({spec.vector}), not the graph")
    info = parts["train"].info
    items = {p: parts[p].items(spec) for p in ("train", "val", "test")}
    width = int(items["train"][0].x.shape[1])
    columns = list(info.feature_names) if info.feature_names and len(info.feature_names) == width \
        else [f"f{i}" for i in range(width)]
    groups = {p: [s.group for s in parts[p].samples] for p in ("val", "test")}
    means = type_means(items["train"])
    base = {p: score_items(model, items[p], groups[p], batch_size) for p in ("val", "test")}
    unchanged = {p: _unchanged_columns(items[p], means) for p in ("val", "test")}
    cols = {name: {p: dict(base[p]) if unchanged[p][c] else
                   score_items(model, ablated(items[p], c, means), groups[p], batch_size) for p in ("val", "test")}
            for c, name in enumerate(columns)}
    return columns, {"base": base, "ablated": cols}


def _unchanged_columns(items, means: np.ndarray) -> np.ndarray:
    """Per model column: True when ablating it leaves `items` as they are (its value on
    every node already is the mean for the node's type: a column a node's type decides,
    or one zero everywhere), so the scores are the whole model's."""
    x = np.concatenate([it.x.numpy() for it in items])
    t = np.concatenate([it.types.numpy() for it in items])
    known = t < means.shape[0]
    filled = np.zeros_like(x)
    filled[known] = means[t[known]].astype(x.dtype)
    return np.all(filled == x, axis=0)


def ablation(train_workloads: Sequence[str], flags: Sequence[str], data: Sequence[str], epochs: int,
             seed: int) -> Dict[str, Any]:
    """Per training workload and model column: τ on its validation configs and on the other
    workloads, whole and with the column ablated; `columns`: the columns the model reads."""
    from .matrix import _data, flags_argv, train_model
    samples = _data(data)[0]
    workloads = sorted({s.group for s in samples}, key=natural_key)
    per: Dict[str, Any] = {}
    columns: List[str] = []
    for w in train_workloads:
        model, config, parts, _ = train_model(flags_argv(flags, [w], workloads, seed, epochs, data))
        columns, per[w] = ablate_model(model, parts, config.fit.eval_batch_size)
        base = per[w]["base"]
        log(f"ablation: trained on {w}: val τ {base['val']['kendall_tau']:.3f}, others {base['test']['kendall_tau']:.3f}")
    summary = {}
    for name in columns:
        delta = lambda part, metric: [per[w]["ablated"][name][part][metric] - per[w]["base"][part][metric]  # noqa: E731
                                      for w in per]
        d_test = delta("test", "kendall_tau")
        summary[name] = {"delta_tau_own": float(np.mean(delta("val", "kendall_tau"))),
                         "delta_tau_others": float(np.mean(d_test)),
                         "delta_top5_own": float(np.mean(delta("val", "top5_slowdown"))),
                         "delta_top5_others": float(np.mean(delta("test", "top5_slowdown"))),
                         "others_better_without": int(sum(d > 0 for d in d_test))}
    base_others = [per[w]["base"]["test"]["kendall_tau"] for w in per]
    return {"columns": columns, "per_workload": per, "summary": summary, "trainings": len(per),
            "base_tau_others": float(np.mean(base_others)) if base_others else None}


# ---------------------------------------------------------------- outputs
def plot(result: Dict[str, Any], path: str, title: str) -> None:
    """Three panels, one row per column of the data: shift; Δτ own and Δτ others when
    ablated (columns the model does not read: grey labels, no bar)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from extract.fileio import atomic_write
    shift, abl = result["shift"], result.get("ablation", {}).get("summary", {})
    names = list(shift)
    read = set(result.get("model_columns") or abl)
    fig, axes = plt.subplots(1, 3 if abl else 1, figsize=(15 if abl else 5, 0.28 * len(names) + 1.5),
                             sharey=True, squeeze=False)
    y = np.arange(len(names))
    ax = axes[0][0]
    ax.barh(y - 0.2, [shift[n]["between_share"] for n in names], height=0.4, color="tab:red",
            label="variance between workloads")
    ax.barh(y + 0.2, [shift[n]["out_of_range"] for n in names], height=0.4, color="tab:orange",
            label="test nodes outside training range")
    ax.set_yticks(y, [n if n in read else f"{n} (not read)" for n in names], fontsize=7)
    for label, n in zip(ax.get_yticklabels(), names):
        label.set_color("black" if n in read else "gray")
    ax.set_xlim(0, 1)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("shift between workloads (share)", fontsize=9)
    if abl:
        ax = axes[0][1]
        ax.barh(y, [abl.get(n, {}).get("delta_tau_own", 0) for n in names], color="tab:blue")
        ax.set_title("Δτ on the training workload, column ablated", fontsize=9)
        ax = axes[0][2]
        ax.barh(y, [abl.get(n, {}).get("delta_tau_others", 0) for n in names],
                color=["tab:green" if abl.get(n, {}).get("delta_tau_others", 0) > 0 else "tab:gray" for n in names])
        ax.set_title("Δτ on the other workloads, column ablated (green: misleads)", fontsize=9)
        for a in axes[0][1:]:
            a.axvline(0, color="black", lw=0.5)
    axes[0][0].invert_yaxis()
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)


def run(data: Sequence[str], results_dir: str, spec: Optional[str] = None, flags: Optional[Sequence[str]] = None,
        epochs: int = 40, seed: int = 0, train_workloads: Optional[Sequence[str]] = None,
        tag: str = "") -> Dict[str, Any]:
    """Both measurements for transfer spec `spec` (or model flags `flags`; neither:
    `DEFAULT_SPEC`), written to RESULTS/transfer_analysis[_TAG].json and its figure."""
    from simulator.data.features import DERIVED

    from .matrix import _data
    raw = bool(flags)
    name, flags = model_flags(spec, flags)
    samples, collection, _ = _data(data)
    names, features = data_columns(samples, collection)
    workloads = sorted({s.group for s in samples}, key=natural_key)
    result: Dict[str, Any] = {"extractor": collection.extractor, "feature_names": names,
                              "derived": [n for n in names if n in DERIVED],
                              "shift": feature_shift(samples, names, features)}
    result["never_nonzero"] = [n for n in names if n not in result["shift"]]  # e.g. GPU columns on CPU data
    log(f"feature shift measured ({len(names)} columns, {len(result['never_nonzero'])} never non-zero)")
    result["ablation"] = ablation(train_workloads or workloads, flags, data, epochs, seed)
    read = result["model_columns"] = result["ablation"]["columns"]
    for column, s in result["shift"].items():
        s["read_by_model"] = column in read
    result["protocol"] = {"spec": None if raw else name,
                          "model_flags": flags, "epochs": epochs, "seed": seed}
    suffix = f"_{tag}" if tag else ""
    write_json(os.path.join(results_dir, f"transfer_analysis{suffix}.json"), result)
    plot(result, os.path.join(results_dir, f"transfer_features{suffix}.png"),
         f"node features ({collection.extractor}): shift between workloads, and what {name} "
         f"trained on one workload keys on")
    return result


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.transfer.analysis", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", nargs="+", default=["shipped"])
    ap.add_argument("--results", default=DEFAULT_RESULTS)
    ap.add_argument("--epochs", type=COUNT, default=40)
    ap.add_argument("--seed", type=SEED, default=0)
    ap.add_argument("--train-workloads", nargs="+", default=None)
    ap.add_argument("--tag", default="", help="suffix of the output files (e.g. before / after a feature change)")
    ap.add_argument("--spec", default=None,
                    help=f"the analysed model, a transfer spec (benchmarks.transfer.specs.MODEL_SPECS; "
                         f"default {DEFAULT_SPEC})")
    ap.add_argument("--model-flags", nargs=argparse.REMAINDER, default=None,
                    help="instead of --spec: simulator.train flags of the analysed model (last on the line)")
    return ap


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    model_flags(args.spec, args.model_flags)  # a clear error before anything is loaded
    with locked_outputs(args.results):
        result = run(args.data, args.results, args.spec, args.model_flags, args.epochs, args.seed,
                     args.train_workloads, args.tag)
    rows = sorted(result["shift"].items(), key=lambda kv: -kv[1]["between_share"])
    abl = result["ablation"]["summary"]
    print(f"{'feature':22s} {'read':>4s} {'between':>8s} {'outside':>8s} {'rho':>6s} {'sign':>5s} "
          f"{'dτ own':>7s} {'dτ other':>8s}")
    for name, s in rows:
        a = abl.get(name, {})
        print(f"{name:22s} {'yes' if s['read_by_model'] else '':>4s} {s['between_share']:8.2f} "
              f"{s['out_of_range']:8.2f} {s['within_rho']:6.2f} {s['sign_agreement']:5.2f} "
              f"{a.get('delta_tau_own', 0):7.3f} {a.get('delta_tau_others', 0):8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
