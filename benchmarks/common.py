"""What the benchmark scripts share: training runs as subprocesses (cached, in parallel),
reading their metrics, mean ± std tables, the machine description; checked flag values
(`extract.cli`), one writer per output folder (`locked_outputs`), children that end with the
benchmark (`dies_with_parent`) and the CLI wrapper that turns a user error into one line and
exit code 2 (`cli`)."""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import csv
import ctypes
import functools
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from extract.cli import (COUNT, FRACTION, NONNEGATIVE, POSITIVE, SEED, output_file,  # noqa: F401
                                output_folder)
from extract.fileio import atomic_write, sha256_of
from extract.provenance import ROOT
from simulator.distributed import DEVICES
from simulator.engine import locked_output
from simulator.registry import SimulatorError

from .kept_runs import command_key, keep, place_free_root, read_kept

MODELS = ["gcn", "sage", "gat", "cheb", "mlp", "curve-mlp", "xgb"]
METRICS = ["kendall_tau", "top1_slowdown", "top5_slowdown", "l1_log", "mape"]
METRIC_LABELS = {"kendall_tau": "Kendall τ", "top1_slowdown": "top-1 slowdown",
                 "top5_slowdown": "top-5 slowdown", "l1_log": "L1 (log)", "mape": "MAPE",
                 "opa": "OPA", "top10_slowdown": "top-10 slowdown", "top5_recall": "top-5 recall"}
PERCENT = {"top1_slowdown", "top5_slowdown", "top10_slowdown", "mape", "top1_ape", "top5_recall"}
DEFAULT_RESULTS = os.path.join("docs", "results")
DEFAULT_RUNS = os.path.join("runs", "bench")


def model_name(text: str) -> str:
    """An argparse type: a `simulator.train --model` name."""
    from simulator.models.costmodel import model_names
    if text not in model_names():
        raise argparse.ArgumentTypeError(f"unknown model {text!r} (known: {', '.join(model_names())})")
    return text


def loss_name(text: str) -> str:
    """An argparse type: a `simulator.train --loss` name."""
    from simulator.losses import LOSSES
    if text not in LOSSES:
        raise argparse.ArgumentTypeError(f"unknown loss {text!r} (known: {', '.join(LOSSES.names())})")
    return text


@contextlib.contextmanager
def locked_outputs(*folders: Optional[str]) -> Iterator[None]:
    """Hold each output folder (created if needed) for this process: a second benchmark
    writing into one of them gets a one-line error naming it (`SimulatorError`)."""
    with contextlib.ExitStack() as stack:
        for folder in dict.fromkeys(f for f in folders if f):
            stack.enter_context(locked_output(folder))
        yield


def add_run_options(ap: argparse.ArgumentParser) -> None:
    """A training benchmark's outputs: its runs and results folders, runs at a time."""
    ap.add_argument("--runs", type=output_folder, default=DEFAULT_RUNS)
    ap.add_argument("--results", type=output_folder, default=DEFAULT_RESULTS)
    ap.add_argument("--parallel", type=COUNT, default=1, help="training runs at a time (1 thread each)")
    ap.add_argument("--device", choices=DEVICES, default="cpu",
                    help="train on this device (cuda: runs share the GPU; a finished run is reused on either)")


def run_and_report(args, run: Callable[[Any], Dict[str, Any]],
                   report_section: Callable[[Dict[str, Any]], List[str]]) -> int:
    """Run a benchmark with its output folders held, and print its RESULTS.md section."""
    with locked_outputs(args.results, args.runs):
        res = run(args)
    print("\n".join(report_section(res)))
    return 0


def cli(main: Callable[..., int]) -> Callable[..., int]:
    """A benchmark's main: a `SimulatorError` (busy folder, bad data) is one line on stderr
    and exit code 2, as in the simulator's CLIs."""
    @functools.wraps(main)
    def wrapper(argv: Optional[Sequence[str]] = None) -> int:
        try:
            return main(argv)
        except SimulatorError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    return wrapper


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def not_todays_gnn(done: str, why: str, again: str) -> str:
    """The report line on results of a gnn that is not today's (`why`:
    `simulator.metaschedule.resume.other_gnn_defaults`)."""
    return f"**Not today's gnn:** {done} under other gnn defaults than today's ({why}); {again}"


