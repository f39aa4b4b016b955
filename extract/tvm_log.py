"""Tuning logs — AutoTVM logs and MetaSchedule databases — → graph samples.

    python -m extract.tvm_log LOG_OR_DIR... --out DIR [--overwrite] [--skip-bad] [--workers N] [--no-per-store]

What a path stands for is the rule of every reader, `extract.inputs.find_inputs`: a file
is read as what its name says; a folder is walked, and every MetaSchedule database
(`database_workload.json` + `database_tuning_record.json`, plain or .gz, as `ms.tune_tir`,
the Relax integration, `simulator.tune` and `extract.ms_measure` write them; a networks
dataset folder: its pass 1's) and every AutoTVM log found is read; whatever else is found
is named with the reason it is not read (`passed over …`, also in report.json). A
database is read by `extract.metaschedule.database`: each record's trace replayed on its workload
and checked against the record, groups named by `extract.tir.workload_key.workload_key`,
failed records counted per group. Both kinds may be given, or found, in one run.

AutoTVM: reads records in both formats (v0.1 of TVM 0.5/0.6, v0.2 of TVM ≥ 0.7), picks the
template by the task name, rebuilds each config's TIR and writes one sample collection
per workload group, `DIR/<group>.npz` (see extract.sample), and `DIR/report.json`.
A group is the workload, and the record's target kind when it is not the template's own
(`C2@cuda` for records of an x86 template measured on a CUDA target), so that configs
measured on different kinds of machine are never ranked together. Records with
error_no ≠ 0 are set aside and counted per group and error kind.

Every record is checked in full before any schedule is built (its numbers, then its task
args as a workload and its entity as a config of the template's space; a MetaSchedule
record's replay against its arguments and decisions). A bad record, a config whose
schedule or lowering raises, a MetaSchedule record whose replay is not the program it
measured, or a log or database damaged part-way (the records before the damage are kept)
stops the run with file:line and the reason, unless `--skip-bad`, which counts and
reports them (file:line of each in report.json).

The output folder: DIR is locked while the command writes to it (a second writer is
refused). A folder that already holds an earlier run's output (report.json or *.npz) is
refused unless `--overwrite`, which replaces that output — its *.npz files and
report.json; nothing else in DIR is touched — once the new samples are extracted (a run
that fails leaves the earlier output as it was). report.json is written last, atomically,
and lists every collection beside it with its sample count and SHA-256;
`datasets.load_collection` checks a folder against it (an interrupted run leaves a
report marked incomplete, which readers refuse). Reports found in input folders (e.g.
with `--out` inside the input folder) are passed over, never read as logs.

`--no-per-store` leaves out MetaSchedule's per-store features (~30% faster), which only
the `xgb` baseline reads; the graph models and `curve-mlp` do not need them.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .autotvm.records import REPORT_NAME, MeasureRecord, RecordFormatError, is_output_report, read_records, target_kind
from .autotvm.templates import UnknownTemplateError, get_template
from .cli import NONNEGATIVE
from .fileio import OutputBusyError, atomic_write, output_lock, sha256_of
from .inputs import find_all, passed_over_lines
from .log_report import LogReport
from .sample import GraphSample, save_samples
from .schedules import TIR_EXTRACTOR, ConfigJob, ExtractionError, JobFailed, extract_many, group_name, one_line
from .tir.graph import EXTRACTOR_VERSION

TOOL = "extract.tvm_log"


def record_job(record: MeasureRecord) -> ConfigJob:
    """A record's template, workload and config, validated in full and parsed (the job's
    name is set later): task args → a workload of the template's kind, entity → a config
    of its space, the target → the group. Raises UnknownTemplateError or ValueError."""
    template = get_template(record.task_name)
    wl = template.check_workload(template.parse_task_args(record.task_args))
    config = template.space(wl).from_entity(record.entity, template.default_values(wl))
    kind = target_kind(record.target)
    group = group_name(wl, template.target_kind)
    if kind != template.target_kind:  # measured on another kind of machine: its own group
        group = f"{group}@{kind}"
    target = record.target if isinstance(record.target, str) else json.dumps(record.target, sort_keys=True)
    return ConfigJob(template.name, wl, config, tuple(record.costs), group=group, source=record.source,
                     target=target)


def read_jobs(paths: Sequence[str], skip_bad: bool = False,
              report: Optional[LogReport] = None) -> Tuple[List[ConfigJob], LogReport]:
    """Successful records of the logs as self-contained extraction jobs (parsed and
    validated here, once); errors and bad records counted (file:line). A bad record
    raises RecordFormatError naming file:line, unless `skip_bad`."""
    report = report or LogReport()
    jobs: List[ConfigJob] = []
    seen: Counter = Counter()
    for path in [f for found in find_all(paths) for f in found.logs]:
        counts = report.per_file[path]
        bad_before = len(report.bad_lines)
        for record in read_records(path, skip_bad=skip_bad, bad=report.bad_lines):
            counts["records"] += 1
            try:
                job = record_job(record)
            except Exception as e:  # noqa: BLE001 - any failure to validate is this record's
                reason = str(e) if isinstance(e, (ValueError, UnknownTemplateError)) else one_line(e)
                if not skip_bad:
                    raise RecordFormatError(f"{record.source}: {reason}") from None
                report.skip(record.source, reason)
                counts["records"] -= 1
                continue
            if not record.ok:
                report.errors[job.group][record.error_no] += 1
                counts["errors"] += 1
                continue
            report.measured[job.group] += 1
            counts["samples"] += 1
            name = f"{job.group}/{job.config.index}"
            seen[name] += 1
            if seen[name] > 1:  # the same config measured again (another log, a resume)
                name += f"#{seen[name]}"
            jobs.append(replace(job, name=name))
        counts["skipped"] += len(report.bad_lines) - bad_before
    return jobs, report


COLLECTION_INPUT = "a sample collection (extracted samples: give it to simulator.train --data)"


def input_files(paths: Sequence[str]) -> List[str]:
    """The files the paths stand for (`extract.inputs.find_inputs`), for reading and for
    a cache key: AutoTVM log files and both files of every MetaSchedule database.
    FileNotFoundError for a path that does not exist; InputError for one that cannot be
    read as given."""
    return [f for found in find_all(paths) for f in found.data_files]


def extract_logs(paths: Sequence[str], skip_bad: bool = False, workers: int = 0,
                 progress: bool = True, per_store: bool = True
                 ) -> Tuple[Dict[str, List[GraphSample]], LogReport]:
    """Read the AutoTVM logs and MetaSchedule databases the paths stand for
    (`extract.inputs.find_inputs`: the one rule of every reader; what is found and not
    read is in `LogReport.passed_over`) and extract every successful record; samples
    grouped by workload group. A config whose extraction raises, or a MetaSchedule record
    whose replay is not the program it measured (`extract.metaschedule.database.replay_mismatch`),
    stops the run naming file:line, or with `skip_bad` is a counted skip."""
    from .metaschedule.database import count_failures, read_databases

    found = find_all(paths)
    report = LogReport(found=found)
    report.passed_over += [item for f in found for item in f.passed_over]
    report.passed_over += [(c, COLLECTION_INPUT) for f in found for c in f.collections]
    logs = [log for f in found for log in f.logs]
    jobs: List[Any] = read_jobs(logs, skip_bad, report)[0] if logs else []
    databases = [db for f in found for db in f.databases]
    if databases:
        jobs += read_databases(databases, skip_bad, report)[0]
    failed: Optional[List[JobFailed]] = [] if skip_bad else None
    samples, report.unknown_nodes = extract_many(jobs, workers, progress, per_store, failed=failed)
    count_failures(jobs, failed or [], report)
    by_group: Dict[str, List[GraphSample]] = defaultdict(list)
    for s in samples:
        by_group[s.group].append(s)
    return dict(by_group), report


# ---------------------------------------------------------------- the output folder
class OutputFolderError(ValueError):
    """An output folder that holds another run's output, or whose collections do not
    match its report.json; the message names the folder and what is wrong."""


def _collection_files(folder: Path) -> List[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.lower().endswith(".npz")
                  and not p.name.startswith("."))


def earlier_output(folder: str) -> List[str]:
    """Names of the files in `folder` an earlier run wrote (report.json, *.npz)."""
    path = Path(folder)
    if not path.is_dir():
        return []
    names = [p.name for p in _collection_files(path)]
    if (path / REPORT_NAME).exists():
        names.insert(0, REPORT_NAME)
    return names


def refuse_earlier_output(folder: str, overwrite: bool) -> None:
    """OutputFolderError if `folder` holds an earlier run's output and not `overwrite`."""
    names = earlier_output(folder)
    if names and not overwrite:
        npz = sum(n.lower().endswith(".npz") for n in names)
        held = ", ".join(([REPORT_NAME] if REPORT_NAME in names else []) + ([f"{npz} .npz"] if npz else []))
        raise OutputFolderError(f"{folder}: holds the output of an earlier run ({held}); pass --overwrite "
                                f"to replace it, or choose an empty folder")


