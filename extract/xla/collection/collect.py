"""The collector: programs → plan → measured configs → TpuGraphs layout npz files.

Folder `ROOT` (one collector at a time holds it, extract.fileio.output_lock):

    ROOT/npz/layout/xla/{random,default}/{train,valid,test}/<program>.npz
    ROOT/measurements/<program>.plan.json   the plan (extract/xla/collection/plan.py)
    ROOT/measurements/<program>.jsonl       one row per timing: config, pass, every repeat
    ROOT/reference.jsonl                    the drift kernel's timings
    ROOT/runs.jsonl                         each run's command, settings and machine
    ROOT/compile_cache/                     with --compile-core: JAX's cache during a batch's compiles

so `python -m simulator.train --data tpugraphs:layout:xla:random --data-root ROOT`
trains on it through the TpuGraphs source. A program's configs are compiled and then
timed in the same rounds, a batch at a time (one pass, up to `MeasureSettings.batch`
configs, as many as the process's memory maps hold: runner.room_for_more); a
config's runtime in the npz is that of its first measurement (extract/xla/collection/measure.py);
a config XLA refuses is a row with an `error` in the jsonl and is left out of the npz.
Resuming: the plan is reused (its program must be unchanged, and so must the plan's
options) and only configs without a row are measured — a killed batch is measured
again whole; the npz files are rewritten after each program. Markers before (`started`)
and after (`compiled`) each config's compile and first run journal which config was in
hand when the process died, so a config that crashed or hung the collector twice is
recorded as failed instead of being tried forever.
"""
from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from extract.fileio import atomic_write
from extract.metaschedule.jsonl import JsonlLog, read_jsonl
from extract.metaschedule.progress import Counts, Progress
from extract.xla.collection.compile_ahead import CACHE_FOLDER, CompileAhead
from extract.xla.collection.layouts import parse_config_key
from extract.xla.collection.measure import MeasureSettings, Reference
from extract.xla.collection.plan import SEARCHES, PlanSettings, make_plan, remeasured, same_program, space_of
from extract.xla.collection.programs import Program
from extract.xla.collection.runner import ProgramRunner

SPLITS = ("train", "valid", "test")
MAX_STARTS = 2
MARKERS = {"started", "compiled"}  # journal rows around each config's compile and first run
SHIPPED_SUFFIX = ".jsonl.gz"       # a shipped collection's timings (ship.py), not a journal


@dataclass(frozen=True)
class Job:
    program: Program
    split: str = "train"


def npz_path(root: Path, search: str, split: str, name: str) -> Path:
    return root / "npz" / "layout" / "xla" / search / split / f"{name}.npz"


def machine() -> Dict[str, Any]:
    """The CPU the collection is measured on (one CPU model per collection): its name and,
    since a VM may name two generations alike ("AMD EPYC"), its family and model numbers."""
    info: Dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    import jax
    family_model = f"{info['cpu family']}/{info['model']}" if "cpu family" in info and "model" in info else None
    return {"cpu": info.get("model name") or platform.processor(), "cpu_family_model": family_model,
            "host": platform.node(), "cores": os.cpu_count(), "jax": jax.__version__,
            "python": platform.python_version()}


def _plan(job: Job, runner: ProgramRunner, path: Path, plan: PlanSettings,
          settings: MeasureSettings, say: Callable[[str], None]) -> Dict[str, Any]:
    """The saved plan if it is this program's with these options, else a new one."""
    if path.exists():
        saved = json.loads(path.read_text())
        if not same_program(saved, runner):
            raise ValueError(f"{path}: made for another version of program {job.program.name} "
                             "(its HLO changed); measure into a new ROOT")
        if saved["plan_settings"] != asdict(plan) or saved["split"] != job.split:
            raise ValueError(f"{path}: made with other options ({saved['plan_settings']}, split "
                             f"{saved['split']}); resume with those or measure into a new ROOT")
        return saved
    made = make_plan(runner, {"program": job.program.name, "family": job.program.family,
                              "split": job.split}, plan, settings, say)
    with atomic_write(path, "w") as f:
        json.dump(made, f, indent=1)
    return made


