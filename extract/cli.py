"""Small helpers shared by the command-line tools: argument types with ranges, progress.

* `int_in(lo, hi)` / `float_in(lo, hi, ...)`: argparse `type=` callables that refuse a
  value outside its range (or a NaN/inf float) at parse time, so a bad argument fails
  before any work starts, with argparse's usual one-line message and exit status 2.
* `progress(...)`: a tqdm bar when the stream it writes to (stderr) is a terminal; else
  a few summary lines (start, each quarter, end) instead of one line per update, so
  logs and CI output are not flooded.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from typing import IO, Any, Iterable, Iterator, Optional


def int_in(lo: Optional[int] = None, hi: Optional[int] = None, what: str = "") -> Any:
    """An argparse type: an integer in [lo, hi] (either bound may be None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"{value} is not {_range_text(lo, hi)}"
                                             + (f" ({what})" if what else ""))
        return value

    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


def float_in(lo: Optional[float] = None, hi: Optional[float] = None, lo_open: bool = False,
             what: str = "") -> Any:
    """An argparse type: a finite float in [lo, hi] ((lo, hi] with `lo_open`)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        low_bad = lo is not None and (value <= lo if lo_open else value < lo)
        if not math.isfinite(value) or low_bad or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"{text} is not {_range_text(lo, hi, lo_open)}"
                                             + (f" ({what})" if what else ""))
        return value

    parse.__name__ = "number"
    return parse


def _range_text(lo, hi, lo_open: bool = False) -> str:
    if lo is not None and hi is not None:
        return f"in {'(' if lo_open else '['}{lo}, {hi}]"
    if lo is not None:
        if lo == 0 and not lo_open:
            return "≥ 0"
        return f"> {lo}" if lo_open else f"≥ {lo}"
    if hi is not None:
        return f"≤ {hi}"
    return "a finite number"


class QuietProgress:
    """tqdm's interface (iteration, `update`, `set_postfix`, `close`, context manager) as
    a few lines: one at the start, one at each quarter, one at the end."""

    MARKS = (0.25, 0.5, 0.75)

    def __init__(self, iterable: Optional[Iterable] = None, total: Optional[int] = None,
                 desc: str = "", unit: str = "it", file: Optional[IO[str]] = None) -> None:
        self.iterable = iterable
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
        self.desc, self.unit, self.file = desc or "progress", unit, file
        self.n, self.postfix, self.closed = 0, "", False
        self.start = time.monotonic()
        self.next_mark = 0
        self._line(f"{self.total if self.total is not None else '?'} {unit} to do")

    def _line(self, text: str) -> None:
        print(f"{self.desc}: {text}", file=self.file or sys.stderr, flush=True)

    def __iter__(self) -> Iterator:
        for item in self.iterable or ():
            yield item
            self.update()

    def update(self, n: int = 1) -> None:
        self.n += n
        if not self.total:
            return
        while self.next_mark < len(self.MARKS) and self.n >= self.MARKS[self.next_mark] * self.total:
            self.next_mark += 1
            if self.n < self.total:
                self._line(f"{self.n}/{self.total} {self.unit} ({100 * self.n // self.total}%)"
                           + self.postfix)

    def set_postfix(self, **values: Any) -> None:
        self.postfix = ", " + ", ".join(f"{k}={v}" for k, v in values.items()) if values else ""

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._line(f"{self.n}/{self.total if self.total is not None else self.n} {self.unit} done "
                       f"in {time.monotonic() - self.start:.1f} s" + self.postfix)

    def __enter__(self) -> "QuietProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def progress(iterable: Optional[Iterable] = None, total: Optional[int] = None, desc: str = "",
             unit: str = "it", enabled: bool = True, file: Optional[IO[str]] = None):
    """A progress display over `iterable` (or `total` updates): a tqdm bar on a terminal,
    `QuietProgress` lines when `file` (default stderr) is not one, nothing if not `enabled`."""
    from tqdm import tqdm

    stream = file or sys.stderr
    if not enabled:
        return tqdm(iterable, total=total, disable=True)
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return tqdm(iterable, total=total, desc=desc or None, unit=unit, file=stream)
    return QuietProgress(iterable, total, desc, unit, stream)
