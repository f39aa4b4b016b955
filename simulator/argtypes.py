"""Command-line value types that check their range at parse time.

Every numeric flag of `simulator.train`, `evaluate`, `predict` and `benchmarks.*` is
declared with one of these as its argparse `type=`, so a value out of range is refused
by argparse itself — before any data is read — with its usual one-line message and
exit code 2::

    python -m simulator.train: error: argument --patience: 0 is not an integer ≥ 1

    add("--patience", type=Int(1), ...)                   # 1, 2, …
    add("--dropout", type=Float(0, 1, hi_open=True), ...)   # 0 ≤ x < 1, finite
    add("--out", type=output_folder, ...)                 # not an existing file

`Int` and `Float` are values (their bounds are public attributes, `lo`, `hi`,
`lo_open`, `hi_open`), so tests can draw out-of-range values for every flag of a
parser (`ranged_options`).
"""
from __future__ import annotations

import argparse
import math
import os
from typing import Dict, Optional, Union

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
