"""The whole-network benchmark's measurements, kept compactly beside its results, so that a
fresh clone — or a machine whose runs folder was lost — resumes where the kept runs stopped.

The benchmark measures for days. Its work dirs (`--runs`) hold everything a run resumes
from, but they live outside the repository; without a kept copy, a lost runs folder loses
every measured step. So after each finished step the step's work dir is copied to
`<results>/ms_networks_runs_<cpu>/<network>/<cost model>/seed<S>/`:

- its MetaSchedule database (`database_*.json.gz`, gzipped without timestamps so an
  unchanged database is unchanged bytes),
- the settings `simulator.tune` resumes by (`tune_settings.json`, with the runs folder's
  path written as `{runs}`),
- every `summary_b<B>.json` and `quiet_b<B>.json`.

One folder per CPU model (LLVM's name, as for the networks datasets): timings of two CPUs
never meet in one table, and `machine.json` says which machine and command measured them.
Before planning, a work dir with fewer finished steps than its kept copy is restored from
it (settings moved to this run's `--runs`); the step that was running when the runs folder
was lost starts again from the last finished one. Checkpoints and compiled libraries are not
kept: pre-training is seeded and re-run, the quiet pass rebuilds its libraries.
"""
from __future__ import annotations

import glob
import gzip
import json
import os
import re
import shutil
from typing import Any, Dict, List

from extract.fileio import atomic_write, write_gzip
from extract.inputs import DATABASE_FILES
from simulator.registry import SimulatorError

KEPT_PREFIX = "ms_networks_runs_"
MACHINE = "machine.json"
STEP_FILES = ("summary_b*.json", "quiet_b*.json")
RUNS_MARK = "{runs}"


def kept_folder(results: str, cpu: str) -> str:
    return os.path.join(results, KEPT_PREFIX + cpu)


def copy_of(work_dir: str, runs: str, kept: str) -> str:
    """Where a work dir (`runs/tune/<network>/<cost model>/seed<S>`) is kept."""
    return os.path.join(kept, os.path.relpath(work_dir, os.path.join(runs, "tune")))


def finished_budgets(folder: str) -> List[int]:
    """The budgets whose step summary the folder holds."""
    names = (os.path.basename(p) for p in glob.glob(os.path.join(glob.escape(folder), "summary_b*.json")))
    return sorted(int(m.group(1)) for m in (re.fullmatch(r"summary_b(\d+)\.json", n) for n in names) if m)


def keep(work_dir: str, runs: str, kept: str) -> None:
    """Copy the work dir's measurements into its kept folder (`kept/<work dir under runs>`)."""
    if not finished_budgets(work_dir):
        return
    to = copy_of(work_dir, runs, kept)
    for name in DATABASE_FILES:
        with open(os.path.join(work_dir, name), "rb") as src:
            write_gzip(os.path.join(to, name + ".gz"), src.read())
    _write_settings(work_dir, to, runs, RUNS_MARK)
    for pattern in STEP_FILES:
        for path in glob.glob(os.path.join(glob.escape(work_dir), pattern)):
            with open(path, "rb") as src, atomic_write(os.path.join(to, os.path.basename(path)), "wb") as f:
                f.write(src.read())


def restore(work_dir: str, runs: str, kept: str) -> bool:
    """Restore the work dir from its kept copy when the copy has more finished steps; whether
    it did. The work dir's own files of a later, unfinished step are replaced."""
    src = copy_of(work_dir, runs, kept)
    if len(finished_budgets(src)) <= len(finished_budgets(work_dir)):
        return False
    os.makedirs(work_dir, exist_ok=True)
    for name in DATABASE_FILES:
        path = os.path.join(src, name + ".gz")
        try:
            with gzip.open(path, "rb") as f, atomic_write(os.path.join(work_dir, name), "wb") as out:
                shutil.copyfileobj(f, out)
        except (OSError, EOFError) as e:
            raise SimulatorError(f"{path}: not a kept database ({e}); delete {src} to measure that run again") from None
    _write_settings(src, work_dir, RUNS_MARK, runs)
    for pattern in STEP_FILES:
        for path in glob.glob(os.path.join(glob.escape(src), pattern)):
            shutil.copyfile(path, os.path.join(work_dir, os.path.basename(path)))
    return True


def _write_settings(src_dir: str, dst_dir: str, old: str, new: str) -> None:
    """Copy simulator.tune's settings file from one folder to another with every path under
    `old` moved under `new`."""
    from simulator.metaschedule.resume import SETTINGS  # imports TVM: not when reports import this

    src, dst = os.path.join(src_dir, SETTINGS), os.path.join(dst_dir, SETTINGS)
    try:
        with open(src, encoding="utf-8") as f:
            stored = json.load(f)
    except (OSError, ValueError) as e:
        raise SimulatorError(f"{src}: not simulator.tune's settings ({e})") from None
    settings = stored.get("settings") if isinstance(stored, dict) else None
    if not isinstance(settings, dict):
        raise SimulatorError(f"{src}: not simulator.tune's settings (no settings object)")
    old = os.path.normpath(old)
    for key, value in settings.items():
        path = os.path.normpath(value) if isinstance(value, str) and value else ""
        if path == old or path.startswith(old + os.sep):
            settings[key] = new if path == old else os.path.join(new, os.path.relpath(path, old))
    with atomic_write(dst) as f:
        json.dump(stored, f, indent=1, sort_keys=True)


def note_machine(kept: str, machine: Dict[str, Any], command: str) -> None:
    """Record the machine and the command that measured the kept runs (each command once)."""
    path = os.path.join(kept, MACHINE)
    note: Dict[str, Any] = {"machine": machine, "commands": []}
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as f:
                note = json.load(f)
            note["commands"] = list(note["commands"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SimulatorError(f"{path}: not the kept runs' machine note ({e})") from None
    if command and command not in note["commands"]:
        note["commands"].append(command)
    with atomic_write(path) as f:
        json.dump(note, f, indent=1, sort_keys=True)
