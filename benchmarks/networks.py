"""Cross-network and cross-operator generalisation on the MetaSchedule networks dataset.

    python -m benchmarks.networks [--networks-data datasets/networks_<cpu>]
        [--networks-models gcn gcn-base xgb segsum-mlp tenset-mlp tlp gcn-inv-arf-noext-lane]
        [--kind-models gcn-inv-arf-noext-lane knob-xgb-rank knob-xgb-reg itervar-xgb-rank itervar-xgb-reg]
        [--network-models tlp]
        [--held-networks [bert ...]] [--held-kinds [softmax ...]] [--networks-epochs 10] [--networks-seeds 0 1 2]
        [--combined-models gcn xgb] [--runs runs/bench] [--results docs/results] [--parallel 1]

For every held-out network (`--split leave-network-out --test-network N`) and every held-out
operator kind (`--split leave-op-kind-out --test-op-kind K`), each model is trained on the
rest and scored on the held-out tasks: Kendall τ, top-1 / top-5 slowdown and top-5 recall
(means over the held-out tasks that have a value), beside the noise ceiling of those tasks
(mean per-task τ between the dataset's two passes, `datasets/networks_<cpu>/summary.json`).
Then, per held-out network, the `--combined-models` are trained again with the shipped
conv2d-template dataset added to the training data (`--data NETWORKS shipped`: its
workloads belong to no network, so they only ever train), to see whether the templates help.

A model is a `simulator.train --model` name (trained with that model's defaults, e.g.
`xgb`; `gcn` reads this data's default feature set, `full`), a rival's own recipe
(`RIVAL_SPECS`: `tenset-mlp`, TenSet's MLP; `tlp`, TLP with LambdaRank; `gcn-base`, the gcn
on the base columns; docs/COSTMODEL.md)
or a named command line of `benchmarks.transfer.specs.MODEL_SPECS` (the transfer study's
models: `gcn-inv-arf-noext-lane`, the size-invariant gcn with its best transfer features, and
AutoTVM's baselines `knob-xgb-rank` / `knob-xgb-reg` / `itervar-xgb-rank` /
`itervar-xgb-reg`, `KIND_MODELS`). `--kind-models` are trained on the leave-op-kind-out
axis only (default: none; `python -m benchmarks.all`: those five), `--network-models` on the
leave-network-out axis only (default: none), `--networks-models` on both axes. Besides the per-kind table, one
summary table gives per model, over the held-out kinds, the mean and worst τ and top-5
slowdown (of the kinds' means, and of the single tasks) beside the noise ceiling
(`kind_summary`).

Every model trains with `--networks-loss` (default `pairwise-hinge`: only the order of a
task's schedules matters to a tuner, and 83% of the log-runtime variance of this dataset is
between tasks, which a regression loss spends its fit on; docs/RANKING.md has the diagnosis and
the measurements behind this recipe), except where the model's command line says otherwise:
the `-reg` xgb models keep their regression objective (`--xgb-objective reg`, squared error
on log runtime; the loss is then not used), and a named command line with its own `--loss`
keeps it (`objective_of` says what each run optimised; the tables show it). Default held-out kinds: every kind of the dataset with at least one task of more than 5
valid records (so that τ and top-5 recall have a value); the other kinds (e.g. elementwise
tasks whose design space holds one schedule) are listed in the results with their record
counts, never dropped silently. Every run is repeated for each of `--networks-seeds`; the
tables show the mean over seeds (± the standard deviation with more than one). Runs go to
RUNS/networks/<split>-<held-out>-<model>-seed<S>[-with-shipped] (a finished run with the
same command line is reused); results to RESULTS/networks_<cpu>.json and .csv, one pair per
dataset and epoch count (`result_stem`: one CPU's results never replace another's, and a table
of models trained to convergence, `--networks-epochs 60` → networks_<cpu>_60_epochs.json, never
replaces the quicker default's), and a section of docs/RESULTS.md per pair (`report_section`).
A run of some of the models, seeds or held-out sets adds its rows to the table already there
(rows of the same run replaced) when that table is of the same data and loss, and replaces it
otherwise (`with_earlier_rows`): the tables grow run by run, and each row keeps its command.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from extract.fileio import sha256_of
from simulator.registry import SimulatorError

from .common import (COUNT, SEED, add_run_options, cli, files_digest, fmt, load_json, log, markdown_table,
                     mean_std, model_name, run_and_report, run_many, train_argv, write_csv, write_json)
from .kept_runs import KEPT_SUFFIX

# the default, its base-column ablation, the rivals of docs/COSTMODEL.md and the size-invariant
# gcn of the transfer study (sage, mlp, curve-mlp: `--networks-models`)
MODELS = ["gcn", "gcn-base", "xgb", "segsum-mlp", "tenset-mlp", "tlp", "gcn-inv-arf-noext-lane"]
# the transfer study's models, trained on the operator-kind axis only (benchmarks.transfer.specs)
KIND_MODELS = ["gcn-inv-arf-noext-lane", "knob-xgb-rank", "knob-xgb-reg", "itervar-xgb-rank", "itervar-xgb-reg"]
XGB_MODELS = ("xgb", "knob-xgb", "itervar-xgb")
RESULT_PREFIX = "networks_"
DEFAULT_EPOCHS = 10
METRICS = ["kendall_tau", "opa", "top1_score", "top5_score", "top1_slowdown", "top5_slowdown", "top5_recall"]
SCORES = {"top1_score": "top1_slowdown", "top5_score": "top5_slowdown"}   # TenSet's top-k score, from
# each held-out task's top-k slowdown and fastest latency (`simulator.metrics.topk_score`)
TASK_METRICS = ["kendall_tau", "top5_slowdown"]   # kept per held-out task (the summary's worst task)
NETWORKS = ["resnet50", "mobilenet_v2", "bert", "vit"]
# the rivals' own recipes, by name (beside benchmarks.transfer.specs.MODEL_SPECS): TenSet's MLP
# (simulator/segsum_mlp.py; MetaSchedule's MLPModel is the same network, batch 128 with lr decay)
RIVAL_SPECS = {"tenset-mlp": ["--model", "segsum-mlp", "--loss", "lambdarank", "--width", "256", "--lr", "7e-4",
                              "--weight-decay", "1e-6", "--batch-size", "512", "--grad-clip", "0.5",
                              "--epochs", "50"],
               # TLP (simulator/models/tlp.py): LambdaRank within each task, as the paper trains it
               "tlp": ["--model", "tlp", "--loss", "lambdarank"],
               # the default gcn on the base columns only: what the derived and context columns of
               # the default feature set (`full` on this data) add
               "gcn-base": ["--model", "gcn", "--features", "base"]}
LOSS = "pairwise-hinge"   # the ranking recipe (docs/RANKING.md)
SPLITS = {"network": ("leave-network-out", "--test-network"), "kind": ("leave-op-kind-out", "--test-op-kind")}


def networks_model(text: str) -> str:
    """An argparse type: a `simulator.train --model` name or a `benchmarks.transfer.specs.MODEL_SPECS` name."""
    from .transfer.specs import MODEL_SPECS

    if text in MODEL_SPECS or text in RIVAL_SPECS:
        return text
    try:
        return model_name(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"unknown model {text!r} (a simulator.train --model name, or one of "
                                         f"benchmarks.transfer.specs.MODEL_SPECS: {', '.join(MODEL_SPECS)})") from None


def model_flags(name: str) -> tuple:
    """(simulator.train --model, its other flags) of a benchmark model name: a rival's own
    recipe (`RIVAL_SPECS`, also under its model's name: `tlp`); any other simulator model's
    own name trains with its defaults (the argv of the runs before named command lines
    existed); any other name is its `benchmarks.transfer.specs.MODEL_SPECS` command line."""
    from simulator.models.costmodel import model_names

    from .transfer.specs import MODEL_SPECS

    if name in model_names() and name not in RIVAL_SPECS:
        return name, []
    spec = list(RIVAL_SPECS.get(name) or MODEL_SPECS[name])
    i = spec.index("--model")
    return spec[i + 1], spec[:i] + spec[i + 2:]


def _flag(argv: Sequence[str], name: str) -> Optional[str]:
    """The last value of `name` in a command line (argparse: the last one wins)."""
    found = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == name]
    return found[-1] if found else None


def epochs_phrase(epochs: Any, models: Sequence[str]) -> str:
    """`10 epochs`, naming the models whose recipe trains its own count (its `--epochs` comes
    after the benchmark's, so it wins): `10 epochs (tenset-mlp: its recipe's 50)`."""
    own = {m: _flag(RIVAL_SPECS[m], "--epochs") for m in sorted(set(models)) if m in RIVAL_SPECS}
    notes = [f"{model}: its recipe's {count}" for model, count in own.items() if count not in (None, str(epochs))]
    return f"{epochs} epochs" + (f" ({'; '.join(notes)})" if notes else "")


def objective_of(argv: Sequence[str]) -> str:
    """What a run's command line optimises: the loss, or an xgb model's objective
    (`--xgb-objective`; `auto`: rank:pairwise with a ranking loss, squared error otherwise)."""
    from simulator.losses import LOSSES

    loss = _flag(argv, "--loss") or "huber"
    if _flag(argv, "--model") not in XGB_MODELS:
        return loss
    objective = _flag(argv, "--xgb-objective") or "auto"
    if objective == "auto":
        objective = "rank" if loss in LOSSES and LOSSES.get(loss).ranking else "reg"
    return "rank:pairwise" if objective == "rank" else "reg:squarederror"


def add_arguments(ap: argparse.ArgumentParser, kind_models: Sequence[str] = ()) -> None:
    """The benchmark's options; `kind_models`: the default of `--kind-models` (none here;
    `benchmarks.all` passes `KIND_MODELS`)."""
    ap.add_argument("--networks-data", default=None,
                    help="a networks dataset (default: the shipped one with the most tasks)")
    ap.add_argument("--networks-models", nargs="+", type=networks_model, default=MODELS)
    ap.add_argument("--kind-models", nargs="*", type=networks_model, default=list(kind_models),
                    help="trained on the leave-op-kind-out axis only (default: %(default)s; "
                         f"the transfer study's: {' '.join(KIND_MODELS)})")
    ap.add_argument("--network-models", nargs="*", type=networks_model, default=[],
                    help="trained on the leave-network-out axis only (default: none)")
    ap.add_argument("--held-networks", nargs="*", default=NETWORKS,
                    help="default: %(default)s; none given: no network axis")
    ap.add_argument("--held-kinds", nargs="*", default=None,
                    help="default: every kind with a task of > 5 records; none given: no operator-kind axis")
    ap.add_argument("--networks-epochs", type=COUNT, default=DEFAULT_EPOCHS)
    ap.add_argument("--networks-seeds", nargs="+", type=SEED, default=[0, 1, 2])
    from simulator.losses import LOSSES

    ap.add_argument("--networks-loss", default=LOSS, choices=LOSSES.names(),
                    help="training loss of every model (a ranking loss makes xgb rank:pairwise)")
    ap.add_argument("--combined-models", nargs="*", type=model_name, default=["gcn", "xgb"],
                    help="trained again with the shipped conv2d dataset added (none: skip)")


def dataset_summary(data: str) -> Dict[str, Any]:
    """The dataset folder's summary.json (datasets.ship): its task table and ceilings."""
    path = os.path.join(data, "summary.json")
    if not os.path.exists(path):
        raise SystemExit(f"{path}: missing (make the dataset folder with python -m datasets.ship)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def dataset_digest(data: str) -> str:
    """The digest of what the runs train on (`benchmarks.common.files_digest`): every file of
    the dataset folder but its README and its pre-trained checkpoints. A dataset grown by more
    measuring has another, and every run is trained again rather than reused."""
    files = [os.path.join(folder, name) for folder, _, names in os.walk(data) for name in names
             if name != "README.md" and "pretrained" not in os.path.relpath(folder, data).split(os.sep)]
    return files_digest(data, files)


def run_data(digest: str, shipped: bool) -> str:
    """The digest a run records of what it trains on: the networks dataset's (`digest`), and
    for a run with the shipped conv2d-template dataset added (`--combined-models`) that
    dataset's log as well, so that either one measured again trains the run again."""
    if not shipped:
        return digest
    from datasets import SHIPPED_LOG

    return hashlib.sha256(f"{digest}:{sha256_of(SHIPPED_LOG)}".encode("utf-8")).hexdigest()


def default_kinds(summary: Dict[str, Any]) -> List[str]:
    return sorted({t["kind"] for t in summary["tasks"] if t["valid"] > 5})


def unheld_kinds(summary: Dict[str, Any]) -> Dict[str, Dict[str, int]]:
    """Kinds no task of which has more than 5 valid records: they cannot be held out (no τ
    or top-5 recall on them) and only ever train; with their task and record counts."""
    held = set(default_kinds(summary))
    out: Dict[str, Dict[str, int]] = {}
    for t in summary["tasks"]:
        if t["kind"] not in held:
            row = out.setdefault(t["kind"], {"tasks": 0, "valid": 0, "max_per_task": 0})
            row["tasks"] += 1
            row["valid"] += t["valid"]
            row["max_per_task"] = max(row["max_per_task"], t["valid"])
    return out


def held_tasks(summary: Dict[str, Any], axis: str, held: str) -> List[Dict[str, Any]]:
    """The tasks a run holds out: a network's and its batch variants' (as `--split
    leave-network-out` holds them out), or an operator kind's."""
    if axis == "network":
        return [t for t in summary["tasks"] if held_calls(t, held)]
    return [t for t in summary["tasks"] if t["kind"] == held]


def held_calls(task: Dict[str, Any], held: str) -> int:
    """A task's calls in the held-out network and its batch variants (`resnet50_b8`)."""
    from extract.metaschedule.networks import family

    return sum(calls for net, calls in task["networks"].items() if net == held or family(net) == held)


def ceiling_of(tasks: Sequence[Dict[str, Any]], key: str = "tau") -> Dict[str, Any]:
    """Mean per-task τ between the passes over the tasks that have one (None: none has)."""
    taus = [t[key] for t in tasks if t.get(key) is not None]
    return {"tau": sum(taus) / len(taus) if taus else None, "tasks": len(taus)}


def one_axis_models(args, option: str) -> List[str]:
    """The models of `--kind-models` / `--network-models` (`option`: its dest; none when the
    caller's parser has no such option)."""
    return list(getattr(args, option, None) or [])


def axis_models(args, option: str) -> List[str]:
    """Every model trained on one axis: `--networks-models`, then that axis' own (`option`)."""
    return list(dict.fromkeys(list(args.networks_models) + one_axis_models(args, option)))


def jobs(args, summary: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every training run: (axis, held-out, model, shipped added or not)."""
    kinds = default_kinds(summary) if args.held_kinds is None else args.held_kinds
    runs = os.path.join(args.runs, "networks")
    out = []
    plan = [("network", n, m, False) for n in args.held_networks for m in axis_models(args, "network_models")]
    plan += [("network", n, m, True) for n in args.held_networks for m in args.combined_models]
    plan += [("kind", k, m, False) for k in kinds for m in axis_models(args, "kind_models")]
    for seed in args.networks_seeds:
        for axis, held, model, shipped in plan:
            split, flag = SPLITS[axis]
            folder = os.path.join(runs, f"{split}-{held}-{model}-seed{seed}" + ("-with-shipped" if shipped else ""))
            data = [args.networks_data] + (["shipped"] if shipped else [])
            name, flags = model_flags(model)
            loss = [] if "--loss" in flags else ["--loss", args.networks_loss]
            argv = train_argv(name, seed, folder, data, args.networks_epochs,
                              extra=[*flags, "--split", split, flag, held, *loss])
            out.append({"axis": axis, "held": held, "model": model, "shipped": shipped, "seed": seed,
                        "out": folder, "argv": argv})
    return out


def _clean(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and v == v and abs(v) != float("inf") else None


def result_rows(results: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    rows = []
    for r in results:
        test = r["metrics"].get("test", {})
        rows.append({"axis": r["axis"], "held": r["held"], "model": r["model"], "shipped": r["shipped"],
                     "seed": r["seed"], "tasks": test.get("kendall_tau", {}).get("count", 0),
                     "samples": sum(int(v) for k, v in r["metrics"].get("run", {}).items() if k.endswith("_samples")),
                     **{m: _clean(test.get(m, {}).get("mean")) for m in METRICS if m not in SCORES},
                     "objective": objective_of(r["argv"]),
                     "per_task": {k: {m: _clean(test.get(m, {}).get("per_workload", {}).get(k)) for m in TASK_METRICS}
                                  for k in sorted(test.get("kendall_tau", {}).get("per_workload", {}))},
                     "best_ms": {k: _clean(v) for k, v in test.get("best_ms", {}).get("per_workload", {}).items()},
                     "slowdowns": {m: {k: _clean(v) for k, v in test.get(m, {}).get("per_workload", {}).items()}
                                   for m in SCORES.values()},
                     "seconds": _clean(r["metrics"].get("bench", {}).get("seconds")),
                     "command": "python -m simulator.train " + " ".join(r["argv"])})
    return rows


def task_weights(summary: Dict[str, Any], axis: str, held: str) -> Dict[str, float]:
    """Each held-out task's weight in TenSet's top-k score: its calls in the held-out network
    and its batch variants (network axis), its calls in all networks (operator-kind axis)."""
    return {t["key"]: float(held_calls(t, held) if axis == "network" else t["weight"])
            for t in held_tasks(summary, axis, held)}


def add_scores(rows: List[Dict[str, Any]], summary: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Each row with TenSet's top-1 and top-5 score over its held-out tasks (None when its run
    reported no per-task fastest latency); a scored task missing from the task table is an error."""
    from simulator.metrics import topk_score

    for r in rows:
        weights = task_weights(summary, r["axis"], r["held"])
        best = r.pop("best_ms", {}) or {}
        for score, slowdown in SCORES.items():
            tasks = [t for t in best if best[t] is not None and r["slowdowns"][slowdown].get(t) is not None]
            unknown = [t for t in tasks if t not in weights]
            if unknown:
                raise SystemExit(f"{r['command']}: task {unknown[0]} is not a held-out task of {r['held']} in "
                                 f"the dataset's summary.json")
            r[score] = topk_score([best[t] for t in tasks], [r["slowdowns"][slowdown][t] for t in tasks],
                                  [weights[t] for t in tasks]) if tasks else None
        r.pop("slowdowns")
    return rows


def run(args) -> Dict[str, Any]:
    if args.networks_data is None:
        from datasets.networks import default_dataset

        args.networks_data = os.path.relpath(default_dataset())
    summary = dataset_summary(args.networks_data)
    digest = dataset_digest(args.networks_data)
    planned = [dict(job, data=run_data(digest, job["shipped"])) for job in jobs(args, summary)]
    log(f"networks: {len(planned)} training runs")
    kept = os.path.join(args.results, result_stem(args.networks_data) + KEPT_SUFFIX)
    rows = add_scores(result_rows(run_many(planned, args.parallel, args.device, kept)), summary)
    stem = result_stem(args.networks_data, args.networks_epochs)
    rows, protocol = with_earlier_rows(args.results, f"{stem}.json", digest, rows, protocol_of(args, summary))
    ceilings = {f"{axis}:{held}": {**ceiling_of(held_tasks(summary, axis, held)),
                                   "corrected": ceiling_of(held_tasks(summary, axis, held), "tau_corrected")["tau"]}
                for axis, held in {(r["axis"], r["held"]) for r in rows}}
    worst = {key: min((t["tau"] for t in held_tasks(summary, *key.split(":", 1)) if t.get("tau") is not None),
                      default=None) for key in ceilings}
    out = {"rows": rows, "ceilings": ceilings, "ceiling_worst_task": worst, "dataset": args.networks_data,
           "digest": digest, "agreement_raw": summary.get("agreement_raw"),
           "agreement_corrected": summary.get("agreement_corrected"), "not_held_kinds": unheld_kinds(summary),
           "knob_cut": knob_cuts(args.networks_data), "protocol": protocol}
    out["kind_summary"] = kind_summary(out)
    os.makedirs(args.results, exist_ok=True)
    write_json(os.path.join(args.results, f"{stem}.json"), out)
    columns = ["axis", "held", "model", "shipped", "seed", "tasks", *METRICS]
    write_csv(os.path.join(args.results, f"{stem}.csv"), columns, [[r[k] for k in columns] for r in rows])
    return out


def protocol_of(args, summary: Dict[str, Any]) -> Dict[str, Any]:
    return {"epochs": args.networks_epochs, "seeds": list(args.networks_seeds), "loss": args.networks_loss,
            "models": args.networks_models, "kind_models": one_axis_models(args, "kind_models"),
            "network_models": one_axis_models(args, "network_models"), "combined_models": args.combined_models,
            "valid_records": sum(t["valid"] for t in summary["tasks"]), "tasks": len(summary["tasks"])}


ROW_KEY = ("axis", "held", "model", "shipped", "seed")
MERGED_LISTS = ("seeds", "models", "kind_models", "network_models", "combined_models")


def with_earlier_rows(results: str, name: str, digest: str, rows: List[Dict[str, Any]],
                      protocol: Dict[str, Any]) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
    """This run's rows and protocol, joined by the rows of the table `name` already in
    `results` that this run did not make, when that table is of the same data (its digest)
    and loss: a run of some models, seeds or held-out sets adds to the table rather than
    replacing it. A table of other data or another loss (or one that does not say) is
    replaced, and the log says so."""
    path = os.path.join(results, name)
    try:
        earlier = load_json(results, name)
        theirs = {} if earlier is None else earlier.get("protocol", {})
    except (OSError, ValueError, AttributeError) as e:
        raise SimulatorError(f"{path}: not a results table of this benchmark ({e}); move it away or give "
                             f"another --results") from None
    if earlier is None:
        return rows, protocol
    if earlier.get("digest") != digest or theirs.get("loss") != protocol["loss"]:
        log(f"networks: {path} holds runs of other data or another loss, or does not say which; this run's "
            f"table replaces it")
        return rows, protocol
    made = {tuple(r[k] for k in ROW_KEY) for r in rows}
    kept = [r for r in earlier.get("rows", []) if tuple(r[k] for k in ROW_KEY) not in made]
    if kept:
        log(f"networks: {len(kept)} rows of {path} this run did not make are kept "
            f"(models {', '.join(sorted({r['model'] for r in kept}))})")
    union = {k: list(dict.fromkeys([*theirs.get(k, []), *protocol[k]])) for k in MERGED_LISTS}
    union["seeds"] = sorted(union["seeds"])
    # the benchmark's own order (seed, the network axis, its shipped-data runs, the kind axis),
    # held-out sets and models where the earlier table had them, new ones after
    seen = [*earlier.get("rows", []), *rows]
    place = {part: {v: i for i, v in enumerate(dict.fromkeys(r[part] for r in seen))} for part in ("held", "model")}
    merged = sorted(kept + rows, key=lambda r: (r["seed"], r["axis"] == "kind", r["shipped"],
                                                place["held"][r["held"]], place["model"][r["model"]]))
    return merged, {**protocol, **union}


def dataset_name(dataset: str) -> str:
    """A dataset folder's name: `datasets/networks_znver4/` → `networks_znver4`."""
    return os.path.basename(os.path.normpath(dataset))


def result_stem(dataset: str, epochs: int = DEFAULT_EPOCHS) -> str:
    """Results are kept per dataset (one CPU's measurements never replace another's) and
    epoch count: `datasets/networks_znver4` → `networks_znver4` (.json, .csv); at 60 epochs
    `networks_znver4_60_epochs`."""
    name = dataset_name(dataset)
    name = name if name.startswith(RESULT_PREFIX) else RESULT_PREFIX + name
    return name if epochs == DEFAULT_EPOCHS else f"{name}_{epochs}_epochs"


def result_label(res: Dict[str, Any]) -> str:
    """How tables name a results file: its dataset, and its epochs when not the default."""
    epochs = res.get("protocol", {}).get("epochs", DEFAULT_EPOCHS)
    return f"`{dataset_name(res['dataset'])}`" + ("" if epochs == DEFAULT_EPOCHS else
                                                   f", {epochs} epoch{'s' * (epochs != 1)}")


def load_results(results: str) -> List[Dict[str, Any]]:
    """Every dataset's results in RESULTS, the dataset with the most valid records first, and
    of one dataset the models trained longest first."""
    found = []
    for path in glob.glob(os.path.join(results, f"{RESULT_PREFIX}*.json")):
        with open(path, encoding="utf-8") as f:
            found.append(json.load(f))
    return sorted(found, key=lambda res: (-(res.get("protocol", {}).get("valid_records") or 0),
                                          -(res.get("protocol", {}).get("epochs") or 0)))


def knob_cuts(data: str) -> Dict[str, int]:
    """How many of the dataset's training records have trace decision values beyond the
    knob vector's width (`extract.autotvm.knob_features.count_trace_cuts`; cut, and counted here)."""
    from datasets.networks import open_text, training_databases
    from extract.autotvm.knob_features import count_trace_cuts
    from extract.metaschedule.database import database_files

    total: Dict[str, int] = {}
    for db in training_databases(data):
        with open_text(database_files(db)[1]) as f:
            for k, v in count_trace_cuts(f).items():
                total[k] = max(total.get(k, 0), v) if k == "max_values" else total.get(k, 0) + v
    return total


# ---------------------------------------------------------------- report
def seed_means(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One row per (axis, held-out, model, shipped): each metric's (mean, std, seeds) over the
    seeds that gave a value (rows of a results file without seeds count as one seed)."""
    groups: Dict[tuple, List[Dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["axis"], r["held"], r["model"], r["shipped"]), []).append(r)
    return [{"axis": a, "held": h, "model": m, "shipped": sh, "tasks": max(r["tasks"] for r in rs),
             "seeds": len(rs), **{k: mean_std(r.get(k) for r in rs) for k in METRICS}}
            for (a, h, m, sh), rs in groups.items()]


def _cell(stat: tuple, metric: str) -> str:
    mean, std, n = stat
    return fmt(mean, metric, std if n > 1 else None)


def _table(res: Dict[str, Any], axis: str, shipped: bool) -> List[str]:
    rows = [r for r in seed_means(res["rows"]) if r["axis"] == axis and r["shipped"] == shipped]
    helds = list(dict.fromkeys(r["held"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    header = ["held out", "tasks", "ceiling τ (raw / corrected)"] + [f"{m} τ" for m in models] + \
             [f"{m} top-1 / top-5 score, pairwise acc." for m in models] + \
             [f"{m} top-1 / top-5 slowdown, top-5 recall" for m in models]
    out = []
    for held in helds:
        by_model = {r["model"]: r for r in rows if r["held"] == held}
        c = res["ceilings"].get(f"{axis}:{held}", {})
        ceiling = f"{fmt(c.get('tau'), 'kendall_tau')} / {fmt(c.get('corrected'), 'kendall_tau')} ({c.get('tasks', 0)})"
        tasks = max((r["tasks"] for r in by_model.values()), default=0)
        out.append([held, tasks, ceiling]
                   + [_cell(by_model[m]["kendall_tau"], "kendall_tau") if m in by_model else "–" for m in models]
                   + [" / ".join(_cell(by_model[m][k], k) for k in ("top1_score", "top5_score", "opa"))
                      if m in by_model else "–" for m in models]
                   + [" / ".join(fmt(by_model[m][k][0], k) for k in ("top1_slowdown", "top5_slowdown", "top5_recall"))
                      if m in by_model else "–" for m in models])
    return [markdown_table(header, out, "l" + "r" * (len(header) - 1)), ""]


def _task_means(rows: Sequence[Dict[str, Any]], metric: str) -> Dict[str, float]:
    """Per held-out task, the mean of `metric` over the seeds that gave a value."""
    by_task: Dict[str, List[float]] = {}
    for r in rows:
        for task, values in (r.get("per_task") or {}).items():
            if values.get(metric) is not None:
                by_task.setdefault(task, []).append(values[metric])
    return {t: sum(v) / len(v) for t, v in by_task.items()}


def _extreme(values: Sequence[Optional[float]], worst) -> Optional[float]:
    v = [x for x in values if x is not None]
    return worst(v) if v else None


def kind_summary(res: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Leave-one-operator-kind-out, one row per model: over the held-out
    kinds it has a value on, the mean and worst (lowest) of the kinds' mean τ, the mean and
    worst (highest) of their mean top-5 slowdowns, and the worst single task of each (the
    lowest task τ, the highest task top-5 slowdown; each task's value a mean over seeds).
    The first row is the noise ceiling (pass 1 vs pass 2 τ, raw) of the same kinds."""
    means = [r for r in seed_means(res["rows"]) if r["axis"] == "kind" and not r["shipped"]]
    kinds = list(dict.fromkeys(r["held"] for r in means))
    ceilings = [res["ceilings"].get(f"kind:{k}", {}) for k in kinds]
    worst_tasks = [(res.get("ceiling_worst_task") or {}).get(f"kind:{k}") for k in kinds]
    out = [{"model": "noise ceiling", "objective": "pass 1 vs pass 2", "kinds": sum(c.get("tau") is not None
                                                                                    for c in ceilings),
            "mean_tau": _mean([c.get("tau") for c in ceilings]), "worst_tau": _extreme([c.get("tau") for c in ceilings], min),
            "worst_task_tau": _extreme(worst_tasks, min),
            "mean_top5": None, "worst_top5": None, "worst_task_top5": None}]
    for model in dict.fromkeys(r["model"] for r in means):
        mine = [r for r in means if r["model"] == model]
        raw = [r for r in res["rows"] if r["axis"] == "kind" and not r["shipped"] and r["model"] == model]
        taus = [r["kendall_tau"][0] for r in mine]
        top5 = [r["top5_slowdown"][0] for r in mine]
        task_tau, task_top5 = _task_means(raw, "kendall_tau"), _task_means(raw, "top5_slowdown")
        out.append({"model": model, "objective": "/".join(dict.fromkeys(r.get("objective", "") for r in raw)),
                    "kinds": sum(t is not None for t in taus), "mean_tau": _mean(taus),
                    "worst_tau": _extreme(taus, min), "worst_task_tau": _extreme(list(task_tau.values()), min),
                    "mean_top5": _mean(top5), "worst_top5": _extreme(top5, max),
                    "worst_task_top5": _extreme(list(task_top5.values()), max)})
    return out


def _mean(values: Sequence[Optional[float]]) -> Optional[float]:
    v = [x for x in values if x is not None]
    return sum(v) / len(v) if v else None


def _summary_table(res: Dict[str, Any]) -> List[str]:
    rows = kind_summary(res)
    if len(rows) < 2:
        return []
    body = [[r["model"], r["objective"] or "–", r["kinds"], fmt(r["mean_tau"], "kendall_tau"),
             fmt(r["worst_tau"], "kendall_tau"), fmt(r["worst_task_tau"], "kendall_tau"),
             fmt(r["mean_top5"], "top5_slowdown"), fmt(r["worst_top5"], "top5_slowdown"),
             fmt(r["worst_task_top5"], "top5_slowdown")] for r in rows]
    header = ["model", "trained with", "kinds", "mean τ", "worst kind τ", "worst task τ", "mean top-5 slowdown",
              "worst kind top-5", "worst task top-5"]
    cut = res.get("knob_cut") or {}
    note = (f" Knob vectors of the MetaSchedule records (`extract.autotvm.knob_features.trace_knobs`): "
            f"{cut.get('cut_records', 0)} of {cut.get('records', 0)} traces had decision values cut "
            f"({cut.get('cut_values', 0)} values; at most {cut.get('max_values', 0)} per trace)." if cut else "")
    return ["**Leave one operator kind out, summary per model**: over the held-out kinds, the mean "
            "and the worst of the kinds' mean τ and top-5 slowdown, and the worst single task (τ and top-5 "
            "slowdown of a task are means over seeds); the noise ceiling is the τ between the dataset's two "
            "measuring passes over the same kinds (raw). `knob-xgb` reads the trace's decisions in trace order "
            "plus the workload's shape: a position means a different decision in another operator kind's "
            "design space, so it has nothing to transfer; `itervar-xgb` reads AutoTVM's loop-context features of "
            "the lowered program." + note, "",
            markdown_table(header, body, "llrrrrrrr"), ""]


def _combined(res: Dict[str, Any]) -> List[str]:
    means = seed_means(res["rows"])
    alone = {(r["held"], r["model"]): r for r in means if r["axis"] == "network" and not r["shipped"]}
    rows = []
    for r in (r for r in means if r["shipped"]):
        base = alone.get((r["held"], r["model"]))
        if base is None:
            continue
        before, after = base["kendall_tau"][0], r["kendall_tau"][0]
        delta = None if before is None or after is None else after - before
        rows.append([r["held"], r["model"], _cell(base["kendall_tau"], "kendall_tau"),
                     _cell(r["kendall_tau"], "kendall_tau"), "–" if delta is None else f"{delta:+.3f}",
                     fmt(base["top1_slowdown"][0], "top1_slowdown"), fmt(r["top1_slowdown"][0], "top1_slowdown")])
    if not rows:
        return []
    return ["**Networks alone vs with the shipped conv2d templates added to training** (held-out network; "
            "the shipped ResNet-18 conv2d workloads belong to no network, so they only ever train):", "",
            markdown_table(["held out", "model", "τ alone", "τ + shipped", "Δτ", "top-1 alone", "top-1 + shipped"],
                           rows, "llrrrrr"), ""]


def _not_held(res: Dict[str, Any]) -> List[str]:
    kinds = res.get("not_held_kinds") or {}
    if not kinds:
        return []
    parts = [f"{k} ({v['tasks']} tasks, {v['valid']} records, at most {v['max_per_task']} per task)"
             for k, v in sorted(kinds.items())]
    return [f"Not held out (no task with more than 5 valid records, so no τ or top-5 recall; they only "
            f"ever train): {', '.join(parts)}.", ""]


def _protocol_line(res: Dict[str, Any]) -> str:
    p = res.get("protocol", {})
    seeds = p.get("seeds", [p["seed"]] if "seed" in p else [])
    used = max((r.get("samples", 0) for r in res["rows"] if not r["shipped"]), default=0)
    spread = "mean ± standard deviation over the seeds" if len(seeds) > 1 else "one seed"
    return (f"`{res['dataset']}`: {p.get('tasks')} tasks, {p.get('valid_records')} valid records when this ran; the "
            f"runs below trained and scored on {used} samples of it. Seeds {', '.join(map(str, seeds))} ({spread}; "
            f"slowdowns and recall are means over seeds), "
            f"{epochs_phrase(p.get('epochs'), [r['model'] for r in res['rows']])}, loss `{p.get('loss', 'huber')}` "
            f"(a ranking loss within each task: only the order of a task's schedules is scored; xgb then "
            f"uses rank:pairwise; the `-reg` xgb models keep squared error on log runtime, see each "
            f"summary row's \"trained with\"), every run pinned to one core "
            f"(`python -m benchmarks.networks`; every command in "
            f"`docs/results/{result_stem(res['dataset'], p.get('epochs', DEFAULT_EPOCHS))}.json`). "
            f"Metrics are "
            f"means over the held-out tasks with a value; the ceiling is the mean per-task τ between the "
            f"dataset's two measuring passes over those tasks (raw / drift-corrected; tasks with a τ in "
            f"brackets).")


def report_section(res: Dict[str, Any]) -> List[str]:
    raw, cor = res.get("agreement_raw") or {}, res.get("agreement_corrected") or {}
    lines = [f"## Cross-network and cross-operator generalisation (MetaSchedule networks dataset "
             f"{result_label(res)})", "",
             _protocol_line(res), ""]
    if raw.get("tasks"):
        lines += [f"Whole dataset, pass 1 vs pass 2: mean τ {fmt(raw.get('mean_tau'), 'kendall_tau')} raw, "
                  f"{fmt(cor.get('mean_tau'), 'kendall_tau')} drift-corrected; median |Δt|/t "
                  f"{fmt(raw.get('median_rel_diff'), 'mape')} raw, {fmt(cor.get('median_rel_diff'), 'mape')} "
                  f"corrected ({raw.get('records')} records of {raw.get('tasks')} tasks re-measured).", ""]
    else:
        lines += ["No second (re-measure) pass in this dataset yet: no ceiling.", ""]
    kinds = any(r["axis"] == "kind" for r in res["rows"])   # none: run without the operator-kind axis
    lines += ["**Leave one network out**", "", *_table(res, "network", False),
              *(["**Leave one operator kind out**", "", *_table(res, "kind", False)] if kinds else []), *_not_held(res),
              *_summary_table(res), *_combined(res)]
    return lines


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.networks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    add_run_options(ap)
    args = ap.parse_args(argv)
    return run_and_report(args, run, report_section)


if __name__ == "__main__":
    sys.exit(main())