def shown_command(command: str) -> str:
    """A recorded command line as a report shows it: a path inside the repository relative
    to it, one outside it (a scratch folder of the machine that ran it) as `…/NAME`."""
    def shown(path: str) -> str:
        if not os.path.isabs(path):
            return path
        inside = os.path.relpath(path, ROOT)
        return "…/" + os.path.basename(os.path.normpath(path)) if inside.startswith("..") else inside

    words = []
    for word in command.split(" "):
        option, equals, value = word.partition("=")
        words.append(f"{option}={shown(value)}" if equals and option.startswith("--") else shown(word))
    return " ".join(words)


# ---------------------------------------------------------------- training runs
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def dies_with_parent() -> Optional[Callable[[], None]]:
    """A `preexec_fn` for a benchmark's long children (training, tuning, measuring): the child
    gets SIGTERM when the thread that started it ends, so a killed benchmark leaves nothing
    running behind it — measuring beside the next run, or holding the folder that run resumes.
    Linux only (None elsewhere); start the child from a thread that waits for it."""
    if not sys.platform.startswith("linux"):
        return None
    return functools.partial(_end_with, os.getpid(), ctypes.CDLL(None, use_errno=True).prctl)


def _end_with(parent: int, prctl: Callable[..., int]) -> None:
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)


def train_argv(model: str, seed: int, out: str, data: Sequence[str], epochs: Optional[int] = None,
               threads: int = 1, extra: Sequence[str] = ()) -> List[str]:
    argv = ["--model", model, "--seed", str(seed), "--out", out, "--threads", str(threads),
            "--data", *data]
    if epochs is not None:
        argv += ["--epochs", str(epochs)]
    return argv + list(extra)


DATA_NAME = "bench_data.json"   # beside a run: the digest of the data it trained on, where given


def _run_done(out: str, argv: Sequence[str], data: Optional[str] = None) -> bool:
    """A finished run with the same command line (recorded beside it), trained on the same
    data where the benchmark gives its digest, is reused."""
    path = os.path.join(out, "metrics.json")
    cmd = os.path.join(out, "bench_argv.json")
    if not (os.path.exists(path) and os.path.exists(cmd)) or _data_of(out) != data:
        return False
    with open(cmd, encoding="utf-8") as f:
        if json.load(f) != list(argv):
            return False
    with open(path, encoding="utf-8") as f:
        return _same_config(json.load(f).get("config", {}), argv)


def _same_config(recorded: Dict[str, Any], argv: Sequence[str]) -> bool:
    """Whether a finished run's recorded config is what ARGV resolves to today: a
    default changed since (e.g. the data's feature set) makes it stale. An option added
    since it ran counts as its plain default (what the run did), so a recipe that now
    resolves it otherwise (e.g. a model's own default) makes the run stale too."""
    from simulator.config import TrainConfig
    from simulator.train import resolve_argv

    try:
        config = resolve_argv(list(argv))[2].to_dict()
    except (SimulatorError, SystemExit):  # the rerun reports it
        return False
    plain = TrainConfig().to_dict()
    return all(_placed(key, recorded.get(key, plain[key])) == _placed(key, value) for key, value in config.items())


def _placed(key: str, value: Any) -> Any:
    """A config value as a run's identity sees it: the data root by its folder's name
    (`kept_runs.command_key`)."""
    return place_free_root(value) if key == "data_root" and value else value


def files_digest(root: str, files: Iterable[str]) -> str:
    """SHA-256 over `files` (each one's path under `root` and its bytes' SHA-256): the
    digest of what a benchmark's runs train on, for `run_training`'s `data`. Data measured
    again, topped up or grown gives another digest."""
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: os.path.relpath(p, root).split(os.sep)):
        digest.update(os.path.relpath(path, root).encode("utf-8") + b"\0")
        digest.update(bytes.fromhex(sha256_of(path)))
    return digest.hexdigest()


def _data_of(out: str) -> Optional[str]:
    """The data digest recorded beside a run (`DATA_NAME`), None without one."""
    path = os.path.join(out, DATA_NAME)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("digest")


def _resumable(out: str, argv: Sequence[str]) -> bool:
    """Whether OUT holds the checkpoint of an unfinished epoch-trained run of ARGV's config
    (a killed benchmark continues it rather than training it again from the start)."""
    from simulator.checkpoint import CHECKPOINT_NAME, load_checkpoint

    path = os.path.join(out, CHECKPOINT_NAME)
    if not os.path.exists(path) or os.path.exists(os.path.join(out, "metrics.json")):
        return False

    try:
        state = load_checkpoint(path)
    except SimulatorError:  # a damaged checkpoint: the run starts over
        return False
    return "epoch" in state and _same_config(state["config"], argv)


