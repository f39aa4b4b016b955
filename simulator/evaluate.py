"""Re-evaluate a saved run.

    python -m simulator.evaluate DIR                 # the run's own val/test split
    python -m simulator.evaluate DIR --data LOGS...  # every workload of other data
    python -m simulator.evaluate DIR [--data-root ROOT]  # a TpuGraphs run: its valid/test folders

Loads DIR's checkpoint (the best weights), rebuilds the run's split from its saved
config (and checks it is the split it was trained with), and prints the metric
tables; `--write` also rewrites DIR/metrics.json.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, Optional, Sequence

from .data import load_data
from .engine import check_extractor, evaluate_items, load_trained, prepare_samples, setup_determinism, write_json
from .metrics import format_table
from .registry import SimulatorError, run_cli
from .splits import make_split
from .train import describe


def run(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    ap = argparse.ArgumentParser(prog="python -m simulator.evaluate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", metavar="DIR", help="run folder (or its checkpoint.pt)")
    ap.add_argument("--data", nargs="+", default=None, help="evaluate on this data instead of the run's split")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--which", choices=["best", "last"], default="best", help="best-validation or last weights")
    ap.add_argument("--write", action="store_true", help="rewrite DIR/metrics.json (run's own split only)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--data-root", default=None, help="TpuGraphs runs: where the collection now is")
    args = ap.parse_args(argv)

    model, state = load_trained(args.run, "best_model" if args.which == "best" else "model")
    config, info = state["config"], state["info"]
    setup_determinism(config["seed"], args.threads or config["threads"])
    if "tpugraphs" in info:
        return _evaluate_tpugraphs(args, model, config, info)
    check_extractor(info, args.run)
    samples = load_data(args.data or config["data"], args.cache_dir or config.get("cache_dir"))
    group_index = {g: i for i, g in enumerate(sorted({s.group for s in samples}))}
    items = prepare_samples(samples, config, info, group_index)
    batch = config.get("eval_batch_size", 256)
    result: Dict[str, Any] = {"config": config}
    if args.data:
        result["data"] = evaluate_items(model, items, samples, batch)
        print(format_table(result["data"], f"{' '.join(args.data)} ({config['model']})"))
        return result

    parts = make_split([s.group for s in samples], config["split"], config["seed"], config["train_workloads"],
                       config["test_workloads"], config["val_fraction"], config["train_fraction"])
    saved = state.get("split")
    if saved is not None and any(sorted(saved[k]) != sorted(samples[i].name for i in parts[k]) for k in parts):
        print("warning: the data no longer gives the split this run was trained with "
              "(samples added or removed?)", file=sys.stderr)
    for part in ("val", "test"):
        if len(parts[part]):
            result[part] = evaluate_items(model, [items[i] for i in parts[part]],
                                          [samples[i] for i in parts[part]], batch)
            print(format_table(result[part], f"\n{part} ({describe(config)})"))
    if args.write:
        _write(args.run, result)
    return result


def _evaluate_tpugraphs(args, model, config: Dict[str, Any], info: Dict[str, Any]) -> Dict[str, Any]:
    from .tpugraphs import TpuGraphsSource, open_parts
    if args.data:
        raise SimulatorError("--data: a TpuGraphs run is evaluated on its own collection's valid/test "
                             "folders (move them with --data-root)")
    config = dict(config, data_root=args.data_root or config.get("data_root"))
    result: Dict[str, Any] = {"config": config}
    for part, files in open_parts(config, ("val", "test")).items():
        scores = TpuGraphsSource(files, config, info, part).evaluate(model)
        if not scores:
            print(f"\n{part}: no measured configs (runtimes withheld); not scored", file=sys.stderr)
            continue
        result[part] = scores
        print(format_table(scores, f"\n{part} ({describe(config)})"))
    if args.write:
        _write(args.run, result)
    return result


def _write(run: str, result: Dict[str, Any]) -> None:
    path = os.path.join(run if os.path.isdir(run) else os.path.dirname(run), "metrics.json")
    old: Dict[str, Any] = {}
    if os.path.exists(path):
        import json
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    write_json(path, dict(old, **result))
    print(f"wrote {path}", file=sys.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_cli(run, argv)


if __name__ == "__main__":
    sys.exit(main())
