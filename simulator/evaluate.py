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
import json
import os
import sys
from typing import Any, Dict, Optional, Sequence

from .costmodel import load_trained
from .engine import setup_determinism, write_json
from .metrics import format_table
from .registry import run_cli
from .sources import data_kind
from .train import describe


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m simulator.evaluate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", metavar="DIR", help="run folder (or its checkpoint.pt)")
    ap.add_argument("--data", nargs="+", default=None, help="evaluate on this data instead of the run's split")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--which", choices=["best", "last"], default="best", help="best-validation or last weights")
    ap.add_argument("--write", action="store_true", help="rewrite DIR/metrics.json (run's own split only)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--data-root", default=None, help="TpuGraphs runs: where the collection now is")
    return ap


def run(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    args = build_parser().parse_args(argv)
    model, state = load_trained(args.run, "best_model" if args.which == "best" else "model")
    config = model.config.replace(**{k: v for k, v in (("cache_dir", args.cache_dir), ("data_root", args.data_root))
                                     if v is not None})
    setup_determinism(config.seed, args.threads or config.threads)
    parts = data_kind(config.data.data).open_evaluation(config, model.info, args.data, state.get("split"))
    result: Dict[str, Any] = {"config": config.to_dict()}
    for part, source in parts.items():
        scores = source.evaluate(model, config.fit.eval_batch_size)
        if not scores:
            print(f"\n{part}: no measured configs (runtimes withheld); not scored", file=sys.stderr)
            continue
        result[part] = scores
        title = f"{' '.join(args.data)} ({config.model.model})" if args.data else f"\n{part} ({describe(config)})"
        print(format_table(scores, title))
    if args.write and not args.data:
        _write(args.run, result)
    return result


def _write(run: str, result: Dict[str, Any]) -> None:
    path = os.path.join(run if os.path.isdir(run) else os.path.dirname(run), "metrics.json")
    old: Dict[str, Any] = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    write_json(path, dict(old, **result))
    print(f"wrote {path}", file=sys.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_cli(run, argv)


if __name__ == "__main__":
    sys.exit(main())
