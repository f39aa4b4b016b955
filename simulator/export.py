"""Export a trained run's model alone, small enough to ship (e.g. a pre-trained checkpoint).

    python -m simulator.export RUN_DIR FILE [--last]

Writes the model's config, model info (vocabulary, feature names), normalisation and its
best weights (`--last`: the last epoch's) — what `CostModel.load(FILE)` and
`simulator.predict` need — without the run's split, optimizer state and history, which
make a run's checkpoint many times larger. The file is checksummed like any checkpoint.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from extract.cli import output_file

from .costmodel import load_trained
from .registry import run_cli


def export(run: str, out: str, which: str = "best_model") -> int:
    """Save the run's model into `out`; its size in bytes."""
    model, _ = load_trained(run, which)
    model.save(out)
    return os.path.getsize(out)


def _run(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m simulator.export", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="a simulator.train run folder (or its checkpoint)")
    ap.add_argument("out", type=output_file, help="the file to write")
    ap.add_argument("--last", action="store_true", help="the last epoch's weights, not the best")
    args = ap.parse_args(argv)
    size = export(args.run, args.out, "model" if args.last else "best_model")
    print(f"wrote {args.out} ({size / 1024:.0f} KiB)")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The CLI: a user error (no such run, a damaged checkpoint) is one line, exit code 2."""
    return run_cli(_run, argv)


if __name__ == "__main__":
    sys.exit(main())