def run_training(argv: Sequence[str], out: str, device: str = "cpu", kept: Optional[str] = None,
                 data: Optional[str] = None) -> Dict[str, Any]:
    """`python -m simulator.train ARGV` in a subprocess (output to OUT/train.log) on
    `device` (not part of the run's identity: a run trained on a GPU is reused on a CPU);
    returns its metrics.json plus wall seconds. Reused if OUT already holds the same
    finished run, or, with `kept`, if that folder keeps it (`benchmarks.kept_runs`: for
    benchmarks that read only the metrics; every finished run is kept there too); an
    unfinished one of the same config is resumed from its checkpoint (the seconds are
    then those of the last part). `data`: a digest of the files the run trains on, for a
    benchmark whose data can change under the same command line (a collection measured
    again); a run recorded with another digest, or none, is trained again."""
    if _run_done(out, argv, data):
        with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
            metrics = json.load(f)
        if kept:    # also a run trained before runs were kept
            keep(kept, out, argv, metrics, seconds_of(out), data)
        metrics.setdefault("bench", {})["reused"] = True
        metrics["bench"]["seconds"] = seconds_of(out)
        return metrics
    earlier = read_kept(kept, out, argv) if kept else None
    if (earlier and command_key(earlier["argv"]) == command_key(argv) and earlier.get("data") == data
            and _same_config(earlier["metrics"].get("config", {}), argv)):
        earlier["metrics"].setdefault("bench", {}).update(reused=True, kept=True, seconds=earlier["seconds"])
        return earlier["metrics"]
    how = "--resume" if _data_of(out) == data and _resumable(out, argv) else "--overwrite"
    _start_folder(out, data)
    start = time.perf_counter()
    env = dict(os.environ, OMP_NUM_THREADS="1", TQDM_DISABLE="1")
    with atomic_write(os.path.join(out, "train.log"), "w") as logf:  # whole, or the old one
        proc = subprocess.run([sys.executable, "-m", "simulator.train", *argv, how, "--device", device],
                              stdout=logf, stderr=subprocess.STDOUT, env=env, preexec_fn=dies_with_parent())
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        with open(os.path.join(out, "train.log"), encoding="utf-8") as f:
            tail = f.read()[-1500:]
        raise SimulatorError(f"training in {out} failed (exit {proc.returncode}); the end of its "
                             f"train.log:\n{tail}")
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    write_json(os.path.join(out, "bench_argv.json"), list(argv))
    write_json(os.path.join(out, "bench_seconds.json"), {"seconds": seconds, "device": device})
    metrics.setdefault("bench", {})["seconds"] = seconds
    if kept:
        keep(kept, out, argv, metrics, seconds, data)
    return metrics


def _start_folder(out: str, data: Optional[str]) -> None:
    """OUT without the records of the run being replaced, and with the digest of the data
    the new one trains on (before it starts: a killed run resumes only on the same data)."""
    os.makedirs(out, exist_ok=True)
    for stale in ("bench_argv.json", "bench_seconds.json", DATA_NAME):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(out, stale))
    if data is not None:
        write_json(os.path.join(out, DATA_NAME), {"digest": data})


def run_many(jobs: Sequence[Dict[str, Any]], parallel: int = 2, device: str = "cpu",
             kept: Optional[str] = None) -> List[Dict[str, Any]]:
    """Run training jobs ({"argv", "out", ...}, optionally "data": the data's digest)
    `parallel` at a time on `device`; results in job order, each job dict with "metrics"
    added. `kept`, "data": see `run_training`."""
    results: List[Optional[Dict[str, Any]]] = [None] * len(jobs)
    start = time.perf_counter()
    with cf.ThreadPoolExecutor(max(1, parallel)) as pool:
        futures = {pool.submit(run_training, j["argv"], j["out"], device, kept, j.get("data")): i
                   for i, j in enumerate(jobs)}
        for n, fut in enumerate(cf.as_completed(futures), 1):
            i = futures[fut]
            results[i] = dict(jobs[i], metrics=fut.result())
            tau = results[i]["metrics"].get("test", {}).get("kendall_tau", {}).get("mean")
            log(f"{n}/{len(jobs)} {jobs[i]['out']}  test τ {tau if tau is None else round(tau, 4)}  "
                f"({time.perf_counter() - start:.0f} s so far)")
    return results  # type: ignore[return-value]


