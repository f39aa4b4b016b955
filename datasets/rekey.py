"""Re-key a MetaSchedule dataset folder: every task's key and operator kind made again from
its IRModule with today's `extract.tir.workload_key`, and every record line that names a task by
its key renamed with it.

    python -m datasets.rekey datasets/networks_rocketlake [--check]

The folder is `extract.ms_measure`'s work folder or a shipped dataset (`datasets.ship`),
plain or gzipped. Rewritten: the task table (`tasks.json[.gz]`, its rows' `key` and `kind`,
version `extract.metaschedule.tasks.TABLE_VERSION`) and each pass's sidecar (`passN/records.jsonl[.gz]`,
its rows' `workload`). The databases name no key (their records point at workload lines),
so they are left as they are; `summary.json` and `README.md` are `datasets.ship`'s to
regenerate (`python -m datasets.ship FOLDER --out FOLDER --overwrite`).

Two tasks of the table that get one new key (the same computation reached twice) or two
sidecar keys that map to no task are reported, not guessed: the command stops before
writing anything. `--check` only prints what would change, and whether any old key stood
for two different computations (it cannot: the table kept one task per old key, so a
second computation under the same old key would not be in the table at all; that is checked
by extracting the networks again, `extract.metaschedule.tasks`).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from extract.fileio import atomic_write, write_gzip

from .networks import SIDECAR, TASKS, NetworkDataError, find_file, open_text


def _read_json(path: Path) -> Any:
    with open_text(path) as f:
        return json.load(f)


def _write(path: Path, text: str) -> None:
    """Write `text` as `path` was (gzip when its name ends in .gz, deterministically)."""
    data = text.encode("utf-8")
    if path.name.endswith(".gz"):
        write_gzip(path, data)
    else:
        with atomic_write(path, "wb") as out:
            out.write(data)


def _sans_kind(key: str) -> str:
    """chain.shapes.dtype.target of a key of either format (the digest left out): what an
    old key and a new one of the same program share."""
    parts = key.split(".")
    return ".".join(parts[1:4] + parts[-1:])


def database_programs(folder: Path, target) -> Dict[str, set]:
    """chain.shapes.dtype.target → the keys of the distinct programs of the folder's
    databases (every workload line of every pass)."""
    from extract.metaschedule.database import database_files, database_lines, find_databases, workload_module
    from extract.tir.workload_key import workload_key

    found: Dict[str, set] = {}
    for database in find_databases(str(folder)):
        for _, text, _ in database_lines(database_files(database)[0]):
            key = workload_key(workload_module(text), target)
            found.setdefault(_sans_kind(key), set()).add(key)
    return found


def new_keys(doc: Dict[str, Any], path: Path, folder: Path) -> Tuple[Dict[str, Tuple[str, str]], List[str]]:
    """Old key → (new key, new kind) for every task of a task table document, made from the
    task's IRModule (or, for a table kept without them, from the databases' workload of the
    same shapes and blocks); and the problems: an old key whose databases hold several
    programs (it merged them), two tasks becoming one."""
    import tvm

    from extract.tir.workload_key import describe, parse_workload_key

    if not doc.get("target"):
        raise NetworkDataError(f"{path}: the table names no target")
    target = tvm.target.Target(json.loads(doc["target"]))
    programs = database_programs(folder, target)
    mapping: Dict[str, Tuple[str, str]] = {}
    problems: List[str] = []
    for row in doc["tasks"]:
        held = programs.get(_sans_kind(row["key"]), set())
        if row.get("mod_json", "").strip("'\""):
            parts = describe(tvm.ir.load_json(row["mod_json"]), target)
            new = str(parts)
        elif len(held) == 1:
            new = next(iter(held))
        else:
            raise NetworkDataError(f"{path}: task {row['key']} has no IRModule and its databases hold "
                                   f"{len(held)} programs of its shapes")
        if len(held) > 1:
            problems.append(f"{row['key']} held {len(held)} different programs: {sorted(held)}")
        mapping[row["key"]] = (new, parse_workload_key(new).kind)
    counts = Counter(new for new, _ in mapping.values())
    problems += [f"tasks {sorted(o for o, (n, _) in mapping.items() if n == new)} get one key {new}"
                 for new, c in counts.items() if c > 1]
    return mapping, problems


def rekey_sidecar(path: Path, mapping: Dict[str, Tuple[str, str]]) -> Tuple[str, int]:
    """The sidecar's text with every row's workload renamed; how many rows changed. A row
    whose workload is no task of the table is a NetworkDataError naming file:line."""
    lines, changed = [], 0
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or not line.endswith("\n"):
                lines.append(line)
                continue
            row = json.loads(line)
            old = row.get("workload")
            if old not in mapping:
                if any(new == old for new, _ in mapping.values()):
                    lines.append(line)
                    continue
                raise NetworkDataError(f"{path}:{n}: workload {old!r} is no task of the table")
            row["workload"] = mapping[old][0]
            changed += int(mapping[old][0] != old)
            lines.append(json.dumps(row, sort_keys=True) + "\n")
    return "".join(lines), changed


def rekey(folder: Path, check: bool = False) -> Dict[str, Any]:
    """Re-key `folder` (see the module docstring); what changed."""
    from extract.metaschedule.tasks import TABLE_VERSION

    table = find_file(folder, TASKS)
    if table is None:
        raise NetworkDataError(f"{folder}: no {TASKS}[.gz] (the task table)")
    doc = _read_json(table)
    mapping, problems = new_keys(doc, table, folder)
    if problems:
        raise NetworkDataError(f"{table}: " + "; ".join(problems))
    sidecars = {p: rekey_sidecar(p, mapping) for p in
                (find_file(d, SIDECAR) for d in sorted(folder.glob("pass*")) if d.is_dir()) if p is not None}
    states = {p: rekey_state(p, mapping) for p in sorted(folder.glob("pass*/state.json"))}
    summary = folder / "summary.json"
    kinds = Counter((row["kind"], mapping[row["key"]][1]) for row in doc["tasks"])
    report = {"tasks": len(mapping), "keys_changed": sum(o != n for o, (n, _) in mapping.items()),
              "kinds_changed": {f"{a} → {b}": c for (a, b), c in kinds.items() if a != b},
              "sidecar_rows_changed": {str(p): c for p, (_, c) in sidecars.items()}}
    if check:
        return report
    for row in doc["tasks"]:
        row["key"], row["kind"] = mapping[row["key"]]
    doc["version"] = TABLE_VERSION
    _write(table, json.dumps(doc, indent=1))
    for path, (text, _) in sidecars.items():
        _write(path, text)
    for path, text in states.items():
        _write(path, text)
    if summary.exists():
        _write(summary, rekey_summary(summary, mapping))
    return report


def rekey_state(path: Path, mapping: Dict[str, Tuple[str, str]]) -> str:
    """A pass's state.json with its exhausted "key|method" entries renamed."""
    state = _read_json(path)
    renamed = {}
    for entry, reason in state.get("exhausted", {}).items():
        key, _, method = entry.rpartition("|")
        renamed[f"{mapping.get(key, (key,))[0]}|{method}"] = reason
    state["exhausted"] = renamed
    return json.dumps(state, indent=1, sort_keys=True)


def rekey_summary(path: Path, mapping: Dict[str, Tuple[str, str]]) -> str:
    """summary.json (`datasets.ship`) with its task rows' key and kind renamed."""
    summary = _read_json(path)
    for row in summary.get("tasks", []):
        if row.get("key") in mapping:
            row["key"], row["kind"] = mapping[row["key"]]
    return json.dumps(summary, indent=1)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m datasets.rekey", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", help="a measuring work folder or a shipped dataset folder")
    ap.add_argument("--check", action="store_true", help="print what would change, write nothing")
    args = ap.parse_args(argv)
    try:
        report = rekey(Path(args.folder), args.check)
    except (NetworkDataError, OSError, json.JSONDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
