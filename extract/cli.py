"""Small helpers shared by the command-line tools: argument types with ranges, progress.

* `Int(lo, hi)` / `Float(lo, hi, lo_open=…, hi_open=…)` and the common ranges (`COUNT`,
  `SEED`, `FRACTION`, …): argparse `type=` values that refuse a value outside their range
  (or a NaN/inf float) at parse time, so a bad argument fails before any work starts,
  with argparse's usual one-line message and exit status 2; their bounds are public
  attributes, so tests can draw out-of-range values for every flag (`ranged_options`);
* `output_folder` / `output_file`: output paths refused at parse time when they name the
  wrong kind of thing.
* `progress(...)`: a tqdm bar when the stream it writes to (stderr) is a terminal; else
  a few summary lines (start, each quarter, end) instead of one line per update, so
  logs and CI output are not flooded.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import IO, Any, Dict, Iterable, Iterator, Optional, Union


Number = Union[int, float]


class Range:
    """An argparse type: a number in [lo, hi] (open ends with `lo_open` / `hi_open`;
    None: unbounded). Floats must be finite."""

    integer = False

    def __init__(self, lo: Optional[Number] = None, hi: Optional[Number] = None,
                 lo_open: bool = False, hi_open: bool = False):
        self.lo, self.hi, self.lo_open, self.hi_open = lo, hi, lo_open, hi_open
        self.__name__ = self.describe()  # argparse names the type with it

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a finite number"
        if self.lo is not None and self.hi is not None:
            left, right = ("(" if self.lo_open else "["), (")" if self.hi_open else "]")
            return f"{kind} in {left}{self.lo}, {self.hi}{right}"
        if self.lo is not None:
            return f"{kind} {'>' if self.lo_open else '≥'} {self.lo}"
        if self.hi is not None:
            return f"{kind} {'<' if self.hi_open else '≤'} {self.hi}"
        return kind

    def parse(self, text: str) -> Number:
        raise NotImplementedError

    def contains(self, value: Number) -> bool:
        if self.lo is not None and (value < self.lo or (self.lo_open and value == self.lo)):
            return False
        if self.hi is not None and (value > self.hi or (self.hi_open and value == self.hi)):
            return False
        return True

    def __call__(self, text: str) -> Number:
        try:
            value = self.parse(str(text).strip())
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"{text!r} is not {self.describe()}") from None
        if not self.contains(value):
            raise argparse.ArgumentTypeError(f"{text} is not {self.describe()}")
        return value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.lo!r}, {self.hi!r}, lo_open={self.lo_open}, hi_open={self.hi_open})"


class Int(Range):
    """An integer in range (`Int(1)`: 1, 2, …)."""

    integer = True

    def parse(self, text: str) -> int:
        return int(text, 10)


class Float(Range):
    """A finite float in range (`nan`, `inf` are refused)."""

    def parse(self, text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(text)
        return value


# the ranges most flags use
COUNT = Int(1)                       # epochs, batch sizes, widths, threads, top-k …
NONNEGATIVE = Int(0)                 # 0 meaning "all" or "none"
SEED = Int(0, 2 ** 32 - 1)           # numpy's seeds
POSITIVE = Float(0, lo_open=True)    # learning rates, temperatures, deltas
NONNEGATIVE_FLOAT = Float(0)
FRACTION = Float(0, 1, lo_open=True)  # a share of something, (0, 1]
SHARE = Float(0, 1, hi_open=True)     # a share that may be 0 but must leave something, [0, 1)
PROBABILITY = Float(0, 1, hi_open=True)
LEARNING_RATE = Float(0, 100, lo_open=True)  # beyond, float32 weights overflow within a step


def output_folder(text: str) -> str:
    """A folder to write into: refused at parse time if it names an existing file."""
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text}: exists and is not a folder")
    return text


def output_file(text: str) -> str:
    """A file to write: refused at parse time if it names a folder, or a path under a file."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text}: is a folder, not a file")
    parent = os.path.dirname(os.path.abspath(text))
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent) if os.path.dirname(parent) != parent else ""
    if parent and not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"{text}: {parent} is a file, not a folder")
    return text


def ranged_options(parser: argparse.ArgumentParser) -> Dict[str, Range]:
    """The parser's flags whose type is a `Range`, by their first option string (read-only
    introspection for tests and documentation)."""
    out: Dict[str, Range] = {}
    for action in parser._actions:  # noqa: SLF001  (argparse offers no public listing)
        if isinstance(action.type, Range) and action.option_strings:
            out[action.option_strings[0]] = action.type
    return out


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
