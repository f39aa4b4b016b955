"""A benchmark's finished training runs, kept compactly beside its results.

The run folders (`--runs`) hold checkpoints and logs and live outside the repository; a
benchmark that trains hundreds of runs over several days loses them all with the machine.
A benchmark that reads only each run's metrics passes `kept=FOLDER` to
`benchmarks.common.run_many` (`RESULTS/<its result name>_runs/`): every finished run is
then also written to `FOLDER/<run folder's name>-<digest of its command line>.json.gz` —
its command line, its metrics without the validation set's per-task rows (the commit of
the code that trained it among them, `code`), its training seconds, and the digest of its
data where the benchmark gives one (`benchmarks.xla_layout`, `benchmarks.networks`,
`benchmarks.learning_curves`: data measured again or grown trains every run again); gzipped without a
timestamp, so a run kept again unchanged is unchanged bytes — and a run whose folder is
missing is taken from there when its command line (where its files were on the machine
that trained it aside: `command_key`) and its resolved config are today's
(`benchmarks.common.run_training`), whatever runs folder asks. The digest keeps runs of
one folder name but another command (a 10-epoch and a 60-epoch table) side by side; a file
kept under the run's name alone, as before, is still read when its command is the run's,
and renamed when the run is kept again.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
from typing import Any, Dict, List, Optional, Sequence

from extract.fileio import write_gzip
from simulator.registry import SimulatorError

KEPT_SUFFIX = "_runs"    # RESULTS/<a benchmark's result name>_runs/: its kept runs


def kept_file(kept: str, out: str, argv: Sequence[str]) -> str:
    """KEPT/<run folder's name>-<8 hex digits of the command line's SHA-256>.json.gz."""
    digest = hashlib.sha256(json.dumps(command_key(argv)).encode("utf-8")).hexdigest()[:8]
    return os.path.join(kept, f"{os.path.basename(os.path.normpath(out))}-{digest}.json.gz")


def unhashed_file(kept: str, out: str) -> str:
    """Where runs were kept before their names carried the command's digest."""
    return os.path.join(kept, os.path.basename(os.path.normpath(out)) + ".json.gz")


def command_key(argv: Sequence[str]) -> List[str]:
    """The command line without where its files are on this machine (where the runs folder
    is differs between machines; the run does not): no `--out` folder, and the `--data-root`
    folder by its name alone (a benchmark's fold of links under its runs folder, e.g.
    `folds/bert`; the data it links to is the run's data digest)."""
    argv = list(argv)
    if "--out" in argv:
        at = argv.index("--out")
        del argv[at:at + 2]
    if "--data-root" in argv[:-1]:
        at = argv.index("--data-root") + 1
        argv[at] = place_free_root(argv[at])
    return argv


def place_free_root(data_root: str) -> str:
    """A `--data-root` folder by its name alone (see `command_key`)."""
    return os.path.basename(os.path.normpath(data_root))


def compact(metrics: Dict[str, Any]) -> Dict[str, Any]:
    """The metrics as `simulator.train` wrote them, without the validation set's per-task
    rows (nine tenths of the file) and without what the benchmark added (`bench`)."""
    val = {name: {k: v for k, v in stat.items() if k != "per_workload"} if isinstance(stat, dict) else stat
           for name, stat in (metrics.get("val") or {}).items()}
    return {**{k: v for k, v in metrics.items() if k != "bench"}, "val": val}


def keep(kept: str, out: str, argv: Sequence[str], metrics: Dict[str, Any], seconds: Optional[float],
         data: Optional[str] = None) -> None:
    """Keep a finished run; `data`, the digest of the data it trained on, where the benchmark
    gives one (a run kept without it is reused only where none is asked for)."""
    record = {"argv": command_key(argv), "metrics": compact(metrics), "seconds": seconds,
              **({"data": data} if data is not None else {})}
    text = json.dumps(record, sort_keys=True).encode("utf-8")
    write_gzip(kept_file(kept, out, argv), text)
    old = unhashed_file(kept, out)
    if os.path.exists(old) and command_key(_read(old)["argv"]) == record["argv"]:
        os.remove(old)    # the same run, kept under its new name


def read_kept(kept: str, out: str, argv: Sequence[str]) -> Optional[Dict[str, Any]]:
    """The kept run of OUT with this command line ({"argv", "metrics", "seconds"}, and "data"
    where it was kept with its data's digest), None
    when none is kept; a one-line error naming the file when it is damaged."""
    path = kept_file(kept, out, argv)
    if os.path.exists(path):
        return _read(path)
    old = unhashed_file(kept, out)
    if os.path.exists(old):
        record = _read(old)
        return record if command_key(record["argv"]) == command_key(argv) else None
    return None


def _read(path: str) -> Dict[str, Any]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            record = json.load(f)
        if not (isinstance(record["argv"], list) and isinstance(record["metrics"], dict)):
            raise TypeError("argv or metrics of the wrong type")
    except (OSError, EOFError, ValueError, KeyError, TypeError) as e:
        raise SimulatorError(f"{path}: not a kept training run ({e}); delete it to train the run again") from None
    return record
