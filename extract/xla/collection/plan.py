"""A program's plan: its graph, candidates, the probe that picks the configurable nodes,
and the configs of both searches — made once, saved, and reused by a resumed run.

The selection rule (`select_nodes`), measured by `probe`: XLA's own assignment
compiled `PROBE_ROUNDS` times — their relative spread is the noise — and each candidate,
largest first (at most `max_probe`), with only its layout changed, to the reverse of
XLA's (for a matrix, the transpose: the most different order), all timed in the same
rounds (measure.py). A candidate is configurable when that moves the runtime by more than
max(`min_effect`, `noise_factor` × noise); at most `max_nodes`, largest effect first.
If fewer than `min_nodes` pass, the largest effects make up the number and the plan
says so (`below_noise`), so a program whose layouts barely matter is visible as such.
If the nodes chosen admit fewer than `configs` distinct configs over both searches (a few
matrices have two layouts each), the next largest effects are added until they do or the
probed candidates run out (`fill_space`; the plan lists them as `filled`): a program's
configs then still differ where it matters, and there are enough of them to rank.
"""
from __future__ import annotations

import hashlib
import json
import math
import statistics
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from extract.xla.collection.layouts import Candidate, Space, config_key, sample_configs
from extract.xla.collection.measure import MeasureSettings
from extract.xla.collection.runner import ProgramRunner

PROBE_ROUNDS = 3
SEARCHES = ("random", "default")


@dataclass(frozen=True)
class PlanSettings:
    """How configurable nodes are chosen and configs sampled (module docstring)."""

    configs: int = 100          # per search, XLA's own assignment included
    seed: int = 0
    max_probe: int = 48
    min_effect: float = 0.02
    noise_factor: float = 2.0
    max_nodes: int = 32
    min_nodes: int = 2

    def __post_init__(self) -> None:
        if self.configs < 1 or self.max_probe < 1 or self.max_nodes < 1 or self.min_nodes < 1:
            raise ValueError(f"configs ({self.configs}), max_probe ({self.max_probe}), "
                             f"max_nodes and min_nodes must be ≥ 1")


FINGERPRINT_PREFIX = "text:"


def fingerprint(runner: ProgramRunner) -> str:
    """The program's identity: its HLO text before optimization (a changed program is a new
    plan). Text, not the serialized proto: the proto carries ids that XLA counts per process,
    so the same program lowered after others would hash differently."""
    return FINGERPRINT_PREFIX + hashlib.sha256(runner.pre_fusion_text.encode()).hexdigest()[:16]


def same_program(saved: Dict[str, Any], runner: ProgramRunner) -> bool:
    """Whether a saved plan was made for `runner`'s program: the same fingerprint; for a plan
    fingerprinted by the proto (no prefix, not comparable across processes), the same
    candidates at the same nodes with the same default layouts and the same dropped ones."""
    if saved["fingerprint"].startswith(FINGERPRINT_PREFIX):
        return saved["fingerprint"] == fingerprint(runner)
    now = json.loads(json.dumps({"candidates": [c.as_dict() for c in runner.candidates.values()],
                                 "dropped": runner.dropped}))
    return now == {"candidates": saved["candidates"], "dropped": saved["dropped"]}


def probe(runner: ProgramRunner, settings: MeasureSettings, max_probe: int,
          say: Callable[[str], None] = lambda s: None) -> Dict[str, Any]:
    """Runtime of XLA's assignment (PROBE_ROUNDS times) and each probed candidate's
    relative effect (module docstring)."""
    order = sorted(runner.candidates.values(), key=lambda c: -c.nbytes_key)[:max_probe]
    say(f"probe: compiling XLA's layout {PROBE_ROUNDS} times and {len(order)} candidates reversed")
    configs = [{}] * PROBE_ROUNDS + [{c.id: tuple(reversed(c.default))} for c in order]
    measured = runner.measure(configs, settings, seed="probe")
    base, tried = measured[:PROBE_ROUNDS], measured[PROBE_ROUNDS:]
    failed = next((b["error"] for b in base if "error" in b), None)
    if failed:
        raise RuntimeError(f"XLA's own layout assignment does not compile ({failed})")
    times = [b["runtime_s"] for b in base]
    reference = statistics.median(times)
    effects: Dict[str, Optional[float]] = {}
    for cand, result in zip(order, tried):
        effects[cand.id] = None if "error" in result else result["runtime_s"] / reference - 1.0
        say(f"probe {cand.id} ({cand.kind} {list(cand.shape)}): "
            + ("error" if effects[cand.id] is None else f"{100 * effects[cand.id]:+.1f}%"))
    return {"default_s": times, "noise": (max(times) - min(times)) / reference, "effects": effects}


