"""Compact `extract.ms_measure`'s work folder into the committed dataset folder.

    python -m datasets.ship WORK_DIR [--out datasets/networks_<cpu>] [--overwrite]

Writes (every JSON/JSONL file gzipped, deterministically: same input → same bytes):

    tasks.json.gz, reference.jsonl.gz, meta.json, reference_kernel.json
    passN/{random,evolutionary}/database_{workload,tuning_record}.json.gz   (MetaSchedule
        JSONDatabases, readable by `ms.database.JSONDatabase` once gunzipped, and by
        `extract.metaschedule.database` / `datasets.load_collection` as they are)
    passN/records.jsonl.gz   the sidecar: every repeat, min, median, time, load, error
    passN/state.json         the (task, method) pairs whose design space ran out
    summary.json             the per-task table and the agreement of the passes
    README.md                how it was measured (commands and machine from meta.json's
                             sessions), totals, the per-task table, raw vs drift-corrected
                             agreement

A last line cut off without its newline (a writer was appending) is left out and
counted; a sidecar whose count of lines differs from its database's is reported in
README.md. Nothing is written into the work folder. Existing files in OUT are replaced only
with `--overwrite` (other files there — the pre-trained checkpoint — are left alone).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from extract.cli import output_folder
from extract.fileio import OutputBusyError, atomic_write, output_lock, write_gzip
from extract.inputs import DATABASE_FILES
from extract.tir.workload_key import shared_readable_names

from .networks import (FIRST_PASS, HERE, REFERENCE, SIDECAR, TASKS, NetworkDataError, TaskAgreement, agreement,
                       dataset_cpu, dataset_folder, find_file, is_dataset, iter_jsonl, named_cpu, open_text, pretrain_commands,
                       read_tasks, summarize_agreement)

METHODS = ("random", "evolutionary")
FAILED_S = 1e10


@dataclass
class ShipReport:
    """What the compaction did: files written, cut-off lines left out, mismatches."""

    written: List[str] = field(default_factory=list)
    cut_off: Dict[str, int] = field(default_factory=dict)
    problems: List[str] = field(default_factory=list)


# ---------------------------------------------------------------- copying
def complete_lines(path: Path) -> Tuple[bytes, int]:
    """The file's bytes up to its last newline, and 1 when a cut-off line was left out."""
    with open_text(path) as f:
        text = f.read().encode("utf-8")
    end = text.rfind(b"\n") + 1
    return text[:end], int(end < len(text))


def copy_file(src: Path, dst: Path, report: ShipReport, compress: bool) -> None:
    """Copy (gzipped, if `compress`); a JSONL file without its cut-off last line."""
    if compress and not src.name.startswith(TASKS):
        data, cut = complete_lines(src)
        if cut:
            report.cut_off[str(src)] = cut
        write_gzip(dst, data)
    elif compress:  # one JSON document
        with open_text(src) as f:
            write_gzip(dst, f.read().encode("utf-8"))
    else:
        with open_text(src) as f, atomic_write(dst) as out:
            out.write(f.read())
    report.written.append(str(dst))


def pass_folders(work: Path) -> List[Path]:
    return sorted((p for p in work.glob("pass*") if p.is_dir()), key=lambda p: (len(p.name), p.name))


def copy_plan(work: Path) -> List[Tuple[Path, str, bool]]:
    """(source, name in OUT, gzip it) for every file shipped."""
    plan = [(find_file(work, TASKS), TASKS + ".gz", True), (work / "meta.json", "meta.json", False)]
    for name, zipped in ((REFERENCE, True), ("reference_kernel.json", False)):
        src = find_file(work, name)
        if src is not None:
            plan.append((src, name + (".gz" if zipped else ""), zipped))
    for folder in pass_folders(work):
        for method in METHODS:
            for name in DATABASE_FILES:
                src = find_file(folder / method, name)
                if src is not None:
                    plan.append((src, f"{folder.name}/{method}/{name}.gz", True))
        for name, zipped in ((SIDECAR, True), ("state.json", False)):
            src = find_file(folder, name)
            if src is not None:
                plan.append((src, f"{folder.name}/{name}" + (".gz" if zipped else ""), zipped))
    return [p for p in plan if p[0] is not None]  # type: ignore[misc]


