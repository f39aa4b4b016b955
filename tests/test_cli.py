"""extract.cli: argument types with ranges, and progress that floods no log."""
import argparse
import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extract.cli import Float, Int, QuietProgress, progress


@given(st.integers(-1000, 1000))
def test_int_accepts_exactly_its_range(value):
    parse = Int(0, 100)
    if 0 <= value <= 100:
        assert parse(str(value)) == value
    else:
        with pytest.raises(argparse.ArgumentTypeError, match=f"{value} is not an integer in \\[0, 100\\]"):
            parse(str(value))


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "0", "-1", "x"])
def test_float_refuses_non_finite_and_out_of_range(text):
    with pytest.raises(argparse.ArgumentTypeError):
        Float(0, lo_open=True)(text)
    assert Float(0, lo_open=True)("0.5") == 0.5


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_bars_on_terminals_lines_elsewhere():
    from tqdm import tqdm

    assert isinstance(progress(range(3), desc="x", file=Tty()), tqdm)
    stream = io.StringIO()
    bar = progress(range(1000), desc="measure", unit="cfg", file=stream)
    assert isinstance(bar, QuietProgress)
    with bar:
        for i in bar:
            bar.set_postfix(errors=i // 100)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "measure: 1000 cfg to do"
    assert lines[1:4] == [f"measure: {n}/1000 cfg ({n // 10}%), errors={(n - 1) // 100}" for n in (250, 500, 750)]
    assert lines[4].startswith("measure: 1000/1000 cfg done in ") and lines[4].endswith("errors=9")
    assert len(lines) == 5
    quiet = io.StringIO()
    for _ in progress(range(10), file=quiet, enabled=False):
        pass
    assert quiet.getvalue() == ""
