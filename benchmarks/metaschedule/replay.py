"""Offline replay of the gnn's online phase on the networks dataset: what its updates add.

    python -m benchmarks.metaschedule.replay [--data DATASET] [--tasks-per-network 3 | --all-tasks]
        [--variants none default ...] [--round-size 8] [--rounds 6] [--seeds 0]
        [--pretrained DIR | --checkpoint CKPT] [--runs runs/ms_replay] [--results docs/results]

`--data` defaults to the shipped networks dataset with the most measured tasks
(`datasets.networks.default_dataset`); RESULTS.md's table is `datasets/networks_rocketlake`'s
(4 networks, 12 tasks: its pre-trainings about 6 minutes on one core, most of it extracting the
dataset once, cached in `RUNS/cache` for the others; then about 3 minutes per seed; a dataset
of more networks takes longer, mostly pre-training: each further network about 30 s here).

No kernel is timed. For each task of the dataset, its measured schedules (pass 1's
records, replayed to schedules) are the pool, and the search is simulated in rounds:
the cost model scores the pool's unmeasured schedules (`GNNCostModel.predict`, the
product's featurizing path), the best `--round-size` are "measured" (their recorded
`run_secs` revealed as MetaSchedule `RunnerResult`s), the cost model is updated with
them (`GNNCostModel.update`, the product's own online recipe), and so on for `--rounds`.
Per round it records the best runtime found (over the pool's best: 1.0 = found) and the
Kendall τ of the model's scores against the runtimes of the still unmeasured pool.

**Pre-training with the task's network left out** (`--pretrained DIR`, default
`RUNS/pretrained/<dataset folder>`: `DIR/NETWORK/` is a `simulator.train --split
leave-network-out --test-network NETWORK` run on `--data`, made here when missing; a run
there of other data or another left-out network is refused), so the first round ranks
schedules the model has not seen.
`--checkpoint CKPT` uses one checkpoint for every task instead (the shipped one was
trained on 80% of every task's records: a rough first look only).

**Variants** (`VARIANTS`): `none` (no update: the first round's ranking throughout),
`default` (`GNNCostModel`'s own recipe: its update steps and learning rate, the
checkpoint's own loss), the recipes it replaced (ListMLE, 8 or 32 steps; pairwise hinge,
8 steps; the pre-training's learning rate, 2e-3), and on top of the default: a learning
rate of 4e-4, only the prediction head trained, ε-greedy picks (a share of every round at
random), skipping candidates the model cannot tell from one it has measured (same score);
and `random` (no model). A task's result for a variant and seed is kept in `--runs` as
soon as it is done, so a killed run resumes; it records its recipe (the variant and
`gnn_defaults()`) and is replayed again when today's differs.

Outputs: `ms_replay.json` in `--results` (per variant and round the geometric mean over
tasks of best-found / pool best, the share of tasks whose best improved after the first
round, mean τ on the unmeasured pool) and `ms_replay.png`; the section of
docs/RESULTS.md comes from `report_section`.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..common import COUNT, SEED, cli, dies_with_parent, log, markdown_table, write_json

RESULT = "ms_replay.json"
FIGURE = "ms_replay.png"
PRETRAIN_EPOCHS = 10
KIND_ORDER = ("dense", "conv2d", "batch_matmul", "depthwise_conv2d", "softmax", "layer_norm", "pool")


@dataclass(frozen=True)
class Variant:
    """An online recipe and a way of picking each round's candidates; a field left None is
    `GNNCostModel`'s own choice (`Variant()` is the product's recipe)."""

    update_steps: Optional[int] = None   # None: GNNCostModel's UPDATE_STEPS
    loss: Optional[str] = None           # None: the checkpoint's own loss
    lr: Optional[float] = None           # None: the checkpoint's
    head_only: bool = False              # only the prediction head trains
    epsilon: float = 0.0                 # share of each round picked at random
    skip_seen: bool = False              # candidates scored exactly as a measured one wait
    model: bool = True                   # False: random picks


VARIANTS: Dict[str, Variant] = {
    "none": Variant(update_steps=0),
    "default": Variant(),
    "listmle-8": Variant(update_steps=8, loss="listmle"),
    "listmle-32": Variant(update_steps=32, loss="listmle"),
    "hinge-8": Variant(update_steps=8, loss="pairwise-hinge"),
    "lr-1x": Variant(lr=2e-3),      # the pre-training rate: the default before UPDATE_LR_SCALE
    "lr-0.2x": Variant(lr=4e-4),
    "head-only": Variant(head_only=True),
    "eps-0.25": Variant(epsilon=0.25),
    "skip-seen": Variant(skip_seen=True),
    "random": Variant(model=False),
}


# ---------------------------------------------------------------- the pools
@dataclass
class Pool:
    """One task's measured schedules: MeasureCandidates, their mean runtimes, the
    records' run_secs, and a feature context."""

    key: str
    network: str
    kind: str
    context: Any
    candidates: List[Any]
    run_secs: List[List[float]]

    @property
    def runtimes(self) -> np.ndarray:
        return np.array([float(np.mean(s)) for s in self.run_secs])


