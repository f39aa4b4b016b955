"""The measured XLA layout collection on the command line (`python -m extract.xla_collect`).

    python -m extract.xla_collect list
    python -m extract.xla_collect summary ROOT [--probes]
    python -m extract.xla_collect ship ROOT --out datasets/xla_layout_<cpu> [--overwrite]
    python -m extract.xla_collect npz ROOT [--programs NAME,…|all]
    python -m extract.xla_collect zoo --out ROOT [--programs NAME,…|all] [options]
    python -m extract.xla_collect function MODULE:FUNCTION --shapes f32[8,64] f32[64,32]
                                  --out ROOT [--name NAME] [--split train] [options]

`ship` writes a finished ROOT compactly into the folder the repository ships (ship.py).
`npz` writes the npz files of a ROOT (or of a shipped folder) again from its plans and
timings, each program re-traced and checked to be the one measured: for files made before
the format gained arrays (the configurable nodes' roles); nothing is measured.
`zoo` measures the programs of programs.py here (an inference and a training
step of each model), `function` one JAX function on seeded arguments of the given
shapes. Each program: its configurable nodes are probed, `--configs` configs per search
(random, default) are sampled, timed on one core and written as TpuGraphs layout npz
files under ROOT (collect.py here); then

    python -m simulator.train --data tpugraphs:layout:xla:random --data-root ROOT

Options: `--measure-core N` (default −1: the last core of the process's affinity, so
`taskset -c 1 python -m …` measures on core 1), `--compile-core N` (another core compiles
half of each batch meanwhile: compile_ahead.py), `--repeats` (rounds), `--batch` (configs
timed in the same rounds), `--min-repeat-ms`,
`--clock wall|cpu` (wall time on a core of its own, or the process's CPU time on a
shared core), `--remeasure` (share of configs timed twice), `--configs`, `--seed`, `--max-probe`,
`--min-effect`. A killed run continues where it stopped when started again with the same
command. Exit status: 0; 1 if some program failed (one line each on stderr); 2 if the
input or ROOT cannot be used.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional, Sequence


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, metavar="ROOT")
    parser.add_argument("--configs", type=int, default=100, help="configs per search (default 100)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--measure-core", type=int, default=-1,
                        help="core to measure on (default: the last one this process may use)")
    parser.add_argument("--compile-core", type=int, default=None,
                        help="another core that compiles half of each batch while the measuring core "
                             "compiles the other half (about half the compile time; nothing runs on it "
                             "while a batch is timed); default: none")
    parser.add_argument("--repeats", type=int, default=50,
                        help="rounds: timed repeats per config (default 50)")
    parser.add_argument("--batch", type=int, default=200,
                        help="configs compiled, then timed in the same rounds (default 200; "
                             "each compiled config holds ~10–15 MB)")
    parser.add_argument("--min-repeat-ms", type=float, default=20.0, help="shortest repeat")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall time (a core of its own; default) or the process's CPU time "
                             "(a core shared with other work)")
    parser.add_argument("--remeasure", type=float, default=0.1,
                        help="share of each program's configs measured twice (noise ceiling)")
    parser.add_argument("--max-probe", type=int, default=48, help="candidates probed per program")
    parser.add_argument("--min-effect", type=float, default=0.02,
                        help="smallest relative runtime change that makes a node configurable")


def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m extract.xla_collect",
                                     description="measured XLA layout collection (TpuGraphs npz)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the zoo's programs")
    summary = commands.add_parser("summary", help="one line per measured program of ROOT")
    summary.add_argument("out", type=Path, metavar="ROOT")
    summary.add_argument("--probes", action="store_true", help="and each program's probe")
    ship = commands.add_parser("ship", help="a finished ROOT, compacted into the shipped folder")
    ship.add_argument("root", type=Path, metavar="ROOT")
    ship.add_argument("--out", type=Path, required=True, help="e.g. datasets/xla_layout_<cpu>")
    ship.add_argument("--overwrite", action="store_true", help="replace what OUT holds")
    npz = commands.add_parser("npz", help="write a ROOT's npz files again from its plans and timings")
    npz.add_argument("out", type=Path, metavar="ROOT")
    npz.add_argument("--programs", default="all", help="comma-separated names, or all")
    zoo = commands.add_parser("zoo", help="measure programs of the zoo")
    zoo.add_argument("--programs", default="all", help="comma-separated names, or all")
    _options(zoo)
    function = commands.add_parser("function", help="measure one JAX function")
    function.add_argument("function", metavar="MODULE:FUNCTION")
    function.add_argument("--shapes", nargs="+", required=True, metavar="SHAPE",
                          help="argument shapes, e.g. f32[8,64] s32[8]")
    function.add_argument("--name", default="", help="graph name (default: MODULE.FUNCTION)")
    function.add_argument("--split", default="train", choices=("train", "valid", "test"))
    _options(function)
    return parser.parse_args(argv)


def _jobs(args: argparse.Namespace) -> List:
    from extract.xla.collection.collect import Job
    from extract.xla.collection.programs import SPLIT_OF_FAMILY, select

    if args.command == "function":
        from extract.xla.collection.functions import function_program
        return [Job(function_program(args.function, args.shapes, args.name), args.split)]
    names = [n.strip() for n in args.programs.split(",") if n.strip()]
    return [Job(p, SPLIT_OF_FAMILY.get(p.family, "train")) for p in select(names)]


def _ship(args: argparse.Namespace) -> int:
    from extract.fileio import OutputBusyError, output_lock
    from extract.xla.collection.ship import ship
    try:
        with output_lock(args.out):
            lines = ship(args.root, args.out, args.overwrite)
    except (ValueError, OSError, OutputBusyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    print(f"{args.out}: {len(lines)} programs shipped from {args.root}")
    return 0


def _rewrite_npz(args: argparse.Namespace) -> int:
    from extract.fileio import OutputBusyError, output_lock
    from extract.xla.collection.collect import rewrite_npz
    from extract.xla.collection.programs import zoo
    names = [n.strip() for n in args.programs.split(",") if n.strip()]
    try:
        with output_lock(args.out):
            failed = rewrite_npz(args.out, zoo(), None if names in ([], ["all"]) else names,
                                 lambda line: print(line, file=sys.stderr if line.startswith("error") else sys.stdout))
    except (ValueError, OSError, OutputBusyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 1 if failed else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse(argv)
    if args.command == "list":
        from extract.xla.collection.programs import SPLIT_OF_FAMILY, zoo
        for name, program in zoo().items():
            print(f"{name}\t{program.family}\t{SPLIT_OF_FAMILY.get(program.family, 'train')}")
        return 0
    if args.command == "summary":
        from extract.xla.collection.collect import print_summary
        return print_summary(args.out, args.probes)
    if args.command == "ship":
        return _ship(args)
    if args.command == "npz":
        return _rewrite_npz(args)
    from extract.fileio import OutputBusyError, output_lock
    from extract.xla.collection.collect import check_root
    from extract.xla.collection.measure import MeasureSettings, pin_process
    from extract.xla.collection.plan import PlanSettings
    try:
        settings = MeasureSettings(args.measure_core, args.repeats, args.min_repeat_ms,
                                   args.batch, args.remeasure, clock=args.clock, compile_core=args.compile_core)
        plan = PlanSettings(configs=args.configs, seed=args.seed, max_probe=args.max_probe,
                            min_effect=args.min_effect)
        check_root(args.out)
        pinned = pin_process(settings)  # before JAX starts its backend
        jobs = _jobs(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from extract.xla.collection.collect import collect
    try:
        with output_lock(args.out):
            failed = collect(jobs, args.out, plan, settings, pinned)
    except (OSError, OutputBusyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.out}: {len(jobs) - failed} of {len(jobs)} programs measured"
          + (f"; {failed} failed (errors above)" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
