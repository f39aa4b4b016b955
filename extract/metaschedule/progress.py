"""One progress line for a long measurement: tasks done, records, errors, rate, ETA.

On a terminal the line is redrawn in place after every batch; into a file or a pipe (a
run started with nohup, the usual case for hours of measuring) a full line is written at
most every `every_s` seconds, so the log stays readable. The ETA counts only what this
session measured (a resumed run's earlier records do not inflate the rate).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import IO, Optional


@dataclass
class Counts:
    tasks_done: int = 0
    tasks_total: int = 0
    records: int = 0        # in the databases (all sessions)
    valid: int = 0
    errors: int = 0
    planned: int = 0        # records the plan asks for in total


def _duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


class Progress:
    def __init__(self, counts: Counts, stream: Optional[IO] = None, every_s: float = 60.0):
        self.counts = counts
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every_s = every_s
        self.start = time.monotonic()
        self.session_records = 0
        self._last_print = -float("inf")
        self._warned: dict = {}  # warning kind → (last time shown, suppressed since)

    def add(self, records: int, errors: int) -> None:
        c = self.counts
        c.records += records
        c.errors += errors
        c.valid += records - errors
        self.session_records += records

    def line(self, current: str = "") -> str:
        c = self.counts
        elapsed = time.monotonic() - self.start
        rate = elapsed / self.session_records if self.session_records else 0.0
        left = max(c.planned - c.records, 0)
        eta = _duration(rate * left) if rate else "?"
        return (f"{time.strftime('%H:%M:%S')} tasks {c.tasks_done}/{c.tasks_total} | records "
                f"{c.records}/{c.planned} (valid {c.valid}, errors {c.errors}) | "
                f"{rate:.2f} s/record | ETA {eta}" + (f" | {current}" if current else ""))

    def show(self, current: str = "", force: bool = False) -> None:
        now = time.monotonic()
        if self.tty:
            self.stream.write("\r\033[K" + self.line(current)[:200])
        elif force or now - self._last_print >= self.every_s:
            self.stream.write(self.line(current) + "\n")
        else:
            return
        self._last_print = now
        self.stream.flush()

    def message(self, text: str) -> None:
        """A line of its own (a warning), not overwritten by the next progress line."""
        self.stream.write(("\n" if self.tty else "") + text + "\n")
        self.stream.flush()

    def warning(self, text: str, every_s: float = 300.0) -> None:
        """A message, shown at most once per `every_s` per kind (its text up to the first
        colon); the next one shown says how many were held back."""
        kind = text.split(":", 1)[0]
        last, held = self._warned.get(kind, (-float("inf"), 0))
        now = time.monotonic()
        if now - last < every_s:
            self._warned[kind] = (last, held + 1)
            return
        self._warned[kind] = (now, 0)
        self.message(f"warning: {text}" + (f" ({held} more like it since the last one)" if held else ""))
