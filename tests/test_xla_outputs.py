"""docs/RELIABILITY.md, classes 2, 3 and 9, for the XLA converters' command lines
(`python -m extract.hlo … --out DIR`, `python -m extract.tpugraphs convert … --out DIR`,
extract/xla/npz_output.py): one writer per output folder, no stale npz files from an earlier
run mixed in (refused unless --overwrite, which replaces them), no input silently
overwriting another's file, and progress as a bar on a terminal, a few lines otherwise;
npz inputs read once each, whatever the case of their suffix."""
from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest

from extract.xla import convert_hlo as hlo, proto, convert_tpugraphs as tpugraphs

from tpugraphs_raw import REPO

ENV = dict(os.environ, PYTHONPATH=str(REPO))


def hlo_module(name: str, size: int) -> bytes:
    """A fused module (a layout graph and one tile graph) named `name`."""
    module = proto.HloModuleProto(name=name, entry_computation_name="main", entry_computation_id=2)
    fused = module.computations.add(name="fused", id=1, root_id=11)
    fused.instructions.add(name="fp", opcode="parameter", id=10).shape.dimensions.append(size)
    fused.instructions.add(name="neg", opcode="negate", id=11, operand_ids=[10])
    main = module.computations.add(name="main", id=2, root_id=21)
    main.instructions.add(name="p", opcode="parameter", id=20).shape.dimensions.append(size)
    main.instructions.add(name="fusion", opcode="fusion", id=21, operand_ids=[20],
                          called_computation_ids=[1])
    return module.SerializeToString()


def raw_layout(runtimes: List[int]) -> bytes:
    record = proto.ModuleTuningData()
    computation = record.module.computations.add(name="main", id=1, root_id=2)
    computation.instructions.add(name="p", opcode="parameter", id=1)
    computation.instructions.add(name="n", opcode="negate", id=2, operand_ids=[1])
    for index, runtime in enumerate(runtimes):
        run = record.runs.add(is_default=index == 0)
        run.profile.compute_time_ns = runtime
        run.module_config.layout_config.nodes.add().tensors.add().dims.extend([0])
    record.config_index_to_node.append(1)
    return record.SerializeToString()


