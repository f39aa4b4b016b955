"""Grow this CPU's networks dataset: measure more tasks on this machine, never another CPU's.

    python -m datasets.measure --work-dir /work/measure/znver4 --networks all --trials-per-task 64
    python -m datasets.measure --work-dir /work/measure/znver4 --remeasure 0.12
    python -m datasets.ship /work/measure/znver4          # → datasets/networks_<this cpu>/

The machine's CPU is LLVM's name for it (`znver4`, `rocketlake`), as the measuring target
uses it. Its dataset is `datasets/networks_<cpu>/`. A new work folder starts from that
dataset when one is shipped (its task table, databases, sidecars and state are unpacked
into the work folder, so the campaign goes on where the committed data ends and nothing
measured is measured again); a work folder or dataset of another CPU is refused. Every
other option is `extract.ms_measure`'s (its `--help`), which does the measuring: resumable,
one pinned core, progress with an ETA. The computations other CPUs' shipped datasets have
measured are measured first (`--first-keys`), so that two CPUs share tasks soonest.
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from extract.fileio import atomic_write
from extract.inputs import DATABASE_FILES

from .networks import (TASKS, NetworkDataError, dataset_cpu, dataset_folder, find_file, is_dataset,
                       shipped_datasets, summary_tasks, table_cpu)

UNPACKED = ("meta.json", TASKS, "reference.jsonl", "reference_kernel.json")
PASS_FILES = ("records.jsonl", "state.json")
FIRST_KEYS = "first_keys.txt"   # computations to measure first (`shared_first`)


def this_cpu() -> str:
    from tvm.target.codegen import llvm_get_system_cpu

    return str(llvm_get_system_cpu())


def _unpacked_files(dataset: Path) -> List[Path]:
    """The files of a shipped dataset that a work folder holds (gzipped or not), relative."""
    names = [Path(n) for n in UNPACKED]
    for folder in sorted(p for p in dataset.glob("pass*") if p.is_dir()):
        names += [Path(folder.name) / n for n in PASS_FILES]
        names += [Path(folder.name) / m.name / n for m in sorted(folder.iterdir()) if m.is_dir()
                  for n in DATABASE_FILES]
    return [n for n in names if find_file(dataset / n.parent, n.name) is not None]


def unpack(dataset: Path, work: Path) -> int:
    """Copy a shipped dataset into a new work folder, gunzipped; the number of files."""
    files = _unpacked_files(dataset)
    for name in files:
        src = find_file(dataset / name.parent, name.name)
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        with open(src, "rb") as raw:
            zipped = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            source = gzip.GzipFile(fileobj=raw, mode="rb") if zipped else raw
            with atomic_write(work / name, "wb") as out:
                shutil.copyfileobj(source, out)
    return len(files)


def prepare(work: Path, cpu: str, dataset: Path) -> str:
    """Check the work folder against this CPU and seed it from the dataset; what was done."""
    if find_file(work, TASKS) is not None:
        if table_cpu(work) != cpu:
            raise NetworkDataError(f"{work}: measured on {table_cpu(work)}, this machine is {cpu}: "
                                   f"use another --work-dir (this CPU's dataset is {dataset})")
        return f"{work}: resuming ({cpu})"
    if not is_dataset(dataset):
        return f"{work}: a new dataset for {cpu} (nothing shipped at {dataset} yet)"
    if dataset_cpu(dataset) != cpu:
        raise NetworkDataError(f"{dataset}: measured on {dataset_cpu(dataset)}, this machine is {cpu}")
    count = unpack(dataset, work)
    return f"{work}: continues {dataset} ({count} files unpacked, {cpu})"


def shared_first(cpu: str) -> List[str]:
    """The workload keys other CPUs' shipped datasets have measured: measured here first, so
    that two CPUs share tasks soonest (what a user with new hardware gets is measured on them)."""
    return sorted({row["key"] for other, folder in shipped_datasets().items() if other != cpu
                   for row in summary_tasks(folder) if row["valid"] > 0})


def first_keys_argv(work: Path, cpu: str) -> List[str]:
    """ms_measure's `--first-keys` for `shared_first` (written into the work folder)."""
    keys = shared_first(cpu)
    if not keys:
        return []
    path = work / FIRST_KEYS
    with atomic_write(str(path), "w") as f:
        f.write("".join(key + "\n" for key in keys))
    print(f"first: the {len(keys)} computations other CPUs' datasets measured ({path.name})", file=sys.stderr)
    return ["--first-keys", str(path)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m datasets.measure", description=__doc__, add_help=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-dir", help="the measuring work folder (made or resumed; required)")
    ap.add_argument("-h", "--help", action="store_true")
    args, rest = ap.parse_known_args(argv)
    from extract.metaschedule import campaign as ms_measure

    if args.help:
        ap.print_help()
        print("\nextract.ms_measure's options:\n")
        ms_measure.build_parser().print_help()
        return 0
    if not args.work_dir:
        ap.error("the following arguments are required: --work-dir")
    cpu, work = this_cpu(), Path(args.work_dir).resolve()
    try:
        print(prepare(work, cpu, dataset_folder(cpu)), file=sys.stderr)
    except (NetworkDataError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not any(a == "--first-keys" or a.startswith("--first-keys=") for a in rest):
        rest = [*first_keys_argv(work, cpu), *rest]
    code = ms_measure.main(["--work-dir", str(work), *rest])
    print(f"ship what is measured: python -m datasets.ship {os.path.relpath(work)}  "
          f"(→ {os.path.relpath(dataset_folder(cpu))})", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
