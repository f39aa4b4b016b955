"""Export a trained run's model alone, small enough to ship (e.g. a pre-trained checkpoint).

    python -m simulator.export RUN_DIR FILE [--last]

Writes the model's config, model info (vocabulary, feature names), normalisation and its
best weights (`--last`: the last epoch's) — what `CostModel.load(FILE)` and
`simulator.predict` need — without the run's split, optimizer state and history, which
make a run's checkpoint many times larger. The file is checksummed like any checkpoint.
`--scores FILE` also writes the run's validation and test means (its metrics.json), its
config and how many records it trained, validated and tested on there, as JSON (so that a
shipped checkpoint says which snapshot of a growing dataset it learned from).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Optional, Sequence

from extract.cli import output_file
from extract.fileio import atomic_write

from .models.costmodel import load_trained
from .registry import SimulatorError, run_cli


def export(run: str, out: str, which: str = "best_model") -> int:
    """Save the run's model into `out`; its size in bytes."""
    model, _ = load_trained(run, which)
    model.save(out)
    return os.path.getsize(out)


def scores(run: str) -> dict:
    """The run's config, its val/test metric means and its split sizes (its metrics.json)."""
    from .checkpoint import run_folder_of

    path = os.path.join(run_folder_of(run), "metrics.json")
    if not os.path.exists(path):
        raise SimulatorError(f"{path}: no metrics.json beside the checkpoint (an unfinished run?)")
    with open(path, encoding="utf-8") as f:
        metrics = json.load(f)
    out = {part: {k: v.get("mean") for k, v in metrics[part].items()} for part in ("val", "test") if part in metrics}
    run = metrics.get("run", {})
    samples = {part: run[f"{part}_samples"] for part in ("train", "val", "test") if f"{part}_samples" in run}
    return dict(out, config=metrics.get("config", {}), samples=samples)


def _run(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m simulator.export", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="a simulator.train run folder (or its checkpoint)")
    ap.add_argument("out", type=output_file, help="the file to write")
    ap.add_argument("--last", action="store_true", help="the last epoch's weights, not the best")
    ap.add_argument("--scores", type=output_file, default=None, help="write the run's val/test means here (JSON)")
    args = ap.parse_args(argv)
    size = export(args.run, args.out, "model" if args.last else "best_model")
    if args.scores:
        with atomic_write(args.scores) as f:
            json.dump(scores(args.run), f, indent=1)
    print(f"wrote {args.out} ({size / 1024:.0f} KiB)")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The CLI: a user error (no such run, a damaged checkpoint) is one line, exit code 2."""
    return run_cli(_run, argv)


if __name__ == "__main__":
    sys.exit(main())