def seconds_of(out: str) -> Optional[float]:
    path = os.path.join(out, "bench_seconds.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)["seconds"]


# ---------------------------------------------------------------- tables
def mean_std(values: Iterable[Optional[float]]) -> tuple:
    """(mean, std, n) of the finite values; (None, None, 0) when there are none (JSON null,
    shown as "–" by `fmt`, skipped by `best_by`)."""
    v = np.array([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size == 0:
        return None, None, 0
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0, int(v.size)


def fmt(value: float, metric: str, std: Optional[float] = None) -> str:
    if value is None or not np.isfinite(value):
        return "–"
    if metric in PERCENT:
        s = f"{100 * value:.1f}%"
        return s if std is None else f"{100 * value:.1f} ± {100 * std:.1f}%"
    s = f"{value:.3f}"
    return s if std is None else f"{value:.3f} ± {std:.3f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str = "") -> str:
    align = align or ("l" + "r" * (len(header) - 1))
    sep = ["---:" if a == "r" else ":---" for a in align]
    lines = ["| " + " | ".join(str(h) for h in header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def write_csv(path: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Atomically; floats to 6 significant digits, None as an empty cell."""
    with atomic_write(path, "w") as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in rows:
            w.writerow(["" if v is None else (f"{v:.6g}" if isinstance(v, float) else v) for v in r])


def read_csv(path: str) -> List[Dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def load_json(results: str, name: str) -> Optional[Any]:
    """The JSON file `name` of the results folder `results`, or None when it is absent."""
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_json(path: str, obj: Any) -> None:
    """Atomically, indented, numpy values as plain ones, a non-finite number as null (JSON
    has no NaN; a reader of the file must see "no value", never a number)."""
    with atomic_write(path, "w") as f:
        json.dump(finite_or_null(obj), f, indent=1, allow_nan=False)
        f.write("\n")


def finite_or_null(obj: Any) -> Any:
    """`obj` with numpy values as plain ones and every NaN/±inf replaced by None."""
    if isinstance(obj, dict):
        return {k: finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_null(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return finite_or_null(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def best_by(names: Iterable[str], value: Callable[[str], Optional[float]]) -> Optional[str]:
    """The name with the highest finite `value`, or None when no name has one."""
    scored = [(v, n) for n in names for v in [value(n)] if v is not None and np.isfinite(v)]
    return max(scored)[1] if scored else None


def natural_key(name: str):
    import re
    return [int(s) if s.isdigit() else s for s in re.split(r"(\d+)", str(name))]


# ---------------------------------------------------------------- machine
def machine() -> Dict[str, Any]:
    info: Dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                            "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import psutil
        info["memory_gib"] = round(psutil.virtual_memory().total / 2 ** 30, 1)
    except ImportError:
        pass
    for mod in ("torch", "dgl", "tvm", "xgboost", "numpy"):
        try:
            if mod == "dgl":  # dgl only through the project's shim (GraphBolt on this torch)
                from simulator.dgl_compat import dgl
                info[mod] = dgl.__version__
                continue
            info[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - a missing optional package is just not listed
            pass
    return info


def cpu_counters() -> Tuple[float, float]:
    """(CPU seconds the machine's cores have been busy since boot — user, nice, system, irq,
    softirq; not steal, and guest time is already in user —, CPU seconds of this process
    and of its children it has waited for). Over a span, the growth of the first minus the
    second is what other processes took of the machine meanwhile (`others_cpu_s`)."""
    import resource

    import psutil

    t = psutil.cpu_times()
    busy = t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
    mine = sum(getattr(resource.getrusage(who), field) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for field in ("ru_utime", "ru_stime"))
    return busy, mine


def others_cpu_s(since: Tuple[float, float]) -> float:
    """CPU seconds other processes (not this one, nor its children waited for since) used on
    the machine since `since` (`cpu_counters()`); a child still running counts as other."""
    busy, mine = cpu_counters()
    return max(0.0, (busy - since[0]) - (mine - since[1]))


def busy_measuring() -> bool:
    """True while a dataset measurement (`extract.measure`) runs on this machine."""
    try:
        out = subprocess.run(["pgrep", "-f", "extract.measure"], capture_output=True, text=True)
    except FileNotFoundError:
        return False
    return any(int(p) != os.getpid() for p in out.stdout.split())


def peak_rss_mib() -> float:
    """This process's peak resident memory, MiB: VmHWM, the high-water mark of its own address
    space. (`ru_maxrss` is not used: after fork + exec it also holds the parent's RSS at the
    fork, so every child of a big benchmark process would report the parent's size.)"""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:  # not Linux
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