def measurements_file(folder: Path, program: str) -> Path:
    """A program's timings in a measurements folder: the collector's journal, or the shipped
    gzip of its timing rows (extract/xla/collection/ship.py)."""
    journal = folder / f"{program}.jsonl"
    shipped = folder / f"{program}{SHIPPED_SUFFIX}"
    return shipped if shipped.exists() and not journal.exists() else journal


def check_root(root: Path) -> None:
    """A ValueError for a shipped collection: its timings are compacted, not a journal to
    resume or ship again."""
    if any((root / "measurements").glob(f"*{SHIPPED_SUFFIX}")):
        raise ValueError(f"{root}: a shipped collection (measurements/*{SHIPPED_SUFFIX}), not a collector's "
                         f"root; copy its plans into a new ROOT to measure them again (docs/xla_collection.md)")


def results(rows: List[Dict]) -> List[Dict]:
    """The journal's timing rows (without the markers around each compile)."""
    return [r for r in rows if not MARKERS & r.keys()]


def to_measure(saved: Dict[str, Any], rows: List[Dict], remeasure_fraction: float) -> List[tuple]:
    """(config key, pass) still to measure: every distinct config once, then the
    remeasured share a second time."""
    keys = list(dict.fromkeys(k for search in SEARCHES for k in saved["configs"][search]))
    done = {(r["config"], r["pass"]) for r in results(rows)}
    again = remeasured(keys, remeasure_fraction, saved["plan_settings"]["seed"])
    return ([(k, 1) for k in keys if (k, 1) not in done]
            + [(k, 2) for k in again if (k, 2) not in done])


def _given_up(rows: List[Dict], key: str, round_: int) -> bool:
    """Whether a config was started MAX_STARTS times and neither compiled nor timed (it
    crashes the process, or hangs until killed): then it is recorded as failed, not tried
    again. A run killed while it times a batch blames none of its configs."""
    mine = [r for r in rows if r["config"] == key and r["pass"] == round_]
    return (sum("started" in r for r in mine) - sum("compiled" in r for r in mine) >= MAX_STARTS
            and not any("runtime_s" in r or "error" in r for r in mine))


def passes(todo: List[tuple]) -> List[List[tuple]]:
    """The (config, pass) to measure grouped by pass: batches never mix passes, so that a
    config's second measurement is never timed in the rounds of its first."""
    return [[t for t in todo if t[1] == round_] for round_ in sorted({r for _, r in todo})]


def _measure_batch(runner: ProgramRunner, batch: List[tuple], rows: List[Dict], log: JsonlLog,
                   settings: MeasureSettings, seed: str, show: Callable[[str], None],
                   ahead: Optional[CompileAhead] = None) -> Tuple[List[tuple], int]:
    """Compile what of a batch the process can hold (journal markers around each; `ahead`:
    with a helper on another core), time it in the same rounds and journal a row per
    config: which were measured, how many failed."""
    given_up = [item for item in batch if _given_up(rows, *item)]
    todo = [item for item in batch if item not in given_up]

    def journal(i: int, event: str) -> None:
        show(f"compiling {i + 1}/{len(todo)}")
        log.append({"config": todo[i][0], "pass": todo[i][1], event: time.time()})

    with ahead.batch([k for k, _ in todo]) if ahead else contextlib.nullcontext():
        prepared = runner.prepare([parse_config_key(k) for k, _ in todo], journal)
    todo = todo[:len(prepared)]
    show(f"timing {len(todo)} configs in {settings.repeats} rounds")
    timed = runner.time_all(prepared, settings, seed)
    timed += [{"error": f"no result in {MAX_STARTS} tries (it crashed or hung the collector)"}] * len(given_up)
    for (key, round_), result in zip(todo + given_up, timed):
        log.append({"config": key, "pass": round_, "time": time.time(), **result})
    return todo + given_up, sum("error" in r for r in timed)


