"""A finished collection root, compacted into the folder the repository ships.

    python -m extract.xla_collect ship ROOT --out datasets/xla_layout_<cpu> [--overwrite]

Writes into OUT (nothing into ROOT; `--overwrite` first empties it):

    npz/layout/xla/...                      the TpuGraphs layout files, as the collector wrote them
    measurements/<program>.plan.json        each program's plan, as written
    measurements/<program>.jsonl.gz         its timing rows (the compile markers dropped),
                                            every repeat to 4 significant digits
    reference.jsonl.gz                      the drift kernel's timings, the same way
    runs.jsonl                              every run's command, settings and machine
    README.md                               machine, protocol, commands, a line per program

4 significant digits keep a repeat to 0.01 %, far below the collection's noise (1–9 %), and
shrink a program's timings about tenfold; each config's runtime stays as measured. Gzip files
carry no name or time, so shipping the same root twice gives the same bytes.
`benchmarks.xla_layout` and `summary` read the shipped folder as they read a root; the
collector and `ship` refuse it (to measure again, copy its plans into a new root:
docs/xla_collection.md). A program still being measured, or a root of more than one
CPU model, is refused with the reason.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

from extract.fileio import LOCK_NAME, atomic_write, write_gzip
from extract.metaschedule.jsonl import read_jsonl
from extract.xla.collection.collect import (SHIPPED_SUFFIX, check_root, measurements_file, results, summarize,
                                            summary_line, to_measure)
from extract.xla.collection.measure import NEIGHBOURS

DIGITS = 4


def compact(row: Dict[str, Any]) -> Dict[str, Any]:
    """The row with every list of seconds (`*_s`: the repeats) to DIGITS significant digits;
    the runtimes derived from them stay exact, so the shipped summary is the root's."""
    return {k: [float(f"{t:.{DIGITS}g}") for t in v] if k.endswith("_s") and isinstance(v, list) else v
            for k, v in row.items()}


def jsonl_bytes(rows: List[Dict[str, Any]]) -> bytes:
    return "".join(json.dumps(compact(r), sort_keys=True) + "\n" for r in rows).encode("utf-8")


def finished_programs(root: Path, remeasure: float) -> List[Tuple[Dict[str, Any], List[Dict[str, Any]]]]:
    """Every program's plan under ROOT and its journal's rows; a ValueError naming the programs
    with timings still to take."""
    plans = sorted((root / "measurements").glob("*.plan.json"))
    if not plans:
        raise ValueError(f"{root}: no measurements/*.plan.json (not a collection root)")
    saved = [json.loads(p.read_text()) for p in plans]
    journals = [read_jsonl(str(journal(root, s))) for s in saved]
    pending = {s["program"]: len(to_measure(s, rows, remeasure)) for s, rows in zip(saved, journals)}
    unfinished = [f"{name} ({n} timing{'s' * (n != 1)})" for name, n in pending.items() if n]
    if unfinished:
        raise ValueError(f"{root}: still to measure: {', '.join(unfinished)}; finish them "
                         f"(the collector's command again) before shipping")
    return list(zip(saved, journals))


def journal(root: Path, saved: Dict[str, Any]) -> Path:
    return measurements_file(root / "measurements", saved["program"])


def cpu_of(machine: Dict[str, Any]) -> str:
    """The CPU model as the runs record it: the name, and its family/model numbers where
    recorded (runs of older collectors have the name only)."""
    numbers = machine.get("cpu_family_model")
    return f"{machine['cpu']} (family/model {numbers})" if numbers else machine["cpu"]


def one_cpu(runs: List[Dict[str, Any]], root: Path) -> None:
    """A ValueError when the runs were on different CPU models."""
    names = sorted({r["machine"]["cpu"] for r in runs})
    numbers = sorted({r["machine"]["cpu_family_model"] for r in runs if r["machine"].get("cpu_family_model")})
    if len(names) != 1 or len(numbers) > 1:
        seen = sorted({cpu_of(r["machine"]) for r in runs})
        raise ValueError(f"{root}/runs.jsonl: {len(seen)} CPU models ({', '.join(seen) or 'none'}); "
                         f"a collection is measured on one")


def ship(root: Path, out: Path, overwrite: bool = False) -> List[str]:
    """Write OUT from ROOT (module docstring); the programs' summary lines."""
    if out.resolve() == root.resolve() or root.resolve() in out.resolve().parents:
        raise ValueError(f"{out}: inside ROOT {root}; ship into a folder of its own")
    check_root(root)
    runs = read_jsonl(str(root / "runs.jsonl"))
    if not runs:
        raise ValueError(f"{root}/runs.jsonl: missing or empty (no collector ran here)")
    one_cpu(runs, root)
    programs = finished_programs(root, runs[-1]["measure"]["remeasure_fraction"])
    old = [p for p in out.iterdir() if p.name != LOCK_NAME] if out.exists() else []
    if old and not overwrite:
        raise ValueError(f"{out}: not empty (pass --overwrite to replace it with what ROOT ships)")
    for path in old:  # replaced, not written over: an old journal would shadow the new timings
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    (out / "measurements").mkdir(parents=True, exist_ok=True)
    summaries = []
    for plan, journal_rows in programs:
        name = plan["program"]
        rows = results(journal_rows)
        shutil.copyfile(root / "measurements" / f"{name}.plan.json", out / "measurements" / f"{name}.plan.json")
        write_gzip(out / "measurements" / f"{name}{SHIPPED_SUFFIX}", jsonl_bytes(rows))
        summaries.append(summarize(plan, rows))
    shutil.copytree(root / "npz", out / "npz")
    write_gzip(out / f"reference{SHIPPED_SUFFIX}", jsonl_bytes(read_jsonl(str(root / "reference.jsonl"))))
    shutil.copyfile(root / "runs.jsonl", out / "runs.jsonl")
    lines = [summary_line(s["program"], s) for s in summaries]
    with atomic_write(out / "README.md") as f:
        f.write(readme(root, out, runs, summaries, lines))
    return lines


