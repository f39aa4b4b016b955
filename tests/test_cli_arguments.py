"""docs/RELIABILITY.md, class 6: every numeric flag of simulator.train / evaluate / predict and of the
benchmarks is checked by argparse at parse time — an out-of-range value exits 2 with
argparse's one-line message before any data is read or any file is written."""
import argparse
import importlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extract.cli import Float, Int, Range, ranged_options
from simulator import evaluate, predict, train

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def benchmark_parser(name):
    return importlib.import_module(f"benchmarks.{name}").build_parser


# every CLI with numeric flags, and the positional arguments it needs to get as far as them
PARSERS = {
    "simulator.train": (train.build_parser, []),
    "simulator.evaluate": (evaluate.build_parser, ["RUN"]),
    "simulator.predict": (predict.build_parser, ["RUN"]),
    "benchmarks.all": (benchmark_parser("all"), []),
    "benchmarks.accuracy": (benchmark_parser("accuracy"), []),
    "benchmarks.sweep": (benchmark_parser("sweep"), []),
    "benchmarks.speed": (benchmark_parser("speed"), []),
    "benchmarks.tuning": (benchmark_parser("tuning"), []),
    "benchmarks.spaces": (benchmark_parser("spaces"), ["C3"]),
    "benchmarks.large_graph": (benchmark_parser("large_graph"), []),
    "benchmarks.extraction": (benchmark_parser("extraction"), []),
    "extract.ms_measure": (importlib.import_module("extract.metaschedule.campaign").build_parser, ["--work-dir", "W"]),
    "benchmarks.scaling": (benchmark_parser("scaling"), ["per-graph"]),
}
FLAGS = sorted((cli, flag) for cli, (build, _) in PARSERS.items() for flag in ranged_options(build()))


def test_every_numeric_flag_has_a_range():
    """No numeric flag is a bare int/float: each has a Range type."""
    for cli, (build, _) in PARSERS.items():
        parser = build()
        for action in parser._actions:  # read-only
            assert action.type not in (int, float), f"{cli} {action.option_strings}: unchecked {action.type}"
    assert len(FLAGS) > 60


def out_of_range(kind: Range):
    """Strings naming values outside `kind`: below / above its bounds, non-numbers, and
    (for integers) fractions; NaN and infinities for floats."""
    options = [st.sampled_from(["abc", "", "1e", "x1", "0x10"])]
    if kind.lo is not None:
        below = st.integers(max_value=int(kind.lo) - 1) if kind.integer else \
            st.floats(max_value=kind.lo, exclude_max=not kind.lo_open, allow_nan=False, allow_infinity=False)
        options.append(below.map(repr))
    if kind.hi is not None:
        above = st.integers(min_value=int(kind.hi) + 1) if kind.integer else \
            st.floats(min_value=kind.hi, exclude_min=not kind.hi_open, allow_nan=False, allow_infinity=False)
        options.append(above.map(repr))
    if kind.integer:
        options.append(st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != int(x)).map(repr))
    else:
        options.append(st.sampled_from(["nan", "inf", "-inf", "NaN", "Infinity"]))
    return st.one_of(*options)