def check_work(work: Path) -> None:
    missing = [n for n in (TASKS, "meta.json") if find_file(work, n) is None]
    if not (work / FIRST_PASS).is_dir():
        missing.append(FIRST_PASS + "/")
    if missing:
        raise NetworkDataError(f"{work}: not a measuring work folder (lacks {', '.join(missing)})")


# ---------------------------------------------------------------- the per-task table
def database_counts(folder: Path) -> Dict[str, Counter]:
    """method → Counter(records, valid) of a pass's databases (lines, as MetaSchedule wrote them)."""
    out: Dict[str, Counter] = {}
    for method in METHODS:
        path = find_file(folder / method, DATABASE_FILES[1])
        counts: Counter = Counter()
        if path is not None:
            data, _ = complete_lines(path)
            for n, line in enumerate(data.decode("utf-8").splitlines(), 1):
                if line.strip():
                    counts["records"] += 1
                    counts["valid"] += int(_valid_record(json.loads(line), path, n))
        out[method] = counts
    return out


def _valid_record(row: Any, path: Path, n: int) -> bool:
    try:
        secs = row[1][1]
    except (IndexError, TypeError, KeyError):
        raise NetworkDataError(f"{path}:{n}: not a tuning record") from None
    return bool(secs) and max(float(s) for s in secs) < FAILED_S


def sidecar_stats(folder: Path) -> Tuple[Dict[str, Counter], Dict[str, List[float]], Counter]:
    """Per task: Counter(valid, errors); valid runtimes (median of repeats, s); and per
    method the number of lines (to check against the database)."""
    counts: Dict[str, Counter] = {}
    times: Dict[str, List[float]] = {}
    per_method: Counter = Counter()
    path = find_file(folder, SIDECAR)
    for _, row in (iter_jsonl(path) if path else []):
        task = str(row.get("workload"))
        per_method[row.get("method")] += 1
        ok = row.get("stage") == "ok" and not row.get("error")
        counts.setdefault(task, Counter())["valid" if ok else "errors"] += 1
        if ok:
            times.setdefault(task, []).append(float(row["median"]))
    return counts, times, per_method


def check_counts(folder: Path, per_method: Counter, report: ShipReport) -> None:
    for method, db in database_counts(folder).items():
        if db["records"] != per_method.get(method, 0):
            report.problems.append(f"{folder.name}/{method}: the database holds {db['records']} records, "
                                   f"the sidecar {per_method.get(method, 0)} lines")


def task_table(work: Path, report: ShipReport, raw: Dict[str, TaskAgreement],
               corrected: Dict[str, TaskAgreement]) -> List[Dict[str, Any]]:
    """One row per task: kind, shapes, networks, weight, records, runtime range, ceiling
    (`raw` and drift-`corrected` agreement of the passes, per task)."""
    first = work / FIRST_PASS
    counts, times, per_method = sidecar_stats(first)
    check_counts(first, per_method, report)
    rows = []
    for task in read_tasks(work):
        key = task["key"]
        t = np.array(times.get(key, []))
        rows.append({"key": key, "kind": task["kind"], "shapes": task.get("shapes", []),
                     "networks": task["networks"], "weight": int(sum(task["networks"].values())),
                     "valid": int(counts.get(key, Counter())["valid"]),
                     "errors": int(counts.get(key, Counter())["errors"]),
                     "min_ms": float(t.min() * 1e3) if t.size else None,
                     "max_ms": float(t.max() * 1e3) if t.size else None,
                     "remeasured": raw[key].records if key in raw else 0,
                     "tau": raw[key].tau if key in raw else None,
                     "tau_corrected": corrected[key].tau if key in corrected else None,
                     "rel_diff": raw[key].median_rel_diff if key in raw else None,
                     "rel_diff_corrected": corrected[key].median_rel_diff if key in corrected else None})
    return rows


