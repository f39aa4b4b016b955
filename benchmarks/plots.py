"""Plots of saved runs and of the benchmark results (matplotlib, PNG).

    python -m benchmarks.plots RUN_DIR [RUN_DIR ...] [--out DIR] [--data DATA ...]

For every run folder (written by `python -m simulator.train`), into RUN_DIR/plots/:
  runtime_distribution.png   measured runtime per workload of the run's data (log-scale histograms)
  error_vs_runtime.png       test set: log-error (predicted/measured) against measured runtime
  predicted_vs_measured.png  test set: predicted against measured runtime, per workload
  learning_curve.png         training loss and validation τ per epoch (SGD models)
The test predictions are kept in RUN_DIR/test_predictions.csv. With several runs and
`--out DIR`, the comparisons (one panel per run) are drawn into DIR as well.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from extract.fileio import atomic_write  # noqa: E402

from .common import natural_key, output_folder, write_csv  # noqa: E402

DPI = 110


def _save(fig, path: str) -> str:
    """The figure as PNG at `path` (atomically)."""
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def _grid(n: int, ncols: int = 3, size=(4.0, 3.2)):
    ncols = min(ncols, max(1, n))
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


# ---------------------------------------------------------------- per-run data
def run_label(run_dir: str, config: Optional[Dict[str, Any]] = None) -> str:
    if config is None:
        config = _run_config(run_dir)
    if not config:
        return os.path.basename(os.path.normpath(run_dir))
    label = f"{config['model']} seed {config['seed']}"
    if config.get("train_fraction", 1.0) < 1.0:
        label += f" f={config['train_fraction']:g}"
    return label


def _run_config(run_dir: str) -> Dict[str, Any]:
    import json
    path = os.path.join(run_dir, "metrics.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f).get("config", {})
    return {}


def test_predictions(run_dir: str, data: Optional[Sequence[str]] = None, samples=None) -> Dict[str, np.ndarray]:
    """{"workload", "index", "measured", "predicted"} (seconds; index: the config's index in its
    space, -1 if unknown) on the run's test split; cached in RUN_DIR/test_predictions.csv
    (not cached when `data` overrides the run's data)."""
    path = os.path.join(run_dir, "test_predictions.csv")
    if data is None and os.path.exists(path):
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        if rows and "index" in rows[0]:  # older caches lack it: recomputed below
            return {"workload": np.array([r["workload"] for r in rows]),
                    "index": np.array([int(r["index"]) for r in rows]),
                    "measured": np.array([float(r["measured_s"]) for r in rows]),
                    "predicted": np.array([float(r["predicted_s"]) for r in rows])}
    from simulator.models.costmodel import load_trained
    from simulator.data.collection import load_data
    from simulator.data.splits import group_tags, make_split
    model, _ = load_trained(run_dir)
    d = model.config.data
    if samples is None:
        samples = load_data(list(data or d.data), d.cache_dir)
    parts = make_split([s.group for s in samples], d.split, model.config.seed, d.train_workloads,
                       d.test_workloads, d.val_fraction, d.train_fraction, group_tags(samples),
                       d.test_network, d.test_op_kind)
    test = [samples[i] for i in parts["test"]]
    pred = np.exp(model.predict(test, 1024))
    out = {"workload": np.array([s.group for s in test for _ in range(s.num_configs)]),
           "index": np.array([s.meta.index if s.meta.index is not None and s.num_configs == 1 else -1
                              for s in test for _ in range(s.num_configs)]),
           "measured": np.concatenate([s.runtimes for s in test]), "predicted": pred}
    if data is None:
        write_csv(path, ["workload", "index", "measured_s", "predicted_s"],
                  ([w, int(i), float(m), float(p)] for w, i, m, p in
                   zip(out["workload"], out["index"], out["measured"], out["predicted"])))
    return out


def history_of(run_dir: str) -> List[Dict[str, Any]]:
    from simulator.checkpoint import load_checkpoint
    path = os.path.join(run_dir, "checkpoint.pt")
    if not os.path.exists(path):
        return []
    return list(load_checkpoint(path).get("history") or [])


# ---------------------------------------------------------------- figures
def plot_runtime_distribution(groups: Sequence[str], runtimes: Sequence[float], path: str,
                              title: str = "Measured runtime per workload") -> str:
    groups, runtimes = np.asarray(groups), np.asarray(runtimes, dtype=float)
    names = sorted(set(groups.tolist()), key=natural_key)
    fig, axes = _grid(len(names), 4, (3.2, 2.4))
    for ax, g in zip(axes, names):
        t = runtimes[(groups == g) & np.isfinite(runtimes)] * 1e3
        bins = np.logspace(np.log10(t.min()), np.log10(t.max()), 30) if t.size > 1 else 10
        ax.hist(t, bins=bins, color="tab:blue", alpha=0.8)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(f"{g} (n={t.size}, best {t.min():.3g} ms)", fontsize=9)
        ax.set_xlabel("runtime (ms)", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def _scatter_panel(ax, pred, meas, workloads, kind: str):
    names = sorted(set(workloads.tolist()), key=natural_key)
    cmap = plt.get_cmap("tab10")
    for i, g in enumerate(names):
        m = workloads == g
        if kind == "error":
            ax.scatter(meas[m] * 1e3, np.log(pred[m] / meas[m]), s=4, alpha=0.5, color=cmap(i % 10), label=g)
        else:
            ax.scatter(meas[m] * 1e3, pred[m] * 1e3, s=4, alpha=0.5, color=cmap(i % 10), label=g)
    ax.set_xscale("log")
    if kind == "error":
        ax.axhline(0, color="k", lw=0.8)
        ax.set_ylabel("log(predicted / measured)")
    else:
        ax.set_yscale("log")
        lo = min(np.nanmin(meas), np.nanmin(pred)) * 1e3
        hi = max(np.nanmax(meas), np.nanmax(pred)) * 1e3
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_ylabel("predicted (ms)")
    ax.set_xlabel("measured (ms)")


def plot_scatter(preds: Dict[str, Dict[str, np.ndarray]], path: str, kind: str = "error") -> str:
    """One panel per run/model: kind "error" (log error vs measured) or "pred" (pred vs measured)."""
    fig, axes = _grid(len(preds), 4, (3.6, 3.0))
    for ax, (label, p) in zip(axes, preds.items()):
        _scatter_panel(ax, p["predicted"], p["measured"], p["workload"], kind)
        l1 = np.mean(np.abs(np.log(p["predicted"] / p["measured"])))
        ax.set_title(f"{label} (L1 log {l1:.3f})", fontsize=9)
    axes[0].legend(fontsize=6, markerscale=2, ncol=2)
    fig.suptitle("Test set: error against measured runtime" if kind == "error"
                 else "Test set: predicted against measured runtime")
    fig.tight_layout()
    return _save(fig, path)


def plot_learning_curves(histories: Dict[str, List[Dict[str, Any]]], path: str) -> str:
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    for label, h in histories.items():
        if not h:
            continue
        ep = [r["epoch"] for r in h]
        a.plot(ep, [r["train_loss"] for r in h], label=label)
        key = next((k for k in h[0] if k.startswith("val_")), None)
        if key:
            b.plot(ep, [r[key] for r in h], label=label)
    a.set_xlabel("epoch")
    a.set_ylabel("training loss")
    a.set_yscale("log")
    b.set_xlabel("epoch")
    b.set_ylabel("validation Kendall τ (mean over workloads)")
    a.legend(fontsize=7)
    a.set_title("Learning curves")
    fig.tight_layout()
    return _save(fig, path)


def plot_sweep(rows: Sequence[Sequence[Any]], path: str) -> str:
    """rows: [model, fraction, train_samples, metric, mean, std, n]."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, metric, label in ((axes[0], "l1_log", "test L1 of log runtime (lower is better)"),
                              (axes[1], "kendall_tau", "test Kendall τ (higher is better)")):
        for model in dict.fromkeys(r[0] for r in rows):
            pts = sorted((float(r[1]), float(r[4]), float(r[5] or 0)) for r in rows
                         if r[0] == model and r[3] == metric and r[4] not in (None, "") and np.isfinite(float(r[4])))
            if not pts:
                continue
            x, y, e = map(np.array, zip(*pts))
            ax.errorbar(100 * x, y, yerr=e, marker="o", capsize=3, label=model)
        ax.set_xlabel("share of the training data (%)")
        ax.set_ylabel(label)
        ax.set_xscale("log")
        ax.set_xticks([5, 10, 15, 20, 25, 50, 75, 100])
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle("Training-fraction sweep (cross-workload split)")
    fig.tight_layout()
    return _save(fig, path)


def plot_accuracy(summary: Dict[str, Dict[str, Dict[str, list]]], ceiling: Optional[Dict[str, Any]],
                  path: str) -> str:
    """Per-workload τ (mean ± std over seeds) for every model, the noise ceiling as a line."""
    models = list(summary)
    workloads = [w for w in next(iter(summary.values())) if w != "mean"]
    cols = workloads + ["mean"]
    fig, ax = plt.subplots(figsize=(12, 4))
    width = 0.8 / max(1, len(models))
    for i, m in enumerate(models):
        ys = [summary[m].get(w, {}).get("kendall_tau", [np.nan, 0])[0] for w in cols]
        es = [summary[m].get(w, {}).get("kendall_tau", [np.nan, 0])[1] for w in cols]
        ax.bar(np.arange(len(cols)) + (i - len(models) / 2 + 0.5) * width, ys, width, yerr=es, capsize=2,
               label=m)
    if ceiling:
        for j, w in enumerate(cols):
            c = ceiling.get(w, {}).get("kendall_tau")
            if c is not None:
                ax.plot([j - 0.45, j + 0.45], [c, c], "k-", lw=2, label="noise ceiling" if j == 0 else None)
    ax.set_xticks(np.arange(len(cols)))
    ax.set_xticklabels(cols)
    ax.set_ylabel("test Kendall τ")
    ax.axhline(0, color="k", lw=0.5)
    ax.legend(ncol=4, fontsize=8)
    ax.set_title("Cross-workload accuracy per held-out workload (mean ± std over seeds)")
    fig.tight_layout()
    return _save(fig, path)


def plot_tuning(result: Dict[str, Any], path: str) -> str:
    """Best found (relative to the dataset's best) against number of measurements."""
    names = list(result["workloads"])
    fig, axes = _grid(len(names), 3, (4.2, 3.3))
    for ax, w in zip(axes, names):
        r = result["workloads"][w]
        g, glo, ghi = (np.array(r[k]) for k in ("guided_curve_median", "guided_curve_min", "guided_curve_max"))
        x = np.arange(1, len(g) + 1)
        ax.plot(x, g, "o-", ms=3, color="tab:red", label="model-guided (median of passes)")
        ax.fill_between(x, glo, ghi, color="tab:red", alpha=0.2, label="min–max over passes")
        rm, rlo, rhi = (np.array(r[k]) for k in ("random_curve_mean", "random_curve_p10", "random_curve_p90"))
        n = len(rm)  # every measured config of the dataset: where random reaches the best
        xr = np.arange(1, n + 1)
        ax.plot(xr, rm[:n], color="tab:blue", label="random (mean over seeds)")
        ax.fill_between(xr, rlo[:n], rhi[:n], color="tab:blue", alpha=0.15, label="random 10–90%")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(1.05, color="k", lw=0.8, ls="--", label="+5%")
        ax.set_xscale("log")
        ax.set_yscale("log")
        top = max(np.nanmax(ghi), rhi[0]) * 1.1
        ax.set_ylim(min(0.9, float(np.nanmin(glo)) * 0.9), max(1.5, min(top, 50)))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.set_yticks([t for t in (0.6, 0.8, 1, 1.5, 2, 5, 10, 20) if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]])
        ax.set_title(f"{w}: dataset best {r['dataset_best_ms_shipped']:.3g} ms (shipped), "
                     f"{r['dataset_best_ms_now']:.3g} ms (now)\nunscheduled default "
                     f"{r['unscheduled_ms'] / r['dataset_best_ms_now']:.0f}× slower", fontsize=9)
        ax.set_xlabel("configs measured")
        ax.set_ylabel("best found / dataset best")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=6)
    fig.suptitle("Model-guided vs random search, measured on this machine")
    fig.tight_layout()
    return _save(fig, path)


def plot_speed(speed: Dict[str, Any], path: str) -> str:
    models = [m for m in speed.get("models", {})]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, key, label in ((axes[0], "train_graphs_per_s", "training (graphs/s)"),
                           (axes[1], "infer_configs_per_s", "inference, batched (configs/s)"),
                           (axes[2], "peak_rss_mib", "peak RSS (MiB)")):
        vals = [speed["models"][m].get(key) or 0 for m in models]
        ax.bar(models, vals, color=["tab:gray" if m == "xgb" else "tab:blue" for m in models])
        ax.set_title(label)
        ax.tick_params(axis="x", rotation=45)
        if key == "infer_configs_per_s":
            ax.axhline(10000, color="k", ls="--", lw=0.8)
            ax.set_yscale("log")
        if key == "train_graphs_per_s":
            ax.set_yscale("log")
    fig.tight_layout()
    return _save(fig, path)


# ---------------------------------------------------------------- CLI
def plot_run(run_dir: str, data: Optional[Sequence[str]] = None, samples=None) -> List[str]:
    """The four per-run plots into RUN_DIR/plots; returns the files written."""
    out = os.path.join(run_dir, "plots")
    config = _run_config(run_dir)
    label = run_label(run_dir, config)
    if samples is None:
        from simulator.data.collection import load_data
        samples = load_data(list(data or config.get("data") or ["shipped"]), config.get("cache_dir"))
    files = [plot_runtime_distribution([s.group for s in samples for _ in range(s.num_configs)],
                                       np.concatenate([s.runtimes for s in samples]),
                                       os.path.join(out, "runtime_distribution.png"))]
    preds = test_predictions(run_dir, data, samples)
    files.append(plot_scatter({label: preds}, os.path.join(out, "error_vs_runtime.png"), "error"))
    files.append(plot_scatter({label: preds}, os.path.join(out, "predicted_vs_measured.png"), "pred"))
    hist = history_of(run_dir)
    if hist:
        files.append(plot_learning_curves({label: hist}, os.path.join(out, "learning_curve.png")))
    return files


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.plots", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR")
    ap.add_argument("--out", type=output_folder, default=None, help="also draw the comparisons of all runs here")
    ap.add_argument("--data", nargs="+", default=None, help="data instead of each run's own")
    args = ap.parse_args(argv)
    cache: Dict[tuple, Any] = {}
    preds, hists = {}, {}
    for run in args.runs:
        if not os.path.exists(os.path.join(run, "checkpoint.pt")):
            print(f"error: {run}: no checkpoint.pt (not a run folder)", file=sys.stderr)
            return 2
        config = _run_config(run)
        key = tuple(args.data or config.get("data") or ["shipped"])
        if key not in cache:
            from simulator.data.collection import load_data
            cache[key] = load_data(list(key), config.get("cache_dir"))
        for f in plot_run(run, args.data, cache[key]):
            print(f)
        label = run_label(run, config)
        preds[label] = test_predictions(run, args.data, cache[key])
        hists[label] = history_of(run)
    if args.out and len(args.runs) > 1:
        print(plot_scatter(preds, os.path.join(args.out, "error_vs_runtime.png"), "error"))
        print(plot_scatter(preds, os.path.join(args.out, "predicted_vs_measured.png"), "pred"))
        print(plot_learning_curves(hists, os.path.join(args.out, "learning_curves.png")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
