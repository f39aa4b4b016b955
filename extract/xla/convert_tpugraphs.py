"""TpuGraphs files on the command line (the code lives in the modules named below):

    python -m extract.tpugraphs convert RAW.pb … --out DIR   # raw protos → npz (extract/xla/convert_tuning.py)
    python -m extract.tpugraphs info FILE.npz …              # kind, sizes (extract/xla/npz_format.py)

`convert` writes `DIR/<name>.npz` for each file a raw proto holds: one per kernel
(`<stem>.<kernel>.npz`) for a `TuningData`, `<stem>.npz` for a `ModuleTuningData`.
The output folder follows extract/xla/npz_output.py: one writer at a time; a DIR already
holding `*.npz` files of an earlier run is refused unless `--overwrite`, which deletes
them first; two inputs writing the same file are an error for the second. It prints one
line per input (files, configs, runs left out by reason; `-v`: one per file) and a
total, with a progress bar only on a terminal. Exit status: 0, 1 if some input failed
(named on stderr), 2 if DIR cannot be used.
"""
from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from extract.fileio import OutputBusyError
from extract.xla.npz_output import NpzOutput, OutputNotEmptyError, progress
from extract.xla.npz_format import NpzGraph, TpuGraphsFile
from extract.xla.convert_tuning import read_tuning_file


def _notes(graph: NpzGraph) -> List[str]:
    notes = [f"{graph.num_nodes} nodes", f"{graph.num_edges} edges", f"{graph.num_configs} configs"]
    if graph.meta.get("skipped_runs"):
        notes.append(f"runs left out: {graph.meta['skipped_runs']}")
    if graph.meta.get("unknown_opcodes"):
        notes.append(f"UNK opcodes: {graph.meta['unknown_opcodes']}")
    return notes


def _summary(path: Path, graphs: Sequence[NpzGraph], out_dir: Path) -> str:
    """One line: what one raw file gave (files, configs, runs left out by reason)."""
    if len(graphs) == 1:
        return f"{path} → {out_dir / (graphs[0].name + '.npz')} ({', '.join(_notes(graphs[0]))})"
    skipped: collections.Counter = collections.Counter()
    unknown: collections.Counter = collections.Counter()
    for graph in graphs:
        skipped.update(graph.meta.get("skipped_runs", {}))
        unknown.update(graph.meta.get("unknown_opcodes", {}))
    notes = [f"{sum(g.num_nodes for g in graphs)} nodes",
             f"{sum(g.num_configs for g in graphs)} configs"]
    if skipped:
        notes.append(f"runs left out: {dict(skipped)}")
    if unknown:
        notes.append(f"UNK opcodes: {dict(unknown)}")
    return f"{path} → {len(graphs)} tile files in {out_dir} ({', '.join(notes)})"


def convert(path: Path, out_dir: Path, output: Optional[NpzOutput] = None,
            verbose: bool = False, say: Callable[[str], None] = print) -> int:
    """Write the npz files of one raw proto file into `out_dir` (through `output`, the
    run's NpzOutput, when given); print one line (with `verbose`, one per file). The
    number of files written."""
    graphs = read_tuning_file(path)
    path_of = lambda graph: out_dir / f"{graph.name}.npz"  # noqa: E731
    written = (output.write_all(graphs, path_of, source=str(path)) if output is not None
               else [graph.write(path_of(graph)) for graph in graphs])
    if verbose:
        for graph, target in zip(graphs, written):
            say(f"{path} → {target} ({', '.join(_notes(graph))})")
    else:
        say(_summary(path, graphs, out_dir))
    return len(written)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m extract.tpugraphs",
                                     description="TpuGraphs npz files and raw protos")
    commands = parser.add_subparsers(dest="command", required=True)
    convert_parser = commands.add_parser(
        "convert", help="raw TuningData/ModuleTuningData → npz",
        epilog="DIR must not hold npz files from another run (a reader would mix them with "
               "this run's); --overwrite deletes them first.")
    convert_parser.add_argument("files", nargs="+", type=Path)
    convert_parser.add_argument("--out", type=Path, required=True, metavar="DIR")
    convert_parser.add_argument("--overwrite", action="store_true",
                                help="replace the npz files DIR holds from an earlier run")
    convert_parser.add_argument("-v", "--verbose", action="store_true",
                                help="one line per file written (default: one per input)")
    info = commands.add_parser("info", help="kind and sizes of npz files")
    info.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.command == "info":
        return _info(args.files)
    failed = total = 0
    try:
        with NpzOutput(args.out, ("*.npz",), overwrite=args.overwrite) as output:
            if output.removed:
                print(f"{args.out}: removed {output.removed} npz files of an earlier run "
                      "(--overwrite)")
            items, say = progress(args.files, "convert")
            for path in items:
                try:
                    total += convert(path, args.out, output, args.verbose, say)
                except ValueError as e:
                    print(f"error: {e}", file=sys.stderr)
                    failed += 1
    except (OSError, OutputBusyError, OutputNotEmptyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.out}: {total} npz files from {len(args.files) - failed} of {len(args.files)} "
          "inputs" + (f"; {failed} failed (errors above)" if failed else ""))
    return 1 if failed else 0


def _info(paths: Sequence[Path]) -> int:
    failed = 0
    for path in paths:
        try:
            print(repr(TpuGraphsFile(path)))
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
