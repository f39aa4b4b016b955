"""What reading tuning logs and databases found: `LogReport`, filled by `extract.tvm_log`
(AutoTVM logs) and `extract.metaschedule.database` (MetaSchedule databases)."""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from .autotvm.records import ERROR_NAMES
from .inputs import Found, database_files
from .tir.workload_key import shared_readable_names


@dataclass
class LogReport:
    """What reading the logs found, per workload group and per log file."""

    measured: Counter = field(default_factory=Counter)
    errors: Dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    bad_lines: List[Tuple[str, int, str]] = field(default_factory=list)
    unknown_nodes: Dict[str, int] = field(default_factory=dict)
    # per log file: records (lines that are records), samples, errors (set aside), skipped
    per_file: Dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    # files and folders found in the inputs and not read, with the reason (extract.inputs)
    passed_over: List[Tuple[str, str]] = field(default_factory=list)
    found: List[Found] = field(default_factory=list)  # what each given path stands for

    def skip(self, source: str, reason: str) -> None:
        """Count a bad record (or a failed extraction) read at `source` ("file:line")."""
        file, _, line = source.rpartition(":")
        self.bad_lines.append((file, int(line), reason))

    def table(self) -> str:
        groups = sorted(set(self.measured) | set(self.errors))
        w = max([40, *map(len, groups)])
        rows = [f"{'workload':<{w}} {'samples':>8} {'errors set aside':>17}"]
        for g in groups:
            errs = self.errors.get(g, Counter())
            detail = ", ".join(f"{n} {ERROR_NAMES.get(k, k)}" for k, n in sorted(errs.items()))
            rows.append(f"{g:<{w}} {self.measured[g]:>8} {sum(errs.values()):>17}"
                        + (f"  ({detail})" if detail else ""))
        rows.append(f"{'total':<{w}} {sum(self.measured.values()):>8} "
                    f"{sum(sum(c.values()) for c in self.errors.values()):>17}")
        if self.bad_lines:
            rows.append(f"{len(self.bad_lines)} bad records skipped, first: "
                        f"{self.bad_lines[0][0]}:{self.bad_lines[0][1]}: {self.bad_lines[0][2]}")
        if self.unknown_nodes:
            rows.append(f"TIR node kinds mapped to UNK: {self.unknown_nodes}")
        for name, digests in shared_readable_names(groups).items():
            rows.append(f"different computations share the name {name}: told apart by their digests "
                        f"{', '.join(digests)} (separate groups)")
        return "\n".join(rows)

    def path_lines(self) -> List[str]:
        """One line per given path: what was read from it (its databases and logs)."""
        lines = []
        for found in self.found:
            parts = []
            records = [database_files(db)[1] for db in found.databases]
            for files, noun in ((records, "database"), (found.logs, "log")):
                if files:
                    total = sum((self.per_file.get(f, Counter()) for f in files), Counter())
                    parts.append(describe_counts(total, len(files), noun))
            text = "; ".join(parts) or ("nothing new" if found.already else "no tuning logs or databases")
            lines.append(f"{found.path}: {text}" + (f" ({found.already} already read from an earlier path)"
                                                     if found.already else ""))
        return lines


def describe_counts(counts: Dict[str, int], files: int, noun: str = "log") -> str:
    """`2 logs: 9 records → 8 samples, 1 error set aside, 0 skipped` (`noun`: log, database)."""
    return (f"{files} {noun}{'s' * (files != 1)}: {counts.get('records', 0)} records → "
            f"{counts.get('samples', 0)} samples, {counts.get('errors', 0)} errors set aside, "
            f"{counts.get('skipped', 0)} skipped")