def choose_tasks(rows: Sequence[Dict[str, Any]], per_network: Optional[int], min_records: int) -> List[Dict[str, Any]]:
    """Tasks with at least `min_records` valid records; `per_network` of each network
    (operator kinds in turn: `KIND_ORDER` first, then any other kind by name), or all of
    them (None)."""
    usable = sorted((r for r in rows if r.get("valid", 0) >= min_records), key=lambda r: r["key"])
    if per_network is None:
        return usable
    chosen: List[Dict[str, Any]] = []
    for network in sorted({n for r in usable for n in r["networks"]}):
        mine = [r for r in usable if next(iter(r["networks"])) == network]
        present = {r["kind"] for r in mine}
        kinds = [k for k in KIND_ORDER if k in present] + sorted(present - set(KIND_ORDER))
        left = {kind: [r for r in mine if r["kind"] == kind] for kind in kinds}
        taken: List[Dict[str, Any]] = []
        while len(taken) < min(per_network, len(mine)):
            for kind in kinds:
                if left[kind] and len(taken) < per_network:
                    taken.append(left[kind].pop(len(left[kind]) // 2))
        chosen += taken
    return chosen


def task_rows(data: str) -> List[Dict[str, Any]]:
    """The dataset's per-task rows (key, kind, networks, valid records) from its summary.json."""
    from simulator.registry import SimulatorError

    path = os.path.join(data, "summary.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)["tasks"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SimulatorError(f"{path}: not a networks dataset's summary ({e})") from None


def load_pools(databases: Sequence[str], tasks: Sequence[Dict[str, Any]]) -> List[Pool]:
    """The tasks' pools from MetaSchedule databases (a dataset's pass 1; records whose
    trace no longer replays are counted and left out)."""
    from extract.metaschedule.database import TraceError, read_databases, target_of, workload_module
    from simulator.metaschedule.cost_model import feature_context, measure_candidate

    jobs, _ = read_databases(list(databases), skip_bad=True)
    by_key: Dict[str, List[Any]] = {}
    for job in jobs:
        by_key.setdefault(job.group, []).append(job)
    pools = []
    for row in tasks:
        mine, candidates, secs, dropped = by_key.get(row["key"], []), [], [], 0
        for job in mine:
            try:
                candidates.append(measure_candidate(job.schedule()))
                secs.append(list(job.run_secs))
            except TraceError:
                dropped += 1
        if dropped:
            log(f"{row['key']}: {dropped} records no longer replay, left out")
        if candidates:
            context = feature_context(workload_module(mine[0].workload), target_of(mine[0].target))
            pools.append(Pool(row["key"], next(iter(row["networks"])), row["kind"], context, candidates, secs))
    return pools


# ---------------------------------------------------------------- pre-training
def pretrain_argv(data: str, network: str, out: str, cache: str) -> List[str]:
    """One leave-network-out pre-training; `cache` keeps the dataset's extracted samples
    for the other networks' pre-trainings (extraction is most of each one's time); a killed
    one continues from its checkpoint (`--resume`)."""
    return [sys.executable, "-m", "simulator.train", "--data", data, "--split", "leave-network-out",
            "--test-network", network, "--model", "gcn", "--loss", "pairwise-hinge", "--epochs",
            str(PRETRAIN_EPOCHS), "--seed", "0", "--threads", "1", "--cache-dir", cache, "--out", out, "--resume"]


def pretrained_dir(args) -> str:
    return args.pretrained or os.path.join(args.runs, "pretrained", os.path.basename(os.path.normpath(args.data)))


def checkpoints(args, networks: Sequence[str]) -> Dict[str, str]:
    """network → the checkpoint its tasks start from (trained here when its run has not
    finished: `simulator.train` writes metrics.json last)."""
    if args.checkpoint:
        return {n: args.checkpoint for n in networks}
    out = {}
    missing = [n for n in networks if not os.path.exists(os.path.join(pretrained_dir(args), n, "metrics.json"))]
    for network in networks:
        run = os.path.join(pretrained_dir(args), network)
        if network in missing:
            log(f"pre-training the gcn with {network} left out ({missing.index(network) + 1} of {len(missing)}): {run}")
            pretrain(pretrain_argv(args.data, network, run, os.path.join(args.runs, "cache")), run)
        check_pretrained(run, args.data, network)
        out[network] = run
    return out


def pretrain(argv: Sequence[str], run: str) -> None:
    """Run one pre-training; a failed one stops the replay with a line naming it."""
    from simulator.registry import SimulatorError

    code = subprocess.run(list(argv), preexec_fn=dies_with_parent()).returncode
    if code:
        raise SimulatorError(f"pre-training {run} failed (exit status {code}; its output is above): "
                             f"{' '.join(argv[1:])}")


def run_config(run: str) -> Dict[str, Any]:
    """The training config a `simulator.train` run folder records ({}: none readable)."""
    try:
        with open(os.path.join(run, "metrics.json"), encoding="utf-8") as f:
            return json.load(f).get("config") or {}
    except (OSError, ValueError, AttributeError):
        return {}


def check_pretrained(run: str, data: str, network: str) -> None:
    """Refuse a pre-training of other data, or with another network (or none) left out."""
    from simulator.registry import SimulatorError

    config = run_config(run)
    theirs = [os.path.abspath(d) for d in config.get("data") or []]
    if theirs != [os.path.abspath(data)] or config.get("split") != "leave-network-out" \
            or config.get("test_network") != network:
        raise SimulatorError(f"{run}: not a pre-training on {data} with {network} left out (its data "
                             f"{config.get('data')}, split {config.get('split')}, left out "
                             f"{config.get('test_network')}); give --pretrained another folder")


def describe_pretraining(args, networks: Sequence[str]) -> str:
    """How the tasks' checkpoints were trained, from their runs' configs."""
    if args.checkpoint:
        return args.checkpoint
    configs = [c for c in (run_config(os.path.join(pretrained_dir(args), n)) for n in networks) if c]
    recipes = sorted({f"{c.get('model')}, {c.get('loss')}, {c.get('epochs')} epochs, seed {c.get('seed')}"
                      for c in configs})
    return f"{'; '.join(recipes) or 'unknown'}, the task's network left out"


# ---------------------------------------------------------------- one replay
def cost_model(checkpoint: str, variant: Variant, seed: int, cache):
    """A GNNCostModel for `variant` (None: random picks), sharing the graph `cache`."""
    if not variant.model:
        return None
    from simulator.metaschedule.cost_model import from_checkpoint

    options = {"update_steps": variant.update_steps, "loss": variant.loss, "lr": variant.lr}
    model = from_checkpoint(checkpoint, seed=seed, **{k: v for k, v in options.items() if v is not None})
    model.cache = cache   # featurized once for all variants: the same graphs either way
    if variant.head_only:
        for name, p in model.model.net.named_parameters():
            p.requires_grad_(name.startswith("head."))
    return model


def pick(scores: np.ndarray, unmeasured: np.ndarray, k: int, variant: Variant, seen: set,
         rng: np.random.Generator) -> List[int]:
    """Pool indices to measure this round: the best-scored unmeasured (ε of them at random;
    with `skip_seen`, those scored exactly as a measured one go last)."""
    order = list(unmeasured[np.argsort(-scores, kind="stable")])
    if variant.skip_seen:
        score_of = dict(zip(unmeasured.tolist(), scores.tolist()))
        order = [i for i in order if score_of[i] not in seen] + [i for i in order if score_of[i] in seen]
    n_random = int(rng.binomial(k, variant.epsilon)) if variant.epsilon else 0
    chosen = order[:k - n_random]
    rest = [i for i in order if i not in chosen]
    if n_random and rest:
        chosen += list(rng.choice(rest, size=min(n_random, len(rest)), replace=False))
    return [int(i) for i in chosen]


def replay(pool: Pool, model, variant: Variant, rounds: int, k: int, seed: int) -> Dict[str, Any]:
    """Best-found (over the pool's best) and τ on the unmeasured pool, per round."""
    from tvm.s_tir import meta_schedule as ms
    from scipy import stats

    runtimes = pool.runtimes
    rng = np.random.default_rng([seed, 29])
    measured: List[int] = []
    seen: set = set()
    best, taus = [], []
    for _ in range(rounds):
        unmeasured = np.array([i for i in range(len(runtimes)) if i not in set(measured)])
        if not len(unmeasured):
            break
        if model is None:
            scores = rng.random(len(unmeasured))
        else:
            scores = np.asarray(model.predict(pool.context, [pool.candidates[i] for i in unmeasured]))
        tau = stats.kendalltau(-scores, runtimes[unmeasured]).statistic if len(unmeasured) > 2 else np.nan
        taus.append(None if not np.isfinite(tau) else float(tau))
        chosen = pick(scores, unmeasured, k, variant, seen, rng)
        measured += chosen
        if model is not None:
            score_of = dict(zip(unmeasured.tolist(), scores.tolist()))
            seen.update(score_of[i] for i in chosen)
            results = [ms.runner.RunnerResult(run_secs=pool.run_secs[i], error_msg=None) for i in chosen]
            model.update(pool.context, [pool.candidates[i] for i in chosen], results)
        best.append(float(runtimes[measured].min() / runtimes.min()))
    return {"best_over_pool": best, "tau_unmeasured": taus, "pool": len(runtimes),
            "update_s": model.stats.update_s if model is not None else 0.0}


# ---------------------------------------------------------------- the whole replay
def result_path(runs: str, variant: str, seed: int, key: str) -> str:
    return os.path.join(runs, "tasks", variant, f"s{seed}", f"{key}.json")


def recipe(name: str) -> Dict[str, Any]:
    """What a kept result of variant `name` was replayed under: the variant and the gnn
    defaults its None fields stand for (`gnn_defaults`, with what the candidates are
    featurized against), as JSON reads them back."""
    from simulator.metaschedule.cost_model import gnn_defaults

    return json.loads(json.dumps({"variant": dataclasses.asdict(VARIANTS[name]), "gnn_defaults": gnn_defaults()}))


def current_result(path: str, name: str) -> Optional[Dict[str, Any]]:
    """The kept result at `path` when it was replayed under today's `recipe(name)` (None:
    missing, or another recipe's: it is replayed again)."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        row = json.load(f)
    return row if row.get("recipe") == recipe(name) else None


def kept(args, key: str) -> List[Dict[str, Any]]:
    """The results an earlier run kept for task `key` under today's recipes (one per
    variant and seed done)."""
    found = (current_result(result_path(args.runs, name, seed, key), name)
             for name in args.variants for seed in args.seeds)
    return [row for row in found if row is not None]


def run_all(args, pools: Sequence[Pool], ckpts: Dict[str, str]) -> List[Dict[str, Any]]:
    """Every (variant, seed) of the pools' tasks that an earlier run did not keep, each
    logged with how many are left and about how long they will take."""
    from extract.tir.featurize import GraphCache

    cache = GraphCache(maxsize=65536)
    todo = [(pool, name, seed) for pool in pools for name in args.variants for seed in args.seeds
            if current_result(result_path(args.runs, name, seed, pool.key), name) is None]
    rows, started = [], time.perf_counter()
    for done, (pool, name, seed) in enumerate(todo, 1):
        start = time.perf_counter()
        model = cost_model(ckpts[pool.network], VARIANTS[name], seed, cache)
        row = {"variant": name, "seed": seed, "task": pool.key, "network": pool.network, "kind": pool.kind,
               "recipe": recipe(name), **replay(pool, model, VARIANTS[name], args.rounds, args.round_size, seed)}
        row["wall_s"] = time.perf_counter() - start
        write_json(result_path(args.runs, name, seed, pool.key), row)
        rows.append(row)
        left_min = (time.perf_counter() - started) / done * (len(todo) - done) / 60
        log(f"{name:>10} s{seed} {pool.key[:60]}: best/pool {_show(row['best_over_pool'])} "
            f"[{done}/{len(todo)}, about {left_min:.0f} min left]")
    return rows


def _show(values: Sequence[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def summarize(rows: Sequence[Dict[str, Any]], variants: Sequence[str], rounds: int) -> Dict[str, Any]:
    """Per variant: per round the geometric mean over tasks (and seeds) of best/pool best,
    the share of (task, seed) runs whose best improved after round 1, mean τ on the
    unmeasured pool per round, and the mean update time per task."""
    out = {}
    for name in variants:
        mine = [r for r in rows if r["variant"] == name and len(r["best_over_pool"]) == rounds]
        if not mine:
            continue
        best = np.array([r["best_over_pool"] for r in mine])
        taus = np.array([[np.nan if t is None else t for t in r["tau_unmeasured"]] for r in mine], dtype=float)
        out[name] = {"runs": len(mine),
                     "geomean_best_over_pool": np.exp(np.log(best).mean(axis=0)).tolist(),
                     "found_pool_best": (best <= 1.0 + 1e-9).mean(axis=0).tolist(),
                     "improved_after_round_1": float((best[:, -1] < best[:, 0] - 1e-12).mean()),
                     "mean_tau_unmeasured": [float(np.nanmean(c)) if np.isfinite(c).any() else None for c in taus.T],
                     "update_s_per_task": float(np.mean([r["update_s"] for r in mine]))}
    return out


def plot(summary: Dict[str, Any], round_size: int, path: str) -> None:
    """Best-found over the pool's best against measured candidates, one line per variant."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, s in summary.items():
        ys = s["geomean_best_over_pool"]
        ax.plot([round_size * (i + 1) for i in range(len(ys))], ys, marker="o", label=name,
                linestyle="--" if name in ("none", "random") else "-")
    ax.set_xlabel("candidates measured (pool replay)")
    ax.set_ylabel("best found / pool best (geomean over tasks)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args, command: str = "") -> Dict[str, Any]:
    from datasets.networks import training_databases
    from extract.metaschedule.runner import host_target, load_tensor_intrinsics
    from simulator.metaschedule.cost_model import gnn_defaults

    start = time.time()
    load_tensor_intrinsics(host_target(1))
    tasks = choose_tasks(task_rows(args.data), None if args.all_tasks else args.tasks_per_network,
                         args.min_records)
    todo = [t for t in tasks if len(kept(args, t["key"])) < len(args.variants) * len(args.seeds)]
    log(f"{len(tasks)} tasks, {len(todo)} to replay: reading and replaying their records")
    pools = load_pools(training_databases(args.data), todo) if todo else []
    ckpts = checkpoints(args, sorted({p.network for p in pools}))
    run_all(args, pools, ckpts)
    rows = [{k: v for k, v in row.items() if k != "recipe"} for t in tasks for row in kept(args, t["key"])]
    summary = summarize(rows, args.variants, args.rounds)
    os.makedirs(args.results, exist_ok=True)
    plot(summary, args.round_size, os.path.join(args.results, FIGURE))
    out = {"command": command, "data": args.data, "round_size": args.round_size, "rounds": args.rounds,
           "seeds": list(args.seeds),
           "pretraining": describe_pretraining(args, sorted({next(iter(t["networks"])) for t in tasks})),
           "tasks": [{"key": t["key"], "network": next(iter(t["networks"])), "kind": t["kind"], "pool": t["valid"]}
                     for t in tasks],
           "variants": {n: dataclasses.asdict(VARIANTS[n]) for n in args.variants}, "gnn_defaults": gnn_defaults(),
           "summary": summary, "runs": rows, "wall_s": time.time() - start}
    write_json(os.path.join(args.results, RESULT), out)
    return out


def report_section(results: str) -> List[str]:
    """The RESULTS.md section (empty when the replay has not run)."""
    from simulator.metaschedule.resume import other_gnn_defaults

    from ..common import load_json, not_todays_gnn, shown_command

    r = load_json(results, RESULT)
    if not r:
        return []
    k, rounds = r["round_size"], r["rounds"]
    lines = ["## Offline replay of the gnn's online phase (no kernel timed)", "",
             f"`{shown_command(r['command'])}`" if r.get("command") else "", "",
             f"{len(r['tasks'])} tasks of `{r['data']}` ({', '.join(sorted({t['network'] for t in r['tasks']}))}; "
             f"pools of {min(t['pool'] for t in r['tasks'])}–{max(t['pool'] for t in r['tasks'])} measured "
             f"schedules); {rounds} rounds of {k}; seeds {r['seeds']}; pre-training: {r['pretraining']}. "
             f"Best found is over the pool's best (1.00 = the pool's fastest found); geometric mean over tasks "
             f"and seeds. τ: Kendall τ of the model's scores on the still unmeasured pool.", ""]
    header = ["variant"] + [f"best @ {k * (i + 1)}" for i in range(rounds)] + \
             ["improved after round 1", f"τ unmeasured @ {k}", f"τ @ {k * rounds}", "update s / task"]
    rows = []
    for name, s in r["summary"].items():
        taus = s["mean_tau_unmeasured"]
        rows.append([name] + [f"{v:.3f}" for v in s["geomean_best_over_pool"]]
                    + [f"{100 * s['improved_after_round_1']:.0f}%",
                       "–" if taus[0] is None else f"{taus[0]:.3f}", "–" if taus[-1] is None else f"{taus[-1]:.3f}",
                       f"{s['update_s_per_task']:.1f}"])
    lines += [markdown_table(header, rows), ""]
    why = other_gnn_defaults(r.get("gnn_defaults"))
    if why:
        lines += [not_todays_gnn("replayed", why, "`default` and the variants built on it are the earlier recipe's; "
                                 "the next run replays them again."), ""]
    if os.path.exists(os.path.join(results, FIGURE)):
        lines += [f"![best found against candidates measured, per variant](results/{FIGURE})", ""]
    return lines


def build_parser() -> argparse.ArgumentParser:
    from datasets.networks import default_dataset

    ap = argparse.ArgumentParser(prog="python -m benchmarks.metaschedule.replay", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.relpath(default_dataset()))
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--tasks-per-network", type=COUNT, default=3)
    which.add_argument("--all-tasks", action="store_true")
    ap.add_argument("--min-records", type=COUNT, default=64, help="tasks with fewer valid records are left out")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--round-size", type=COUNT, default=8)
    ap.add_argument("--rounds", type=COUNT, default=6)
    ap.add_argument("--seeds", nargs="+", type=SEED, default=[0])
    start = ap.add_mutually_exclusive_group()
    start.add_argument("--pretrained", default=None,
                       help="DIR/NETWORK: the leave-network-out runs (made when missing; default "
                            "RUNS/pretrained/<dataset folder>)")
    start.add_argument("--checkpoint", default=None, help="one checkpoint for every task instead")
    ap.add_argument("--runs", default=os.path.join("runs", "ms_replay"))
    ap.add_argument("--results", default=os.path.join("docs", "results"))
    return ap


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    out = run(args, command=" ".join(["python -m benchmarks.metaschedule.replay", *(argv if argv is not None else sys.argv[1:])]))
    for name, s in out["summary"].items():
        print(f"{name:>10}  best/pool per round: {_show(s['geomean_best_over_pool'])}  "
              f"improved after round 1: {100 * s['improved_after_round_1']:.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
