"""TpuGraphs files on the command line (the code lives in the modules named below):

    python -m extract.tpugraphs convert RAW.pb … --out DIR   # raw protos → npz (extract/tuning_data.py)
    python -m extract.tpugraphs info FILE.npz …              # kind, sizes (extract/tpugraphs_npz.py)

`convert` writes `DIR/<name>.npz` for each file a raw proto holds: one per kernel
(`<stem>.<kernel>.npz`) for a `TuningData`, `<stem>.npz` for a `ModuleTuningData`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from extract.tpugraphs_npz import TpuGraphsFile
from extract.tuning_data import read_tuning_file


def convert(path: Path, out_dir: Path) -> None:
    """Write the npz files of one raw proto file into `out_dir`; print what was written."""
    for graph in read_tuning_file(path):
        target = graph.write(out_dir / f"{graph.name}.npz")
        notes = [f"{graph.num_nodes} nodes", f"{graph.num_edges} edges",
                 f"{graph.num_configs} configs"]
        if graph.meta.get("skipped_runs"):
            notes.append(f"runs left out: {graph.meta['skipped_runs']}")
        if graph.meta.get("unknown_opcodes"):
            notes.append(f"UNK opcodes: {graph.meta['unknown_opcodes']}")
        print(f"{path} → {target} ({', '.join(notes)})")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m extract.tpugraphs",
                                     description="TpuGraphs npz files and raw protos")
    commands = parser.add_subparsers(dest="command", required=True)
    convert_parser = commands.add_parser("convert", help="raw TuningData/ModuleTuningData → npz")
    convert_parser.add_argument("files", nargs="+", type=Path)
    convert_parser.add_argument("--out", type=Path, required=True)
    info = commands.add_parser("info", help="kind and sizes of npz files")
    info.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    failed = 0
    for path in args.files:
        try:
            if args.command == "info":
                print(repr(TpuGraphsFile(path)))
            else:
                convert(path, args.out)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