def select_nodes(probed: Dict[str, Any], plan: PlanSettings) -> Dict[str, Any]:
    """The configurable nodes the probe picks (module docstring): ids, threshold and
    whether the rule had to fill up below the noise."""
    threshold = max(plan.min_effect, plan.noise_factor * probed["noise"])
    measured = {k: abs(v) for k, v in probed["effects"].items() if v is not None}
    ranked = sorted(measured, key=lambda k: -measured[k])
    chosen = [k for k in ranked if measured[k] > threshold][:plan.max_nodes]
    below = len(chosen) < plan.min_nodes
    if below:
        chosen = ranked[:plan.min_nodes]
    return {"selected": chosen, "threshold": threshold, "below_noise": below}


def space_for(chosen: Sequence[str], candidates: Dict[str, Candidate]) -> Space:
    """The configurable nodes named, in node order."""
    return Space(tuple(sorted((candidates[i] for i in chosen), key=lambda c: c.node)))


def search_samples(space: Space, plan: PlanSettings) -> Dict[str, List[Dict[str, tuple]]]:
    """Each search's sampled configs, XLA's own first."""
    return {search: sample_configs(space, plan.configs, search, plan.seed + i)
            for i, search in enumerate(SEARCHES)}


def search_configs(space: Space, plan: PlanSettings) -> Dict[str, List[str]]:
    """Each search's sampled configs as keys (the plan's `configs`)."""
    return {search: [config_key(c) for c in configs] for search, configs in search_samples(space, plan).items()}


def distinct_configs(space: Space, plan: PlanSettings) -> int:
    """How many distinct layout assignments the two searches measure between them (a config
    may name a node's XLA layout or leave it out: the same assignment)."""
    return len({tuple(config.get(c.id, c.default) for c in space.nodes)
                for configs in search_samples(space, plan).values() for config in configs})


def fill_space(selection: Dict[str, Any], probed: Dict[str, Any], candidates: Dict[str, Candidate],
               plan: PlanSettings) -> Dict[str, Any]:
    """`selection` with the next largest effects added while its nodes admit fewer than
    `plan.configs` distinct configs (module docstring); those added listed as `filled`."""
    effects = {k: abs(v) for k, v in probed["effects"].items() if v is not None}
    chosen = list(selection["selected"])
    rest = [k for k in sorted(effects, key=lambda k: -effects[k]) if k not in chosen]
    filled: List[str] = []
    while (rest and len(chosen) < plan.max_nodes
           and distinct_configs(space_for(chosen, candidates), plan) < plan.configs):
        filled.append(rest.pop(0))
        chosen.append(filled[-1])
    return {**selection, "selected": chosen, "filled": filled}


def make_plan(runner: ProgramRunner, program: Dict[str, str], plan: PlanSettings,
              settings: MeasureSettings, say: Callable[[str], None] = lambda s: None) -> Dict[str, Any]:
    """Probe, select, sample: the plan file's contents."""
    probed = probe(runner, settings, plan.max_probe, say)
    selection = fill_space(select_nodes(probed, plan), probed, runner.candidates, plan)
    space = space_for(selection["selected"], runner.candidates)
    return {**program, "fingerprint": fingerprint(runner), "plan_settings": asdict(plan),
            "candidates": [c.as_dict() for c in runner.candidates.values()],
            "dropped": runner.dropped, "probe": probed, **selection,
            "nodes": [c.id for c in space.nodes], "configs": search_configs(space, plan)}


def space_of(saved: Dict[str, Any], traced: Optional[Dict[str, Candidate]] = None) -> Space:
    """A plan's configurable nodes; with `traced` (the candidates of the program's trace,
    `ProgramRunner.candidates`), each with the roles the trace found."""
    by_id = {c["id"]: Candidate.from_dict(c) for c in saved["candidates"]}
    if traced is not None:
        missing = [i for i in saved["nodes"] if i not in traced]
        if missing:
            raise ValueError(f"{saved['program']}: configurable nodes {', '.join(missing)} of the plan are "
                             f"not in the program's trace (another version of the program)")
        by_id = {i: replace(by_id[i], roles=traced[i].roles) for i in saved["nodes"]}
    return Space(tuple(by_id[i] for i in saved["nodes"]))


def remeasured(keys: List[str], fraction: float, seed: int) -> List[str]:
    """The configs measured twice: ⌈fraction × n⌉ of them, XLA's own assignment first."""
    count = min(len(keys), math.ceil(fraction * len(keys)))
    if count == 0:
        return []
    rest = [k for k in keys if k != ""]
    picked = np.random.default_rng([seed, 7]).permutation(len(rest))[:count - 1]
    return [""] + [rest[int(i)] for i in sorted(picked)]