def refused(capsys, build, args, flag):
    with pytest.raises(SystemExit) as exit_info:
        build().parse_args(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and f": error: argument {flag}" in err[-1], err
    return err[-1]


@settings(max_examples=300, **SETTINGS)
@given(data=st.data())
def test_any_out_of_range_value_of_any_numeric_flag_exits_2_at_parse_time(capsys, data):
    cli, flag = data.draw(st.sampled_from(FLAGS), label="flag")
    build, positional = PARSERS[cli]
    kind = ranged_options(build())[flag]
    value = data.draw(out_of_range(kind), label="value")
    # --flag=VALUE: argparse would read a value like -1e-5 as an unknown option (also exit 2)
    line = refused(capsys, build, positional + [f"{flag}={value}"], flag)
    assert len(line) < 300


@settings(max_examples=100, **SETTINGS)
@given(data=st.data())
def test_in_range_values_are_taken(data):
    cli, flag = data.draw(st.sampled_from(FLAGS), label="flag")
    build, positional = PARSERS[cli]
    kind = ranged_options(build())[flag]
    lo = kind.lo if kind.lo is not None else -10 ** 6
    hi = kind.hi if kind.hi is not None else 10 ** 6
    if kind.integer:
        value = data.draw(st.integers(int(lo) + (kind.lo_open and 1), int(hi) - (kind.hi_open and 1)))
    else:
        value = data.draw(st.floats(lo, hi, exclude_min=kind.lo_open, exclude_max=kind.hi_open))
    assert kind(repr(value)) == value


# the cases docs/RELIABILITY.md names, each failing before any work
NAMED_CASES = [
    ("simulator.train", ["--patience", "0"]), ("simulator.train", ["--threads", "0"]),
    ("simulator.train", ["--width", "0"]), ("simulator.train", ["--lr", "nan"]),
    ("simulator.train", ["--eval-batch-size", "0"]), ("simulator.train", ["--depth", "-1"]),
    ("simulator.train", ["--val-fraction", "-0.5"]), ("simulator.train", ["--epochs", "0"]),
    ("simulator.train", ["--batch-size", "0"]), ("simulator.train", ["--dropout", "1.5"]),
    ("simulator.train", ["--temperature", "0"]), ("simulator.train", ["--huber-delta", "-1"]),
    ("simulator.train", ["--train-fraction", "0"]), ("simulator.train", ["--seed", "-1"]),
    ("simulator.train", ["--keep-hops", "-2"]), ("simulator.train", ["--lr", "1e38"]),
    ("simulator.predict", ["RUN", "--top-k", "-3"]), ("simulator.predict", ["RUN", "--max-configs", "-5"]),
    ("simulator.predict", ["RUN", "--workers", "-1"]), ("simulator.evaluate", ["RUN", "--threads", "0"]),
    ("benchmarks.spaces", ["C3", "--workers", "-1"]), ("benchmarks.all", ["--parallel", "0"]),
    ("benchmarks.sweep", ["--fractions", "0"]), ("benchmarks.all", ["--sweep-fractions", "1.5"]),
    ("benchmarks.tuning", ["--timeout", "nan"]),
]


@pytest.mark.parametrize("cli,args", NAMED_CASES, ids=[" ".join(a) for _, a in NAMED_CASES])
def test_named_bad_values_are_refused(capsys, cli, args):
    flag = next(a for a in args if a.startswith("--"))
    line = refused(capsys, PARSERS[cli][0], args, flag)
    assert args[args.index(flag) + 1] in line


def test_train_reads_no_data_for_a_bad_flag(tmp_path, capsys, monkeypatch):
    """Through the CLI: exit 2 before any data is opened or any folder made."""
    import simulator.data.in_memory as samples_source

    def no_data(*a, **k):
        raise AssertionError("data was read")
    monkeypatch.setattr(samples_source, "samples_and_info", no_data)
    out = tmp_path / "run"
    for bad in (["--eval-batch-size", "0"], ["--depth", "-1"], ["--val-fraction", "-0.5"], ["--lr", "nan"]):
        with pytest.raises(SystemExit) as e:
            train.main(["--out", str(out)] + bad)
        assert e.value.code == 2
        assert f"argument {bad[0]}" in capsys.readouterr().err
    assert not out.exists()


def test_model_names_in_benchmarks_are_checked(capsys):
    for cli, args in (("benchmarks.accuracy", ["--models", "gcn", "gnn9000"]),
                      ("benchmarks.speed", ["--speed-models", "nope"]),
                      ("benchmarks.tuning", ["--model", "nope"])):
        line = refused(capsys, PARSERS[cli][0], args, args[0])
        assert "unknown model" in line and "known:" in line


def test_accuracy_train_args_are_checked_before_any_run(tmp_path, capsys):
    from benchmarks import accuracy
    with pytest.raises(SystemExit) as e:
        accuracy.main(["--results", str(tmp_path / "r"), "--runs", str(tmp_path / "runs"),
                       "--train-args", "--lr", "nan"])
    assert e.value.code == 2 and "argument --lr" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("cli,args", [
    ("simulator.train", ["--out", "{file}"]), ("benchmarks.all", ["--results", "{file}"]),
    ("benchmarks.all", ["--report", "{dir}"]), ("simulator.predict", ["RUN", "--kaggle-csv", "{dir}"]),
    ("benchmarks.spaces", ["C3", "--out", "{file}"]), ("benchmarks.accuracy", ["--runs", "{file}"]),
])
def test_an_output_path_of_the_wrong_kind_is_refused_at_parse_time(tmp_path, capsys, cli, args):
    """--out naming an existing file crashed after the work was done; now argparse refuses it."""
    (tmp_path / "a_file").write_text("x")
    args = [a.format(file=tmp_path / "a_file", dir=tmp_path) for a in args]
    flag = next(a for a in args if a.startswith("--"))
    line = refused(capsys, PARSERS[cli][0], args, flag)
    assert "a_file: exists and is not a folder" in line or "is a folder" in line


def test_range_types_by_hand():
    assert Int(1)("3") == 3
    with pytest.raises(argparse.ArgumentTypeError, match="is not an integer ≥ 1"):
        Int(1)("0")
    with pytest.raises(argparse.ArgumentTypeError, match="not a finite number in"):
        Float(0, 1, hi_open=True)("1")
    assert Float(0, 1, hi_open=True)("0") == 0.0
    with pytest.raises(argparse.ArgumentTypeError):
        Float(0, lo_open=True)("inf")


def test_layer_options_are_range_checked_by_the_layer(tmp_path, capsys):
    for model, key, value in (("gat", "heads", "0"), ("gat", "heads", "-2"), ("cheb", "k", "0")):
        assert train.main(["--model", model, "--layer-option", f"{key}={value}", "--out", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"error: propagation layer {model!r}: option {key}={value!r} is not an integer ≥ 1"], err
    assert not (tmp_path / "r").exists()