def make_inputs(folder: Path, command: str, count: int) -> List[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"input{i}.pb"
        path.write_bytes(hlo_module(f"m{i}", i + 2) if command == "hlo"
                         else raw_layout([100 + i, 200 + i, 300]))
        paths.append(path)
    return paths


def run_main(command: str, args: List[str]) -> int:
    return hlo.main(args) if command == "hlo" else tpugraphs.main(["convert"] + args)


def npz_files(folder: Path) -> Dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.npz"))}


@pytest.mark.parametrize("command", ["hlo", "convert"])
def test_a_folder_holding_npz_files_is_refused_unless_overwrite(tmp_path, capsys, command):
    inputs = make_inputs(tmp_path / "in", command, 3)
    out = tmp_path / "out"
    assert run_main(command, [*map(str, inputs), "--out", str(out)]) == 0
    first = npz_files(out)
    assert len(first) == (6 if command == "hlo" else 3)
    (out / "notes.txt").write_text("kept")
    capsys.readouterr()
    # Again into the same folder: refused before anything is written.
    assert run_main(command, [str(inputs[0]), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {out}: already holds {len(first)} npz files from another run" in err
    assert "--overwrite" in err and err.count("\n") == 1
    assert npz_files(out) == first
    # --overwrite: the folder then holds this run's npz files and nothing stale.
    assert run_main(command, [str(inputs[1]), "--out", str(out), "--overwrite"]) == 0
    printed = capsys.readouterr().out
    assert f"removed {len(first)} npz files of an earlier run" in printed
    after = npz_files(out)
    assert after and set(after) < set(first)
    assert all(after[name] == first[name] for name in after)
    assert all("input1" in name for name in after)
    assert (out / "notes.txt").read_text() == "kept"


@pytest.mark.parametrize("command", ["hlo", "convert"])
def test_a_second_writer_into_the_same_folder_gets_a_clear_error(tmp_path, capsys, command):
    inputs = make_inputs(tmp_path / "in", command, 1)
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from extract.fileio import output_lock\n"
         f"with output_lock({str(out)!r}):\n    print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert run_main(command, [str(inputs[0]), "--out", str(out)]) == 2
        assert f"{out}: another process is writing to this folder" in capsys.readouterr().err
        assert not npz_files(out)
    finally:
        holder.communicate("", timeout=60)
    assert run_main(command, [str(inputs[0]), "--out", str(out)]) == 0


@pytest.mark.parametrize("command", ["hlo", "convert"])
def test_two_inputs_writing_the_same_file_are_an_error_not_an_overwrite(tmp_path, capsys, command):
    [first] = make_inputs(tmp_path / "a", command, 1)
    second = tmp_path / "b" / first.name
    second.parent.mkdir()
    second.write_bytes(hlo_module("m0", 9) if command == "hlo" else raw_layout([1000, 2000]))
    out = tmp_path / "out"
    assert run_main(command, [str(first), str(second), "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert f"error: {second}: would overwrite {out}" in captured.err
    assert f"written from {first} earlier in this run" in captured.err
    assert "1 of 2 inputs; 1 failed" in captured.out
    alone = tmp_path / "alone"
    assert run_main(command, [str(first), "--out", str(alone)]) == 0
    assert npz_files(out) == npz_files(alone)  # the first input's files, untouched


@pytest.mark.parametrize("command", ["hlo", "convert"])
def test_out_naming_a_file_fails_before_any_work(tmp_path, capsys, command):
    inputs = make_inputs(tmp_path / "in", command, 1)
    target = tmp_path / "file.txt"
    target.write_text("x")
    assert run_main(command, [str(inputs[0]), "--out", str(target)]) == 2
    assert f"--out {target}: exists and is not a folder" in capsys.readouterr().err
    assert target.read_text() == "x"


def cli(command: str) -> List[str]:
    return ([sys.executable, "-m", "extract.hlo"] if command == "hlo"
            else [sys.executable, "-m", "extract.tpugraphs", "convert"])


@pytest.mark.parametrize("command", ["hlo", "convert"])
def test_progress_off_a_terminal_is_one_line_per_input(tmp_path, command):
    inputs = make_inputs(tmp_path / "in", command, 6)
    result = subprocess.run(cli(command) + [*map(str, inputs), "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 7 and lines[-1].endswith("from 6 of 6 inputs")
    assert all(line.startswith(f"{path} → ") for line, path in zip(lines, inputs))
    assert "\r" not in result.stdout + result.stderr and "%|" not in result.stderr
    verbose = subprocess.run(cli(command) + [*map(str, inputs), "--out", str(tmp_path / "v"), "-v"],
                             capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120)
    assert verbose.returncode == 0
    files = len(npz_files(tmp_path / "v"))
    assert len(verbose.stdout.splitlines()) == files + 1


def test_progress_on_a_terminal_is_a_bar(tmp_path):
    inputs = make_inputs(tmp_path / "in", "convert", 4)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    process = subprocess.Popen(cli("convert") + [*map(str, inputs), "--out", str(tmp_path / "out")],
                               stdout=subprocess.PIPE, stderr=slave, text=True, env=ENV, cwd=REPO)
    stdout, _ = process.communicate(timeout=120)
    # Read what reached the terminal while its slave side is still open here (Linux
    # drops a pty's unread output once every slave descriptor is closed).
    os.set_blocking(master, False)
    terminal = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        terminal += chunk
    os.close(slave)
    os.close(master)
    assert process.returncode == 0
    assert b"convert" in terminal and b"file" in terminal and b"%" in terminal  # a tqdm bar
    assert len(stdout.splitlines()) == 5  # the lines themselves are the same
    assert len(npz_files(tmp_path / "out")) == 4 and np.all([p.exists() for p in inputs])


# ---------------------------------------------------------------------------- inputs

def test_npz_inputs_are_read_once_whatever_the_suffix_case(tmp_path):
    from datasets import tpugraphs_collections as tg
    from extract.xla import npz_format
    from extract.xla.convert_tuning import read_tuning_file
    raw = tmp_path / "g.pb"
    raw.write_bytes(raw_layout([100, 200]))
    [graph] = read_tuning_file(raw)
    folder = npz_format.collection_dir(tmp_path / "root", "layout:xla:random", "valid")
    graph.write(folder / "a.npz")
    graph.write(folder / "B.NPZ")
    assert [p.name for p in npz_format.list_files(tmp_path / "root", "layout:xla:random",
                                                     "valid")] == ["B.NPZ", "a.npz"]
    assert [f.name for f in tg.open_paths([folder])] == ["B", "a"]
    for twice in ([folder / "a.npz", folder / "a.npz"], [folder, folder / "B.NPZ"]):
        with pytest.raises(tg.TpuGraphsError, match=r"given twice .*read twice"):
            tg.open_paths(twice)
    with pytest.raises(ValueError, match=r"a\.npz: at most -5 configs"):
        npz_format.TpuGraphsFile(folder / "a.npz").sample_configs(-5)
