"""What transfers between workloads of the x86 conv2d template: the register tile, measured.

    python -m benchmarks.transfer.families [--data shipped] [--runs runs/bench/transfer]
        [--models gcn-inv-arf-noext-lane …] [--repeats 20] [--results docs/results]

A config's *register-tile family* is its (tile_oc, tile_ow, tile_oh) (`FAMILY_KNOBS`): the
shape of the accumulator the innermost loops keep in vector registers, in absolute sizes.
Over the one-workload pairs of the transfer matrix (train on A, rank B):

1. **Family agreement**: Kendall τ between A's and B's families ordered by their median log
   runtime (relative to the workload's best), over the families both measured.
2. **The lookup rule**, no learning: rank B's configs by A's median log runtime of their
   family (families A never measured last; configs of one family in a random order, the
   top-5 slowdown averaged over `--repeats` orders).
3. For each model of the matrix (its runs' predictions, `benchmarks.transfer --runs`): its
   own top-5 slowdown; the same with the lookup as the first key and the model's prediction
   breaking the ties (does the model choose better than chance inside A's best families?);
   and the share of its top-5 picks in families A never measured (extrapolation).
4. **The oracle family order**, a bound: B's configs ranked by B's *own* median log runtime
   of their family — what no training workload can tell — with ties in random orders, and
   with each model's prediction breaking them. If even this misses the worst-pair bar, the
   bar needs a choice inside the family that transfers, not a better family order.

Writes RESULTS/transfer_families.json (the section "What transfers" of docs/RESULTS.md).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..common import COUNT, DEFAULT_RESULTS, DEFAULT_RUNS, cli, locked_outputs, log, natural_key, write_json

FAMILY_KNOBS = ("tile_oc", "tile_ow", "tile_oh")   # the register tile of conv2d_NCHWc.x86
TOP = 5
REPEATS = 20
DEFAULT_MODELS = ["gcn-inv-arf-noext-lane", "gcn-inv-arf-noext-lane-max", "gcn-inv-arf-noext-lane-hinge",
                  "gcn-inv-arf-noext", "gcn-inv", "itervar-xgb-reg", "itervar-xgb-rank", "knob-xgb-reg", "knob-xgb-rank"]


def _knob(value: Any) -> Any:
    """A split knob's innermost factor ([-1, 8] → 8); other knobs as they are."""
    return value[-1] if isinstance(value, (list, tuple)) else value


def family(sample) -> Tuple:
    """The sample's register-tile family; a clear error when its meta has no template config."""
    config = sample.meta.config
    if not config or any(k not in config for k in FAMILY_KNOBS):
        raise ValueError(f"sample {sample.name}: no template config with knobs {', '.join(FAMILY_KNOBS)} "
                         "(the family analysis reads the x86 conv2d template's configs)")
    return tuple(_knob(config[k]) for k in FAMILY_KNOBS)


def top_slowdown(order: np.ndarray, runtimes: np.ndarray, k: int = TOP) -> float:
    """The best of the first k configs of `order`, relative to the best of all, minus 1."""
    return float(runtimes[order[:k]].min() / runtimes.min() - 1)


def family_medians(samples: Sequence) -> Dict[Tuple, float]:
    """{family: median log runtime} of one workload's configs."""
    by: Dict[Tuple, List[float]] = {}
    for s in samples:
        by.setdefault(family(s), []).append(float(np.log(np.mean(s.runtimes))))
    return {f: float(np.median(v)) for f, v in by.items()}


def lookup_scores(train: Sequence, test: Sequence) -> np.ndarray:
    """The lookup rule's score of each test config: the training workload's median log
    runtime of its family; +inf (last) for a family it never measured."""
    med = family_medians(train)
    return np.array([med.get(family(s), np.inf) for s in test])


def oracle_scores(test: Sequence) -> np.ndarray:
    """Each test config's score by the test workload's own median log runtime of its family."""
    med = family_medians(test)
    return np.array([med[family(s)] for s in test])


def lookup_top(scores: np.ndarray, runtimes: np.ndarray, repeats: int, seed: int = 0) -> float:
    """The lookup's top-5 slowdown, ties in random orders, averaged over `repeats` orders."""
    rng = np.random.default_rng(seed)
    return float(np.mean([top_slowdown(np.lexsort((rng.random(len(scores)), scores)), runtimes)
                          for _ in range(repeats)]))


def family_tau(train: Sequence, test: Sequence) -> Optional[float]:
    from scipy.stats import kendalltau
    a, b = family_medians(train), family_medians(test)
    common = sorted(set(a) & set(b))
    if len(common) < 3:
        return None
    return float(kendalltau([a[f] for f in common], [b[f] for f in common])[0])