def command_line(argv: List[str]) -> str:
    """A run's recorded argv as the command a user types."""
    return " ".join(["python -m extract.xla_collect", *argv[1:]])


def _day(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))


def protocol(runs: List[Dict[str, Any]]) -> str:
    """The last run's measuring protocol, and in how many runs a helper compiled."""
    run = runs[-1]
    m, flags = run["measure"], run["pinned"]["xla_flags"]
    return (f"**Protocol.** Single-threaded XLA CPU (`{flags}`), the measuring core ({m['core']}) "
            f"pinned, {m['clock']} clock. A program's configs are compiled (up to {m['batch']} at a "
            f"time{_compiled_on(runs)}), then timed together in {m['repeats']} shuffled rounds of repeats of ≥ "
            f"{m['min_repeat_ms']:g} ms; a config's runtime is the median of its timings, each "
            f"divided by the median of the {NEIGHBOURS} timings on either side of it in time, times "
            f"the batch's median timing (the raw median and minimum beside it). "
            f"{100 * m['remeasure_fraction']:g}% of every program's configs are timed again in a "
            f"pass of their own (the noise ceiling); the drift kernel every "
            f"{m['reference_every_s']:g} s. Compile failures are kept as rows with an `error`.")


def _compiled_on(runs: List[Dict[str, Any]]) -> str:
    """Where a helper compiled half of each batch (`--compile-core`), and in how many of the
    runs when not in all (a collection topped up later, with the helper)."""
    helped = [r["measure"]["compile_core"] for r in runs if r["measure"].get("compile_core") is not None]
    if not helped:
        return ""
    where = "" if len(helped) == len(runs) else f" in {len(helped)} of the {len(runs)} runs"
    cores = ", ".join(map(str, sorted(set(helped))))
    return f", half of them by a helper on core {cores}{where}, stopped before the timing"


def readme(root: Path, out: Path, runs: List[Dict[str, Any]], summaries: List[Dict[str, Any]], lines: List[str]) -> str:
    machine = runs[-1]["machine"]
    commands = list(dict.fromkeys(command_line(r["command"]) for r in runs))
    measured = sum(s["measured"] - s["errors"] for s in summaries)
    return "\n".join([
        f"# A measured XLA layout collection: {len(summaries)} JAX programs on {machine['cpu']}", "",
        "TpuGraphs-style **layout** samples (`npz/layout/xla/{random,default}/{train,valid,test}/*.npz`: "
        "`node_feat`, `node_opcode`, `edge_index`, `node_config_ids`, `node_config_feat`, "
        "`config_runtime`, and this project's `node_config_roles` and `node_config_default`: what each "
        "dimension of a configurable node is to its operation, and XLA's own layouts), every config a "
        "layout (major-to-minor permutation) for each configurable "
        "node, applied through JAX's layout constraints and timed on this CPU. Beside them: "
        "`measurements/<program>.plan.json` (the probe of every candidate node, the configurable "
        "nodes, the configs), `measurements/<program>.jsonl.gz` (every timing of every config, both "
        "passes, compile failures kept; repeats to 4 significant digits), `reference.jsonl.gz` (the "
        "drift kernel), `runs.jsonl` (every run's command, settings and machine). How it is made: "
        "docs/xla_collection.md.", "",
        f"**Machine.** {cpu_of(machine)}, {machine['cores']} cores; Python {machine['python']}, "
        f"jax/jaxlib {machine['jax']}. One CPU model only.", "",
        protocol(runs), "",
        f"**Commands** ({_day(runs[0]['time'])} to {_day(runs[-1]['time'])}, {len(runs)} runs):", "",
        *[f"    {c}" for c in commands],
        f"    python -m extract.xla_collect ship {root} --out {out}", "",
        "Train and judge the models on it: `python -m benchmarks.xla_layout --xla-root "
        f"{out}`, or `python -m simulator.train --data tpugraphs:layout:xla:random --data-root {out}`.", "",
        "## Programs", "",
        f"{measured:,} measured configs over the {len(summaries)} programs (up to "
        f"{runs[-1]['plan']['configs']} per search, `random` and `default`; a program whose "
        "configurable nodes admit fewer distinct layouts, even with nodes below the probe's bar added, "
        "has fewer). \"configs a–b×\": runtimes "
        "relative to XLA's own layout (config `\"\"`, in both searches); noise: median |Δt|/t between "
        "the two passes over the re-measured configs (and beside the shift the whole second pass "
        "shares), τ their Kendall τ (the noise ceiling).", "",
        "```", *lines, "```", ""])
