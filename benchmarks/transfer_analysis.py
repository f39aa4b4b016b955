"""Why the program graphs do not transfer between workloads, measured.

    python -m benchmarks.transfer_analysis [--data shipped] [--results docs/results]
        [--model gcn] [--epochs 40] [--train-workloads C1 … C12] [--tag before]

Two measurements, written to RESULTS/transfer_analysis[_TAG].json and drawn in
RESULTS/transfer_features[_TAG].png:

1. **Which node features shift between workloads.** For each node-feature column, over
   the nodes of the types it applies to (the types on which it is ever non-zero), each
   config's graph is summarised by the column's mean over those nodes; then
   * `between_share`: the share of the variance of that summary that lies between
     workloads (η² of a one-way ANOVA by workload): near 1 the column mostly says
     *which workload* this is, near 0 it varies with the config;
   * `within_rho`: Spearman ρ of the summary with the log runtime within each
     workload, its mean and `sign_agreement`, the share of workloads where ρ has the
     sign of the median ρ (a column whose relation to runtime flips between workloads
     cannot transfer).
2. **What the model keys on.** The model (`--model`, simulator.train flags) is trained on
   each single workload; then each column in turn is *ablated* — set, on every node,
   to the training nodes' mean of that column for the node's type — and the model
   re-scored: Δτ on the training workload's own validation configs (how much the model
   relies on the column) and on the eleven other workloads (Δτ > 0: the model ranks
   other workloads *better* without the column, i.e. the column misleads it there).
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .common import COUNT, DEFAULT_RESULTS, SEED, cli, locked_outputs, log, natural_key, write_json


def applicable_types(samples, column: int) -> np.ndarray:
    """Node-type ids on which `column` is ever non-zero."""
    types = np.concatenate([s.node_types for s in samples])
    values = np.concatenate([s.node_features[:, column] for s in samples])
    return np.unique(types[values != 0])


def feature_shift(samples, feature_names: Sequence[str]) -> Dict[str, Dict[str, float]]:
    """Per column: between-workload variance share and within-workload ρ with log runtime."""
    from scipy.stats import spearmanr
    groups = np.array([s.group for s in samples])
    y = np.log([s.runtimes[0] for s in samples])
    out: Dict[str, Dict[str, float]] = {}
    for c, name in enumerate(feature_names):
        types = applicable_types(samples, c)
        if types.size == 0:
            continue
        summary = np.array([s.node_features[np.isin(s.node_types, types), c].mean()
                            if np.isin(s.node_types, types).any() else 0.0 for s in samples])
        total = summary.var()
        means = {g: summary[groups == g].mean() for g in set(groups.tolist())}
        between = np.mean([(means[g] - summary.mean()) ** 2 for g in groups]) if total > 0 else 0.0
        rhos = []
        for g in sorted(means, key=natural_key):
            m = groups == g
            if np.ptp(summary[m]) > 0:
                rhos.append(float(spearmanr(summary[m], y[m]).statistic))
        rhos_a = np.array(rhos)
        median = np.median(rhos_a) if rhos_a.size else 0.0
        out[name] = {"between_share": float(between / total) if total > 0 else 0.0,
                     "out_of_range": out_of_range(samples, c, types),
                     "within_rho": float(rhos_a.mean()) if rhos_a.size else 0.0,
                     "within_abs_rho": float(np.abs(rhos_a).mean()) if rhos_a.size else 0.0,
                     "sign_agreement": float(np.mean(np.sign(rhos_a) == np.sign(median))) if rhos_a.size else 0.0,
                     "workloads_varying": len(rhos)}
    return out


def out_of_range(samples, column: int, types: np.ndarray) -> float:
    """Mean over ordered pairs of workloads (a, b) of the share of b's node values (nodes of
    `types`) outside the range a's nodes of the same type take: what a model trained on a
    sees only on b, where it must extrapolate."""
    groups = sorted({s.group for s in samples}, key=natural_key)
    values: Dict[str, Dict[int, np.ndarray]] = {}
    for g in groups:
        members = [s for s in samples if s.group == g]
        t = np.concatenate([s.node_types for s in members])
        v = np.concatenate([s.node_features[:, column] for s in members])
        values[g] = {int(k): v[t == k] for k in types if (t == k).any()}
    shares = []
    for a in groups:
        for b in groups:
            if a == b:
                continue
            outside = total = 0
            for k, vb in values[b].items():
                va = values[a].get(k)
                total += vb.size
                outside += vb.size if va is None else int(((vb < va.min()) | (vb > va.max())).sum())
            if total:
                shares.append(outside / total)
    return float(np.mean(shares)) if shares else 0.0


def _type_means(samples, column: int) -> Dict[int, float]:
    types = np.concatenate([s.node_types for s in samples])
    values = np.concatenate([s.node_features[:, column] for s in samples])
    return {int(t): float(values[types == t].mean()) for t in np.unique(types)}


def _ablated(samples, column: int, means: Dict[int, float]):
    out = []
    for s in samples:
        s2 = copy.copy(s)
        x = s.node_features.copy()
        x[:, column] = [means.get(int(t), 0.0) for t in s.node_types]
        s2.node_features = x
        out.append(s2)
    return out


def _tau(model, samples) -> Dict[str, float]:
    from simulator.metrics import evaluate
    pred = model.predict(list(samples), 512)
    true = np.log([s.runtimes[0] for s in samples])
    r = evaluate(pred, true, [s.group for s in samples], ["kendall_tau", "top5_slowdown"])
    return {"kendall_tau": r["kendall_tau"]["mean"], "top5_slowdown": r["top5_slowdown"]["mean"]}


def ablation(train_workloads: Sequence[str], spec_flags: Sequence[str], data: Sequence[str], epochs: int,
             seed: int, feature_names: Sequence[str]) -> Dict[str, Any]:
    """Per training workload and column: τ on its validation configs and on the other workloads,
    whole and with the column ablated."""
    from .transfer import _data, train_model
    samples = _data(data)[0]
    workloads = sorted({s.group for s in samples}, key=natural_key)
    per: Dict[str, Any] = {}
    for w in train_workloads:
        others = [x for x in workloads if x != w]
        argv = ["--data", *data, "--train-workloads", w, "--test-workloads", *others, "--seed", str(seed),
                "--threads", "1", "--epochs", str(epochs), *spec_flags]
        model, config, parts, _ = train_model(argv)
        train_samples = parts["train"].samples
        val, test = parts["val"].samples, parts["test"].samples
        base = {"val": _tau(model, val), "test": _tau(model, test)}
        cols = {}
        for c, name in enumerate(feature_names):
            means = _type_means(train_samples, c)
            cols[name] = {"val": _tau(model, _ablated(val, c, means)), "test": _tau(model, _ablated(test, c, means))}
        per[w] = {"base": base, "ablated": cols}
        log(f"ablation: trained on {w}: val τ {base['val']['kendall_tau']:.3f}, others {base['test']['kendall_tau']:.3f}")
    summary = {}
    for name in feature_names:
        d_val = [per[w]["ablated"][name]["val"]["kendall_tau"] - per[w]["base"]["val"]["kendall_tau"] for w in per]
        d_test = [per[w]["ablated"][name]["test"]["kendall_tau"] - per[w]["base"]["test"]["kendall_tau"] for w in per]
        d_top5 = [per[w]["ablated"][name]["test"]["top5_slowdown"] - per[w]["base"]["test"]["top5_slowdown"]
                  for w in per]
        summary[name] = {"delta_tau_own": float(np.mean(d_val)), "delta_tau_others": float(np.mean(d_test)),
                         "delta_top5_others": float(np.mean(d_top5)),
                         "others_better_without": int(sum(d > 0 for d in d_test))}
    return {"per_workload": per, "summary": summary, "trainings": len(per)}


def plot(result: Dict[str, Any], path: str, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from extract.fileio import atomic_write
    shift, abl = result["shift"], result.get("ablation", {}).get("summary", {})
    names = list(shift)
    fig, axes = plt.subplots(1, 3 if abl else 1, figsize=(15 if abl else 5, 0.28 * len(names) + 1.5),
                             sharey=True, squeeze=False)
    y = np.arange(len(names))
    ax = axes[0][0]
    ax.barh(y - 0.2, [shift[n]["between_share"] for n in names], height=0.4, color="tab:red",
            label="variance between workloads")
    ax.barh(y + 0.2, [shift[n]["out_of_range"] for n in names], height=0.4, color="tab:orange",
            label="test nodes outside training range")
    ax.set_yticks(y, names, fontsize=7)
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
        ax.set_title("Δτ on the other workloads, column ablated", fontsize=9)
        for a in axes[0][1:]:
            a.axvline(0, color="black", lw=0.5)
    axes[0][0].invert_yaxis()
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)


def run(data: Sequence[str], results_dir: str, spec_flags: Sequence[str], epochs: int, seed: int,
        train_workloads: Optional[Sequence[str]], tag: str = "") -> Dict[str, Any]:
    from .transfer import _data
    samples, collection, _ = _data(data)
    feature_names = list(collection.feature_names or [f"f{i}" for i in range(samples[0].node_features.shape[1])])
    workloads = sorted({s.group for s in samples}, key=natural_key)
    result: Dict[str, Any] = {"extractor": collection.extractor, "feature_names": feature_names,
                              "shift": feature_shift(samples, feature_names)}
    log("feature shift measured")
    result["ablation"] = ablation(train_workloads or workloads, spec_flags, data, epochs, seed, feature_names)
    result["protocol"] = {"model_flags": list(spec_flags), "epochs": epochs, "seed": seed}
    suffix = f"_{tag}" if tag else ""
    write_json(os.path.join(results_dir, f"transfer_analysis{suffix}.json"), result)
    plot(result, os.path.join(results_dir, f"transfer_features{suffix}.png"),
         f"node features ({collection.extractor}): shift between workloads, and what "
         f"{' '.join(spec_flags) or 'gcn'} trained on one workload keys on")
    return result


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.transfer_analysis", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", nargs="+", default=["shipped"])
    ap.add_argument("--results", default=DEFAULT_RESULTS)
    ap.add_argument("--epochs", type=COUNT, default=40)
    ap.add_argument("--seed", type=SEED, default=0)
    ap.add_argument("--train-workloads", nargs="+", default=None)
    ap.add_argument("--tag", default="", help="suffix of the output files (e.g. before / after a feature change)")
    ap.add_argument("--model-flags", nargs=argparse.REMAINDER, default=["--model", "gcn"],
                    help="simulator.train flags of the analysed model (last on the line)")
    return ap


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    with locked_outputs(args.results):
        result = run(args.data, args.results, args.model_flags, args.epochs, args.seed, args.train_workloads,
                     args.tag)
    rows = sorted(result["shift"].items(), key=lambda kv: -kv[1]["between_share"])
    abl = result["ablation"]["summary"]
    print(f"{'feature':22s} {'between':>8s} {'outside':>8s} {'rho':>6s} {'sign':>5s} {'dτ own':>7s} {'dτ other':>8s}")
    for name, s in rows:
        a = abl.get(name, {})
        print(f"{name:22s} {s['between_share']:8.2f} {s['out_of_range']:8.2f} {s['within_rho']:6.2f} {s['sign_agreement']:5.2f} "
              f"{a.get('delta_tau_own', 0):7.3f} {a.get('delta_tau_others', 0):8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