def _measure_pass(name: str, pending: List[tuple], rows: List[Dict], runner: ProgramRunner, logs: tuple,
                  settings: MeasureSettings, progress: Progress, reference: Reference,
                  ahead: Optional[CompileAhead] = None) -> None:
    """One pass of a program, a batch at a time (as many configs as `settings.batch` and
    the process's memory maps allow)."""
    log, ref_log = logs
    while pending:
        if reference.due():
            ref_log.append(reference.measure())
        done, errors = _measure_batch(runner, pending[:settings.batch], rows, log, settings,
                                      seed=f"{name}:{len(pending)}", show=lambda text: progress.show(f"{name} {text}"),
                                      ahead=ahead)
        if len(done) < min(len(pending), settings.batch):
            progress.warning(f"{name}: {len(done)} compiled configs fill this process's memory maps "
                             f"(vm.max_map_count); configs timed in different batches are compared "
                             f"less exactly — raise the limit to time a whole pass together")
        pending = [item for item in pending if item not in done]
        progress.add(len(done), errors)
        progress.show(name)


def estimate(plan: PlanSettings, settings: MeasureSettings) -> int:
    """Timings a program's configs take (before its plan exists, for the ETA)."""
    return round(len(SEARCHES) * plan.configs * (1 + settings.remeasure_fraction))


def collect_program(job: Job, root: Path, plan: PlanSettings, settings: MeasureSettings,
                    progress: Progress, reference: Reference) -> Dict[str, Any]:
    """Plan, measure and write one program; its summary."""
    name = job.program.name
    say = progress.message
    runner = ProgramRunner(job.program.fn, job.program.args())
    folder = root / "measurements"
    folder.mkdir(parents=True, exist_ok=True)
    saved = _plan(job, runner, folder / f"{name}.plan.json", plan, settings,
                  lambda s: progress.show(f"{name} {s}"))
    journal = folder / f"{name}.jsonl"
    rows = read_jsonl(str(journal))
    todo = to_measure(saved, rows, settings.remeasure_fraction)
    progress.counts.planned += len(todo) - estimate(plan, settings)
    ahead = CompileAhead(job.program, settings.compile_core, root / CACHE_FOLDER)
    with JsonlLog(str(journal)) as log, JsonlLog(str(root / "reference.jsonl")) as ref_log:
        for pending in passes(todo):
            _measure_pass(name, pending, rows, runner, (log, ref_log), settings, progress, reference, ahead)
    rows = results(read_jsonl(str(journal)))
    write_program_npz(root, saved, rows, runner)
    summary = summarize(saved, rows)
    say(summary_line(name, summary))
    return summary


def write_program_npz(root: Path, saved: Dict[str, Any], rows: List[Dict], runner: ProgramRunner) -> None:
    """One layout npz per search, the measured configs that compiled, with the configurable
    nodes' roles and XLA's own layouts (`Space.context`)."""
    from extract.xla.hlo_graph import featurize_module, read_hlo_module
    from extract.xla.npz_format import layout_arrays, write_arrays

    name = saved["program"]
    graph = featurize_module(read_hlo_module(runner.pre_fusion, name=name), source=name).arrays()
    first = {r["config"]: r for r in rows if r["pass"] == 1}
    space = space_of(saved, runner.candidates)
    ids = np.asarray([c.node for c in space.nodes], np.int64)
    for search in SEARCHES:
        keys = npz_config_keys(saved, rows, search)
        feats = np.stack([space.features(parse_config_key(k)) for k in keys]) if keys else \
            np.zeros((0, len(ids), 18), np.float32)
        runtime = np.asarray([round(first[k]["runtime_s"] * 1e9) for k in keys], np.int64)
        write_arrays(npz_path(root, search, saved["split"], name),
                     layout_arrays(graph, ids, feats, runtime, space.context()), source=name)


