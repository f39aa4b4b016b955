"""Re-evaluate a saved run.

    python -m simulator.evaluate DIR                 # the run's own val/test split
    python -m simulator.evaluate DIR --data LOGS...  # every workload of other data
    python -m simulator.evaluate DIR [--data-root ROOT]  # a TpuGraphs run: its valid/test folders

Loads DIR's checkpoint (the best weights; its checksum verified), rebuilds the run's
split from its saved config (and checks it is the split it was trained with), and
prints the metric tables; a DIR/metrics.json computed from other weights is named in a
warning. `--write` rewrites DIR/metrics.json (DIR locked while it does; the file is
replaced atomically) with these metrics and the checkpoint they come from.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, Optional, Sequence

from extract.cli import COUNT
from .checkpoint import checkpoint_record, metrics_mismatch, run_folder_of, weights_digest
from .data.sources import data_kind
from .distributed import DEVICES, Cluster, check_device
from .engine import locked_output, setup_determinism, write_json
from .metrics import format_table
from .models.costmodel import load_trained
from .registry import SimulatorError, run_cli
from .train import describe


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m simulator.evaluate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", metavar="DIR", help="run folder (or its checkpoint.pt)")
    ap.add_argument("--data", nargs="+", default=None, help="evaluate on this data instead of the run's split")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--which", choices=["best", "last"], default="best", help="best-validation or last weights")
    ap.add_argument("--write", action="store_true", help="rewrite DIR/metrics.json (run's own split only)")
    ap.add_argument("--threads", type=COUNT, default=None)
    ap.add_argument("--device", choices=DEVICES, default="cpu", help="score on this device")
    ap.add_argument("--data-root", default=None, help="TpuGraphs runs: where the collection now is")
    return ap


def check_write(args: argparse.Namespace) -> None:
    if args.write and args.data:
        raise SimulatorError("--write rewrites the run's own metrics.json: it cannot hold the metrics of "
                             "--data (leave out one of them)")


def run(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    args = build_parser().parse_args(argv)
    check_write(args)
    if args.write:
        with locked_output(run_folder_of(args.run)):  # no train (or other --write) meanwhile
            return evaluate_run(args)
    return evaluate_run(args)


def evaluate_run(args: argparse.Namespace) -> Dict[str, Any]:
    model, state = load_trained(args.run, "best_model" if args.which == "best" else "model")
    check_device(args.device)  # a clear error without a GPU (or a CUDA build of DGL)
    model.place(Cluster(device=args.device))
    warning = metrics_mismatch(args.run, state)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
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
    if args.write:
        _write(args.run, result, state, args.which)
    return result


def _write(run: str, result: Dict[str, Any], state: Dict[str, Any], which: str) -> None:
    """metrics.json with these metrics and the checkpoint they come from; what it held of
    the training run (its `run` summary) is kept when it described this checkpoint."""
    path = os.path.join(run_folder_of(run), "metrics.json")
    old: Dict[str, Any] = {}
    if os.path.exists(path) and metrics_mismatch(run, state) is None:
        try:
            with open(path, encoding="utf-8") as f:
                old = {k: v for k, v in json.load(f).items() if k == "run"}
        except (OSError, ValueError):
            old = {}
    record = checkpoint_record(state)
    if which == "last":  # these metrics are of the last weights, not the best
        record["weights_sha256"] = weights_digest(state, "model")
        record["which"] = "last"
    write_json(path, dict(old, **result, checkpoint=record))
    print(f"wrote {path}", file=sys.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_cli(run, argv)


if __name__ == "__main__":
    sys.exit(main())