def _write_report(out: Path, body: Dict[str, Any]) -> None:
    with atomic_write(out / REPORT_NAME) as f:
        json.dump({"tool": TOOL, **body}, f, indent=1)


def collection_name(group: str, limit: int = 180) -> str:
    """`<group>.npz`; a group name too long for a file name (a MetaSchedule workload key
    of a fused operator with many arguments) is cut and given a hash of the whole."""
    if len(group) <= limit:
        return f"{group}.npz"
    return f"{group[:limit - 17]}-{hashlib.sha256(group.encode()).hexdigest()[:16]}.npz"


def write_collections(out: str, by_group: Dict[str, List[GraphSample]], report: LogReport,
                      logs: Sequence[str]) -> None:
    """`OUT/<group>.npz` per workload group, then `OUT/report.json` listing them.

    The earlier output in OUT (*.npz, report.json) is replaced: a report marked
    incomplete first (a reader then refuses the folder until this finishes), earlier
    collections not written again removed, the collections written (each atomically),
    and the complete report last."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    _write_report(folder, {"complete": False, "files": {}})
    names = {group: collection_name(group) for group in by_group}
    for old in _collection_files(folder):
        if old.name not in names.values():
            old.unlink()
    files: Dict[str, Dict[str, Any]] = {}
    for group, samples in sorted(by_group.items()):
        path = folder / names[group]
        save_samples(str(path), samples, extractor=TIR_EXTRACTOR,
                     info={"logs": [os.path.abspath(p) for p in logs]})
        files[path.name] = {"samples": len(samples), "sha256": sha256_of(path)}
    _write_report(folder, {
        "complete": True, "extractor": EXTRACTOR_VERSION, "files": files,
        "samples": dict(report.measured), "errors": {g: dict(c) for g, c in report.errors.items()},
        "bad_lines": report.bad_lines, "unknown_nodes": report.unknown_nodes,
        "logs": [os.path.abspath(p) for p in logs],
        "per_log": {os.path.abspath(f): dict(c) for f, c in report.per_file.items()},
        "passed_over": report.passed_over})


def check_output(folder: str, names: Optional[Sequence[str]] = None) -> Optional[Dict[str, Any]]:
    """Check the collections of an extract.tvm_log output folder against its report.json:
    the run finished, and the collections `names` (default: every *.npz in the folder)
    are the ones it lists, unchanged. Returns the report (None when the folder has no
    report of this tool, or one written before reports listed their files); raises
    OutputFolderError naming the folder and the mismatch."""
    path = Path(folder)
    report_path = path / REPORT_NAME
    if not report_path.exists() or not is_output_report(str(report_path)):
        return None
    with open(report_path, encoding="utf-8") as f:
        report = json.load(f)
    if report.get("complete") is False:
        raise OutputFolderError(f"{report_path}: the extract.tvm_log run writing this folder did not "
                                f"finish; re-run it with --overwrite")
    listed = report.get("files")
    if not isinstance(listed, dict):
        return report  # an older report: nothing to check against
    present = [p.name for p in _collection_files(path)] if names is None else list(names)
    extra = sorted(set(present) - set(listed))
    if extra:
        raise OutputFolderError(f"{path}: {', '.join(extra)} not listed in its {REPORT_NAME} (left by "
                                f"another run?); re-extract with --overwrite or remove them")
    missing = sorted(set(listed) - set(present)) if names is None else []
    if missing:
        raise OutputFolderError(f"{path}: {', '.join(missing)} listed in its {REPORT_NAME} but missing")
    for name in present:
        if sha256_of(path / name) != listed[name].get("sha256"):
            raise OutputFolderError(f"{path / name}: differs from the file its {REPORT_NAME} lists "
                                    f"(changed after extraction)")
    return report


# ---------------------------------------------------------------- command line
def _output_folder(text: str) -> str:
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} exists and is not a folder")
    return text


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m extract.tvm_log", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="AutoTVM log files or folders of them (.json/.jsonl/.log[.gz]), "
                    "MetaSchedule database folders (or folders of them)")
    ap.add_argument("--out", required=True, type=_output_folder, help="folder for the sample collections")
    ap.add_argument("--overwrite", action="store_true",
                    help="replace an earlier run's output in --out (its *.npz and report.json)")
    ap.add_argument("--skip-bad", action="store_true",
                    help="count and report bad records (and configs that fail to extract) instead of stopping")
    ap.add_argument("--workers", type=NONNEGATIVE, default=0, help="extraction processes (0: one per core)")
    ap.add_argument("--no-per-store", dest="per_store", action="store_false",
                    help="leave out MetaSchedule's per-store features (only the xgb baseline reads them)")
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        input_files(args.logs)  # a missing log is reported before the output folder is made
        with output_lock(args.out):  # one writer per folder, known before extracting
            refuse_earlier_output(args.out, args.overwrite)
            by_group, report = extract_logs(args.logs, args.skip_bad, args.workers, per_store=args.per_store)
            write_collections(args.out, by_group, report, args.logs)
    except (RecordFormatError, FileNotFoundError, OutputBusyError, OutputFolderError, ExtractionError,
            NotADirectoryError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for line in report.path_lines() + passed_over_lines(report.passed_over):
        print(line)
    print(report.table())
    print(f"wrote {sum(len(s) for s in by_group.values())} samples in {len(by_group)} "
          f"collections to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