def rewrite_npz(root: Path, programs: Dict[str, Program], only: Optional[Sequence[str]] = None,
                say: Callable[[str], None] = print) -> int:
    """Write the npz files of every program planned under ROOT (a collector's root or a shipped
    collection) again from its plan and timings, the program re-traced — what a newer npz
    format adds (the configurable nodes' roles) without measuring anything. `programs`: the
    programs by name (the zoo's); `only`: just these programs' plans (a ValueError for a name
    without one). A program not among `programs`, or changed since its plan, is a line of
    error and left as it is; the number of such programs."""
    plans = {}
    for path in sorted((root / "measurements").glob("*.plan.json")):
        saved = json.loads(path.read_text())
        plans[saved["program"]] = (path, saved)
    if not plans:
        raise ValueError(f"{root}: no measurements/*.plan.json (not a collection root)")
    unplanned = [n for n in only or () if n not in plans]
    if unplanned:
        raise ValueError(f"{root}: no plan for {', '.join(unplanned)}; planned: {', '.join(plans)}")
    failed = 0
    for name in only or plans:
        path, saved = plans[name]
        program = programs.get(name)
        if program is None:
            say(f"error: {name}: not a program of the zoo; a `function` program's npz is written again "
                f"by its measuring command, run again on its ROOT")
            failed += 1
            continue
        runner = ProgramRunner(program.fn, program.args())
        if not same_program(saved, runner):
            say(f"error: {path}: made for another version of program {name} (its HLO changed); not rewritten")
            failed += 1
            continue
        rows = results(read_jsonl(str(measurements_file(root / "measurements", name))))
        write_program_npz(root, saved, rows, runner)
        say(f"{name}: npz written again ({len(saved['nodes'])} configurable nodes)")
    return failed


def npz_config_keys(saved: Dict[str, Any], rows: List[Dict], search: str) -> List[str]:
    """The configs of a search that its npz holds, in the npz's order: those whose first
    measuring pass has a runtime (compile failures stay in the measurements only)."""
    first = {r["config"]: r for r in rows if r["pass"] == 1}
    return [k for k in saved["configs"][search] if k in first and "error" not in first[k]]


def summarize(saved: Dict[str, Any], rows: List[Dict]) -> Dict[str, Any]:
    """Configs measured and failed, spread of the runtimes relative to XLA's assignment,
    and the noise: Kendall τ and median relative difference of the twice-measured — also
    beside the shift the second pass shares as a whole (its batch timed at another moment)."""
    from scipy.stats import kendalltau

    first = {r["config"]: r for r in rows if r["pass"] == 1}
    second = {r["config"]: r for r in rows if r["pass"] == 2}
    ok = {k: r["runtime_s"] for k, r in first.items() if "error" not in r}
    out: Dict[str, Any] = {"program": saved["program"], "nodes": len(saved["nodes"]),
                           "below_noise": saved["below_noise"], "filled": len(saved.get("filled", [])),
                           "measured": len(first),
                           "errors": len(first) - len(ok)}
    if "" in ok:
        default = ok[""]
        out.update(default_ms=1e3 * default, best=min(ok.values()) / default,
                   worst=max(ok.values()) / default)
    pairs = [(ok[k], r["runtime_s"]) for k, r in second.items() if k in ok and "error" not in r]
    if pairs:
        a, b = np.asarray(pairs).T
        out["remeasured"] = len(pairs)
        out["noise_rel"] = float(np.median(np.abs(a - b) / a))
        shift = float(np.median(b / a))  # the second pass's batch ran faster or slower as a whole
        out["pass_shift"] = shift - 1.0
        out["noise_rel_beside_shift"] = float(np.median(np.abs(b / a / shift - 1.0)))
        if len(pairs) >= 3:
            tau = kendalltau(a, b).statistic
            out["noise_tau"] = None if np.isnan(tau) else float(tau)
    return out