def pair_figures(train: Sequence, test: Sequence, predictions: Dict[str, Dict[str, float]],
                 repeats: int) -> Dict[str, Any]:
    """Every figure of one (training workload, test workload) pair; `predictions`:
    {model: {sample name: predicted log runtime}}."""
    runtimes = np.array([np.mean(s.runtimes) for s in test])
    scores = lookup_scores(train, test)
    unseen = ~np.isfinite(scores)
    oracle = oracle_scores(test)
    out: Dict[str, Any] = {"family_tau": family_tau(train, test), "lookup_top5": lookup_top(scores, runtimes, repeats),
                           "oracle_top5": lookup_top(oracle, runtimes, repeats), "models": {}}
    for model, pred in predictions.items():
        p = np.array([pred[s.name] for s in test])
        own = np.argsort(p, kind="stable")
        out["models"][model] = {"top5": top_slowdown(own, runtimes),
                                "lookup_then_model_top5": top_slowdown(np.lexsort((p, scores)), runtimes),
                                "oracle_then_model_top5": top_slowdown(np.lexsort((p, oracle)), runtimes),
                                "top5_unseen_share": float(unseen[own[:TOP]].mean())}
    return out


def one_workload_predictions(runs: str, models: Sequence[str]) -> Dict[str, Dict[str, Dict[str, float]]]:
    """{training workload: {model: predictions}} of the one-workload runs every model has."""
    out: Dict[str, Dict[str, Dict[str, float]]] = {}
    for model in models:
        folder = os.path.join(runs, model)
        if not os.path.isdir(folder):
            raise SystemExit(f"{folder}: no runs of {model} (run python -m benchmarks.transfer --models {model} first)")
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".json") or "+" in name:
                continue
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                run = json.load(f)
            if "predictions" not in run:
                raise SystemExit(f"{folder}/{name}: a run without predictions (re-run benchmarks.transfer)")
            out.setdefault(run["train"][0], {})[model] = run["predictions"]
    return {w: p for w, p in out.items() if len(p) == len(models)}


def summarize(pairs: Sequence[Dict[str, Any]], models: Sequence[str]) -> Dict[str, Any]:
    def stats(values: Sequence[float]) -> Dict[str, float]:
        v = np.array(values, dtype=float)
        return {"mean": float(v.mean()), "median": float(np.median(v)), "worst": float(v.max()),
                "over_25": int((v > 0.25).sum())}
    taus = [p["family_tau"] for p in pairs if p["family_tau"] is not None]
    return {"pairs": len(pairs), "family_tau_mean": float(np.mean(taus)) if taus else None,
            "lookup": stats([p["lookup_top5"] for p in pairs]),
            "oracle": stats([p["oracle_top5"] for p in pairs]),
            "models": {m: {"top5": stats([p["models"][m]["top5"] for p in pairs]),
                           "lookup_then_model": stats([p["models"][m]["lookup_then_model_top5"] for p in pairs]),
                           "oracle_then_model": stats([p["models"][m]["oracle_then_model_top5"] for p in pairs]),
                           "top5_unseen_share": float(np.mean([p["models"][m]["top5_unseen_share"] for p in pairs]))}
                       for m in models}}


def run(data: Sequence[str], runs: str, models: Sequence[str], repeats: int) -> Dict[str, Any]:
    from simulator.data.collection import samples_and_info
    samples, _ = samples_and_info(list(data))
    by: Dict[str, List] = {}
    for s in samples:
        by.setdefault(s.group, []).append(s)
    predictions = one_workload_predictions(runs, models)
    pairs = []
    for a in sorted(predictions, key=natural_key):
        for b in sorted(by, key=natural_key):
            if b != a:
                pred = {m: {n: v for n, v in p.items() if n.split("/")[0] == b} for m, p in predictions[a].items()}
                pairs.append({"train": a, "test": b, **pair_figures(by[a], by[b], pred, repeats)})
    return {"family_knobs": list(FAMILY_KNOBS), "repeats": repeats, "models": list(models),
            "summary": summarize(pairs, models), "pairs": pairs}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.transfer.families", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", nargs="+", default=["shipped"])
    ap.add_argument("--runs", default=os.path.join(DEFAULT_RUNS, "transfer"))
    ap.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    ap.add_argument("--repeats", type=COUNT, default=REPEATS, help="random tie orders of the lookup rule")
    ap.add_argument("--results", default=DEFAULT_RESULTS)
    return ap


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    with locked_outputs(args.results):
        out = run(args.data, args.runs, args.models, args.repeats)
        write_json(os.path.join(args.results, "transfer_families.json"), out)
    s = out["summary"]
    log(f"lookup rule: top-5 {100 * s['lookup']['mean']:.1f}% mean, worst {100 * s['lookup']['worst']:.0f}%")
    log(f"oracle family order: top-5 {100 * s['oracle']['mean']:.1f}% mean, worst {100 * s['oracle']['worst']:.0f}%")
    for m, v in s["models"].items():
        log(f"{m}: top-5 {100 * v['top5']['mean']:.1f}%, lookup then model {100 * v['lookup_then_model']['mean']:.1f}%, "
            f"oracle then model worst {100 * v['oracle_then_model']['worst']:.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