# ---------------------------------------------------------------- README
def commands(meta: Dict[str, Any]) -> List[str]:
    """The measuring commands, in order (from meta.json's sessions). No `taskset`: the command
    pins its own builder and measuring cores (`extract.metaschedule.runner`)."""
    out = []
    for s in meta.get("sessions", []):
        argv = [str(a) for a in s.get("argv", [])]
        if argv:
            out.append("python -m extract.ms_measure " + " ".join(argv[1:]))
    return out


def _fmt(v: Optional[float], digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _shapes(shapes: Sequence[Sequence[int]]) -> str:
    return ", ".join("×".join(map(str, s)) or "scalar" for s in shapes)


def table_lines(rows: Sequence[Dict[str, Any]]) -> List[str]:
    head = ["task", "kind", "shapes (output last)", "networks (calls)", "weight", "valid", "errors",
            "runtime ms (min–max)", "re-measured", "τ raw", "τ corrected", "med |Δt|/t"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    shared = shared_readable_names(r["key"] for r in rows)
    for i, r in enumerate(rows, 1):
        parts = r["key"].split(".")
        name = parts[1] + (f" #{parts[4]}" if ".".join(parts[:4] + parts[5:]) in shared else "")
        nets = ", ".join(f"{n} ×{w}" for n, w in sorted(r["networks"].items()))
        span = f"{_fmt(r['min_ms'])}–{_fmt(r['max_ms'])}" if r["min_ms"] is not None else "–"
        rel = "–" if r["rel_diff"] is None else f"{100 * r['rel_diff']:.1f}%"
        lines.append(f"| T{i} `{name}` | {r['kind']} | {_shapes(r['shapes'])} | {nets} | "
                     f"{r['weight']} | {r['valid']} | {r['errors']} | {span} | {r['remeasured']} | "
                     f"{_fmt(r['tau'], 2)} | {_fmt(r['tau_corrected'], 2)} | {rel} |")
    return lines


def totals_lines(rows: Sequence[Dict[str, Any]]) -> List[str]:
    by_kind, by_net = Counter(), Counter()
    for r in rows:
        by_kind[r["kind"]] += r["valid"]
        for n in r["networks"]:
            by_net[n] += r["valid"]
    tasks_kind = Counter(r["kind"] for r in rows)
    measured = sum(1 for r in rows if r["valid"] > 0)
    return [f"**{measured} of the table's {len(rows)} tasks measured, {sum(r['valid'] for r in rows)} valid records, "
            f"{sum(r['errors'] for r in rows)} error records** (kept in the databases as 1e10 s).", "",
            "Valid records per operator kind: " + ", ".join(f"{k} {v} ({tasks_kind[k]} tasks)"
                                                          for k, v in by_kind.most_common()) + ".",
            "Valid records per network (a shared task counts for each): "
            + ", ".join(f"{k} {v}" for k, v in by_net.most_common()) + "."]


def agreement_lines(summary: Dict[str, Any]) -> List[str]:
    raw, cor = summary["agreement_raw"], summary["agreement_corrected"]
    if not raw["tasks"]:
        return ["No second pass yet: no noise ceiling."]
    pct = lambda v: "–" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    return ["| pass 1 vs pass 2 | tasks (with τ) | records | mean τ | median τ | median of tasks' median |Δt|/t |",
            "|---|---|---|---|---|---|",
            *[f"| {name} | {a['tasks']} ({a['tasks_with_tau']}) | {a['records']} | {_fmt(a['mean_tau'])} | "
              f"{_fmt(a['median_tau'])} | {pct(a['median_rel_diff'])} |"
              for name, a in (("raw", raw), ("drift-corrected", cor))],
            "", f"τ needs ≥ 3 re-measured records of a task; runtimes are the median of a record's "
                f"repeats. Goal: mean τ ≥ 0.85, median |Δt|/t ≤ 5%."]


def _network_names(rows: Sequence[Dict[str, Any]]) -> List[str]:
    return sorted({n for r in rows for n in r["networks"]})


def shipped_from(work: Path, out: Path, meta: Dict[str, Any]) -> str:
    """The work folder the dataset came from: `work`, or, when a shipped dataset is compacted
    again in place (after `datasets.rekey`), the last measuring session's work folder."""
    if work.resolve() != out.resolve():
        return str(work)
    argv = [str(a) for a in (meta.get("sessions") or [{}])[-1].get("argv", [])]
    return argv[argv.index("--work-dir") + 1] if "--work-dir" in argv[:-1] else str(work)


def readme(meta: Dict[str, Any], summary: Dict[str, Any], out: Path, work: Path) -> str:
    last = (meta.get("sessions") or [{}])[-1]
    m, protocol = last.get("machine", {}), last.get("measure", {})
    rel = os.path.relpath(out, HERE.parent)
    lines = [f"# Operators of real networks on `{m.get('llvm_cpu', '?')}`, tuned with MetaSchedule", "",
             f"Tasks that `ms.relax_integration.extract_tasks` gives for the networks "
             f"{', '.join(_network_names(summary['tasks']))} (float32; `extract/metaschedule/networks/`), each sampled "
             "half uniformly from its design space (random) and half by evolutionary search with a cost "
             "model, measured one core, single-threaded (`extract/metaschedule/campaign.py`). One CPU model only: "
             "a dataset is never extended on another (`datasets.measure`).", "",
             f"**Machine.** {m.get('cpu_model', '?')}, {m.get('cores', '?')} cores, LLVM cpu "
             f"`{m.get('llvm_cpu', '?')}`, {m.get('platform', '')}; Python {m.get('python')}, TVM {m.get('tvm')}.",
             "", f"**Protocol.** {json.dumps(protocol, sort_keys=True)}", "",
             "**Commands** (in order; the work folder's `meta.json` sessions):", "",
             *[f"    {c}" for c in commands(meta)],
             f"    python -m datasets.ship {shipped_from(work, out, meta)} --out {rel} --overwrite", "",
             f"Load it: `python -m simulator.train --data {rel} --split leave-network-out "
             "--test-network bert` (pass 1's databases; every sample tagged with its networks and operator "
             "kind from `tasks.json.gz`; `--split leave-op-kind-out --test-op-kind softmax`).", "",
             "## Totals", "", *totals_lines(summary["tasks"]), "",
             "## Noise ceiling: raw and drift-corrected agreement", "", *agreement_lines(summary), ""]
    if summary["problems"] or summary["cut_off"]:
        lines += ["## Found while compacting", "", *[f"* {p}" for p in summary["problems"]],
                  *[f"* {f}: {n} cut-off last line left out" for f, n in summary["cut_off"].items()], ""]
    lines += [*pretrained_lines(out, sum(r["valid"] for r in summary["tasks"])), "## Tasks", "", *table_lines(summary["tasks"]), ""]
    return "\n".join(lines)


def pretrained_lines(out: Path, valid_records: int) -> List[str]:
    """The pre-trained checkpoint's paragraph: how it is made, and its scores if present."""
    scores = out / "pretrained" / "gcn.json"
    if not scores.exists():
        return []
    rel = os.path.relpath(out, HERE.parent)
    lines = ["## Pre-trained checkpoint", "",
             "`pretrained/gcn.pt`: a gcn on the node columns of MetaSchedule data's default feature set "
             "(`full`: every column and the derived register-tile columns, `simulator.data.features`) "
             "trained on this dataset (`--split random`: 80% of every task's "
             "records train, 10% validate for early stopping, 10% test) with a ranking loss on batches grouped "
             "by task (`--loss pairwise-hinge`: only the order within a task matters; its predictions are log "
             "runtimes up to a per-task shift), exported without its run state "
             "(`simulator.export`); the default start of the MetaSchedule cost model when this is the "
             f"shipped dataset with the most tasks (`simulator.tune --checkpoint {rel}/pretrained/gcn.pt`; "
             "`datasets.networks.pretrained_path()`). Made by:", "",
             *[f"    {c}" for c in pretrain_commands(out)], ""]
    with open(scores, encoding="utf-8") as f:
        written = json.load(f)
    test = written.get("test", {})
    lines += ["Its test scores (held-out records of every task): " + ", ".join(
        f"{k} {v:.3f}" for k, v in sorted(test.items()) if isinstance(v, float)) + ".", "",
              snapshot_line(written.get("samples") or {}, valid_records), ""]
    return lines


def snapshot_line(samples: Dict[str, int], valid_records: int) -> str:
    """Which snapshot of this growing dataset the checkpoint learned from, so that a stale
    checkpoint is never described as trained on all of it."""
    if not samples:
        return ("Its scores file does not say how many records it was trained on (written before "
                "`simulator.export` recorded that): re-run the two commands above to be sure it saw all "
                f"{valid_records} valid records.")
    seen = sum(samples.values())
    split = ", ".join(f"{n} {part}" for part, n in samples.items())
    if seen >= valid_records:
        return f"It was trained on all {seen} valid records ({split})."
    return (f"**It was trained on an earlier snapshot: {seen} of the {valid_records} valid records "
            f"this dataset has now** ({split}); re-run the two commands above to train on all of them.")


# ---------------------------------------------------------------- the command
def check_same_cpu(work: Path, out: Path) -> str:
    """The work folder's CPU; a NetworkDataError when OUT is (or is named as) another CPU's
    dataset: measurements of two CPU models never share a dataset."""
    cpu = dataset_cpu(work)
    named = named_cpu(out)
    if named is not None and named != cpu:
        raise NetworkDataError(f"{out}: is the dataset of {named}; {work} was measured on "
                               f"{cpu} (its dataset is {dataset_folder(cpu)})")
    if is_dataset(out) and dataset_cpu(out) != cpu:
        raise NetworkDataError(f"{out}: holds measurements of {dataset_cpu(out)}; {work} was measured on {cpu}")
    return cpu


def ship(work: Path, out: Path, overwrite: bool = False) -> ShipReport:
    check_work(work)
    check_same_cpu(work, out)
    report = ShipReport()
    plan = copy_plan(work)
    if not overwrite:
        taken = [str(out / name) for _, name, _ in plan if (out / name).exists()]
        if taken:
            raise FileExistsError(f"{taken[0]}: exists (give --overwrite to replace the dataset's files)")
    for src, name, zipped in plan:
        copy_file(src, out / name, report, zipped)
    with open_text(find_file(work, "meta.json")) as f:  # type: ignore[arg-type]
        meta = json.load(f)
    raw, corrected = agreement(work), agreement(work, corrected=True)
    summary = {"tasks": task_table(work, report, raw, corrected), "agreement_raw": summarize_agreement(raw),
               "agreement_corrected": summarize_agreement(corrected),
               "problems": report.problems, "cut_off": report.cut_off}
    with atomic_write(out / "summary.json") as f:
        json.dump(summary, f, indent=1)
    with atomic_write(out / "README.md") as f:
        f.write(readme(meta, summary, out, work))
    report.written += [str(out / "summary.json"), str(out / "README.md")]
    return report


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m datasets.ship", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work", help="extract.ms_measure's work folder")
    ap.add_argument("--out", type=output_folder, default=None,
                    help="the dataset folder (default: datasets/networks_<cpu the work folder was measured on>)")
    ap.add_argument("--overwrite", action="store_true", help="replace the dataset files already in OUT")
    args = ap.parse_args(argv)
    try:
        args.out = args.out or str(dataset_folder(dataset_cpu(Path(args.work))))
        with output_lock(args.out):
            report = ship(Path(args.work), Path(args.out), args.overwrite)
    except (NetworkDataError, FileExistsError, OutputBusyError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    size = sum(os.path.getsize(f) for f in report.written)
    print(f"wrote {len(report.written)} files, {size / 1e6:.2f} MB, into {args.out}")
    for line in report.problems + [f"{f}: {n} cut-off line left out" for f, n in report.cut_off.items()]:
        print(f"warning: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
