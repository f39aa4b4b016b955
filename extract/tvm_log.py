"""AutoTVM tuning logs → graph samples.

    python -m extract.tvm_log LOG_OR_DIR... --out DIR [--skip-bad] [--workers N] [--no-per-store]

Reads records in both formats (v0.1 of TVM 0.5/0.6, v0.2 of TVM ≥ 0.7), picks the
template by the task name, rebuilds each config's TIR and writes one sample collection
per workload, `DIR/<workload>.npz` (see extract.sample). Records with error_no ≠ 0
are set aside and counted per workload and error kind. A malformed line stops the run
with file:line and the reason, unless --skip-bad, which counts and reports them.
`--no-per-store` leaves out MetaSchedule's per-store features (~30% faster), which only
the `xgb` baseline reads; the graph models and `curve-mlp` do not need them.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Sequence, Tuple

from .fileio import OutputBusyError, atomic_write, output_lock
from .records import ERROR_NAMES, MeasureRecord, RecordFormatError, log_files, read_records
from .sample import GraphSample, save_samples
from .templates import UnknownTemplateError, get_template
from .tir_graph import EXTRACTOR_VERSION
from .tvm_graph import TIR_EXTRACTOR, ConfigJob, extract_many, group_name


@dataclass
class LogReport:
    """What reading the logs found, per workload group."""

    measured: Counter = field(default_factory=Counter)
    errors: Dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    bad_lines: List[Tuple[str, int, str]] = field(default_factory=list)
    unknown_nodes: Dict[str, int] = field(default_factory=dict)

    def table(self) -> str:
        groups = sorted(set(self.measured) | set(self.errors))
        rows = [f"{'workload':<40} {'samples':>8} {'errors set aside':>17}"]
        for g in groups:
            errs = self.errors.get(g, Counter())
            detail = ", ".join(f"{n} {ERROR_NAMES.get(k, k)}" for k, n in sorted(errs.items()))
            rows.append(f"{g:<40} {self.measured[g]:>8} {sum(errs.values()):>17}"
                        + (f"  ({detail})" if detail else ""))
        rows.append(f"{'total':<40} {sum(self.measured.values()):>8} "
                    f"{sum(sum(c.values()) for c in self.errors.values()):>17}")
        if self.bad_lines:
            rows.append(f"{len(self.bad_lines)} malformed lines skipped, first: "
                        f"{self.bad_lines[0][0]}:{self.bad_lines[0][1]}: {self.bad_lines[0][2]}")
        if self.unknown_nodes:
            rows.append(f"TIR node kinds mapped to UNK: {self.unknown_nodes}")
        return "\n".join(rows)


def record_job(record: MeasureRecord) -> ConfigJob:
    """A record's template, workload and config, parsed (the job's name is set later);
    an unknown template or a config outside its space raise (UnknownTemplateError, ValueError)."""
    template = get_template(record.task_name)
    wl = template.parse_task_args(record.task_args)
    config = template.space(wl).from_entity(record.entity, template.default_values(wl))
    return ConfigJob(template.name, wl, config, tuple(record.costs))


def read_jobs(paths: Sequence[str], skip_bad: bool = False) -> Tuple[List[ConfigJob], LogReport]:
    """Successful records of the logs as self-contained extraction jobs (parsed here, once);
    errors and bad lines counted."""
    report = LogReport()
    jobs: List[ConfigJob] = []
    seen: Counter = Counter()
    for path in log_files(list(paths)):
        for record in read_records(path, skip_bad=skip_bad, bad=report.bad_lines):
            try:
                job = record_job(record)
            except (UnknownTemplateError, ValueError) as e:
                if not skip_bad:
                    raise RecordFormatError(f"{record.source}: {e}") from None
                file, _, line = record.source.rpartition(":")
                report.bad_lines.append((file, int(line), str(e)))
                continue
            group = group_name(job.workload, get_template(job.template).target_kind)
            if not record.ok:
                report.errors[group][record.error_no] += 1
                continue
            report.measured[group] += 1
            name = f"{group}/{job.config.index}"
            seen[name] += 1
            if seen[name] > 1:  # the same config measured again (another log, a resume)
                name += f"#{seen[name]}"
            jobs.append(replace(job, name=name))
    return jobs, report


def extract_logs(paths: Sequence[str], skip_bad: bool = False, workers: int = 0,
                 progress: bool = True, per_store: bool = True
                 ) -> Tuple[Dict[str, List[GraphSample]], LogReport]:
    """Read logs and extract every successful record; samples grouped by workload."""
    jobs, report = read_jobs(paths, skip_bad)
    samples, report.unknown_nodes = extract_many(jobs, workers, progress, per_store)
    by_group: Dict[str, List[GraphSample]] = defaultdict(list)
    for s in samples:
        by_group[s.group].append(s)
    return dict(by_group), report


def write_collections(out: str, by_group: Dict[str, List[GraphSample]], report: LogReport,
                      logs: Sequence[str]) -> None:
    """`OUT/<group>.npz` per workload group, and `OUT/report.json`."""
    for group, samples in sorted(by_group.items()):
        save_samples(os.path.join(out, f"{group}.npz"), samples, extractor=TIR_EXTRACTOR,
                     info={"logs": [os.path.abspath(p) for p in logs]})
    with atomic_write(os.path.join(out, "report.json")) as f:
        json.dump({"extractor": EXTRACTOR_VERSION, "samples": dict(report.measured),
                   "errors": {g: dict(c) for g, c in report.errors.items()},
                   "bad_lines": report.bad_lines, "unknown_nodes": report.unknown_nodes}, f, indent=1)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m extract.tvm_log", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="AutoTVM log files or folders of them (.json/.jsonl/.log[.gz])")
    ap.add_argument("--out", required=True, help="folder for the sample collections")
    ap.add_argument("--skip-bad", action="store_true", help="count and report malformed lines instead of stopping")
    ap.add_argument("--workers", type=int, default=0, help="extraction processes (0: one per core)")
    ap.add_argument("--no-per-store", dest="per_store", action="store_false",
                    help="leave out MetaSchedule's per-store features (only the xgb baseline reads them)")
    args = ap.parse_args(argv)
    try:
        log_files(args.logs)  # a missing log is reported before the output folder is made
        with output_lock(args.out):  # one writer per folder, known before extracting
            by_group, report = extract_logs(args.logs, args.skip_bad, args.workers, per_store=args.per_store)
            write_collections(args.out, by_group, report, args.logs)
    except (RecordFormatError, FileNotFoundError, OutputBusyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report.table())
    print(f"wrote {sum(len(s) for s in by_group.values())} samples in {len(by_group)} "
          f"collections to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
