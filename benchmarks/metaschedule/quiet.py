"""The whole-network benchmark's end-to-end points, timed again in one quiet, interleaved pass.

Each `simulator.tune` step times its network right after tuning, whatever else the machine
is doing then. The two cores share one L3 cache and the memory bus, so work on the other
core slows a network whose weights do not fit in the cache. Measured on bert's tvm-xgb
library after 64 trials per task: 27.0 ms as timed during the benchmark (training ran on
the other core), 22.3 ms with the other core idle — a difference larger than the ones
between cost models that the benchmark is there to show.

So after the tuning, every finished step is compiled again from its database as it stood
after that step (`simulator.metaschedule.resume.database_at`: each task's first `trials`
records) into `network_b<B>.so` in its work dir, and the libraries are timed `ROUNDS`
times each, in an order shuffled per round (drift over the pass falls on every cost model
alike). Before each timing the pass waits (up to `QUIET_WAIT_S`) until no core is busier
than `extract.metaschedule.cpu_load.BUSY_PERCENT`, and records the busiest core it saw.
Every timing is appended to `quiet_b<B>.json` beside the step's summary; a killed pass
resumes where it stopped.
"""
from __future__ import annotations

import json
import os
import random
import statistics
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from extract.fileio import atomic_write
from extract.metaschedule.cpu_load import BUSY_PERCENT, machine_load

ROUNDS = 5      # one library timed 27.4–34.6 ms over five rounds on a quiet machine: 3 were too few
QUIET_WAIT_S = 120.0
S_PER_POINT = 5.0 + ROUNDS * 8.5   # compile + each round's quiet check and timing child, measured on bert


def library_name(budget: int) -> str:
    return f"network_b{budget}.so"


def quiet_path(step: Dict[str, Any]) -> str:
    return os.path.join(step["work_dir"], f"quiet_b{step['budget']}.json")


def read_timings(step: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The quiet pass's timings of `step` so far (each: repeats_s, kernels_s, busiest_percent)."""
    from simulator.registry import SimulatorError

    path = quiet_path(step)
    if not os.path.exists(path):
        return []
    try:
        with open(path, encoding="utf-8") as f:
            return list(json.load(f)["timings"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SimulatorError(f"{path}: not a quiet-pass file ({e}); delete it to time the step again") from None


def quiet_latency(step: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The step's end to end from the quiet pass (None before its first timing): the median
    of every repeat of every round, the tuned kernels' time inside (median over rounds), and
    how many timings waited past `QUIET_WAIT_S` for a busy core."""
    timings = read_timings(step)
    if not timings:
        return None
    repeats = [r for t in timings for r in t["repeats_s"]]
    return {"latency_s": statistics.median(repeats), "rounds": len(timings),
            "kernels_s": {k: statistics.median(t["kernels_s"].get(k, 0.0) for t in timings)
                          for k in timings[-1]["kernels_s"]},
            "loaded": sum(t["busiest_percent"] > BUSY_PERCENT for t in timings)}


def build_library(step: Dict[str, Any], summary: Dict[str, Any], target, tasks) -> str:
    """`network_b<B>.so` of the step (made once): the network compiled with each task's
    first `trials` records, the database as the step left it. `tasks`: the network's
    (`simulator.metaschedule.tune.network_tasks`)."""
    from simulator.metaschedule.network import compile_network
    from simulator.metaschedule.resume import database_at

    path = os.path.join(step["work_dir"], library_name(step["budget"]))
    if os.path.exists(path):
        return path
    trials = {t["name"]: t["trials"] for t in summary["tasks"]}
    database = database_at(step["work_dir"], [t.mod for t in tasks], [trials.get(t.name, 0) for t in tasks])
    tmp = library_name(step["budget"]) + ".tmp.so"
    compile_network(step["network"], target, step["work_dir"], database=database, library=tmp)
    os.replace(os.path.join(step["work_dir"], tmp), path)
    return path


def wait_for_quiet() -> float:
    """Wait (1 s looks) until no core is busier than BUSY_PERCENT or `QUIET_WAIT_S` passed;
    the busiest core's percent at the last look."""
    waited = 0.0
    while True:
        busiest = max(load.busy for load in machine_load(1.0))
        waited += 1.0
        if busiest <= BUSY_PERCENT or waited >= QUIET_WAIT_S:
            return busiest


def time_once(step: Dict[str, Any], shapes, measure) -> None:
    """One more timing of the step's library, appended to its quiet file."""
    from simulator.metaschedule.network import time_library

    busiest = wait_for_quiet()
    timed = time_library(os.path.join(step["work_dir"], library_name(step["budget"])), shapes, measure)
    timings = read_timings(step) + [{"repeats_s": timed["repeats"], "kernels_s": timed["kernels"],
                                     "busiest_percent": round(busiest, 1), "at": time.time()}]
    with atomic_write(quiet_path(step)) as f:
        json.dump({"timings": timings}, f, indent=1)


def quiet_pass(finished: Sequence[Tuple[Dict[str, Any], Dict[str, Any]]], target, measure,
               rounds: int = ROUNDS, log=print) -> List[str]:
    """Build the library of every finished (step, its summary), then time each until it has
    `rounds` timings, round by round in a seeded shuffled order. A step whose library cannot
    be built or timed is left out of the rest of the pass, said, and returned (one line
    each): its point keeps the timing of its tuning step."""
    from extract.metaschedule.networks import get_network
    from simulator.metaschedule.tune import network_tasks

    failed: Dict[str, str] = {}
    tasks = {network: network_tasks(network, target) for network in sorted({s["network"] for s, _ in finished})}
    for step, summary in finished:
        _try(step, failed, log, build_library, step, summary, target, tasks[step["network"]])
    for round_no in range(rounds):
        todo = [step for step, _ in finished if _name(step) not in failed and len(read_timings(step)) <= round_no]
        random.Random(round_no).shuffle(todo)
        if todo:
            log(f"quiet pass, round {round_no + 1} of {rounds}: {len(todo)} libraries to time")
        for step in todo:
            _try(step, failed, log, time_once, step, get_network(step["network"]).input_shapes, measure)
    return [f"{name}: {why}" for name, why in failed.items()]


def _name(step: Dict[str, Any]) -> str:
    return f"{step['network']} {step['cost_model']} seed {step['seed']} at {step['budget']} per task"


def _try(step: Dict[str, Any], failed: Dict[str, str], log, work, *args) -> None:
    from simulator.registry import SimulatorError

    try:
        work(*args)
    except SimulatorError as e:
        failed[_name(step)] = str(e)
        log(f"quiet pass: {_name(step)} left out: {e}")