def summary_line(name: str, s: Dict[str, Any]) -> str:
    parts = [f"{s['measured']} configs", f"{s['nodes']} configurable nodes"
             + (" (below noise)" if s["below_noise"] else "")
             + (f" ({s['filled']} below the bar, for enough configs)" if s.get("filled") else "")]
    if s["errors"]:
        parts.append(f"{s['errors']} refused by XLA")
    if "default_ms" in s:
        parts.append(f"XLA's layout {s['default_ms']:.3f} ms, configs {s['best']:.2f}–{s['worst']:.2f}×")
    if "noise_rel" in s:
        parts.append(f"noise {100 * s['noise_rel']:.1f}% over {s['remeasured']} remeasured"
                     + (f" ({100 * s['noise_rel_beside_shift']:.1f}% beside the passes' shift of "
                        f"{100 * s['pass_shift']:+.1f}%)" if "pass_shift" in s else "")
                     + (f", τ {s['noise_tau']:.2f}" if s.get("noise_tau") is not None else ""))
    return f"{name}: " + ", ".join(parts)


def collect(jobs: Sequence[Job], root: Path, plan: PlanSettings, settings: MeasureSettings,
            pinned: Dict[str, Any], stream: Any = None) -> int:
    """Every job in turn (one line of errors per failed program); the number failed."""
    JsonlLog(str(root / "runs.jsonl")).append({
        "time": time.time(), "command": sys.argv, "machine": machine(), "pinned": pinned,
        "measure": settings.as_dict(), "plan": asdict(plan), "programs": [j.program.name for j in jobs]})
    progress = Progress(Counts(tasks_total=len(jobs), planned=len(jobs) * estimate(plan, settings)),
                        stream=stream)
    reference = Reference(settings)
    failed = 0
    for job in jobs:
        try:
            collect_program(job, root, plan, settings, progress, reference)
        except Exception as e:  # noqa: BLE001 - one program's failure is reported, the run goes on
            from extract.xla.collection.runner import one_line
            progress.message(f"error: {job.program.name}: {one_line(e)}")
            failed += 1
        progress.counts.tasks_done += 1
    progress.show(force=True)
    return failed



def probe_line(saved: Dict[str, Any]) -> str:
    """The probe of a plan in one line: noise, threshold, each probed node's effect."""
    probed = saved["probe"]
    kinds = {c["id"]: f"{c['kind']}{c['shape']}" for c in saved["candidates"]}
    effects = ", ".join(f"{k} {kinds[k]} " + ("error" if v is None else f"{100 * v:+.1f}%")
                        for k, v in probed["effects"].items())
    return (f"  probe: XLA's layout {', '.join(f'{1e3 * t:.3f}' for t in probed['default_s'])} ms "
            f"(noise {100 * probed['noise']:.1f}%), threshold {100 * saved['threshold']:.1f}%; "
            f"{effects}; configurable: {', '.join(saved['nodes'])}"
            + (f" ({', '.join(saved['filled'])} below the bar)" if saved.get("filled") else ""))


def print_summary(root: Path, probes: bool = False) -> int:
    """One summary line per program planned under ROOT (with `probes`, and its probe);
    2 if ROOT holds none."""
    plans = sorted((Path(root) / "measurements").glob("*.plan.json"))
    if not plans:
        print(f"error: {root}: no measurements/*.plan.json (not a collection root)", file=sys.stderr)
        return 2
    for path in plans:
        saved = json.loads(path.read_text())
        rows = results(read_jsonl(str(measurements_file(path.parent, saved["program"]))))
        print(summary_line(saved["program"], summarize(saved, rows)))
        if probes:
            print(probe_line(saved))
    return 0
