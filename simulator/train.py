"""Train a runtime simulator and evaluate it on validation and test workloads.

    python -m simulator.train --split cross-workload [--model gcn] [--loss huber]
        [--epochs N] [--train-fraction F] [--train-task-fraction T] [--seed S] [--out DIR] [--resume]

Reads the data (`--data`: the shipped dataset, AutoTVM logs or folders of them, or
folders of .npz samples), splits it by workload, trains with early stopping on the
validation workloads' Kendall τ, keeps an atomic checkpoint in OUT after every epoch
(`--resume` continues a killed run from it), and writes OUT/metrics.json:

    {"test": {"kendall_tau": {"mean": …, "count": k, "per_workload": {…}}, …}, "val": {…},
     "config": {…}, "run": {…}, "checkpoint": {"weights_sha256": …, "epoch": …, "step": …},
     "code": {"commit": …, "dirty": …}}

(`count`: the workloads the mean is over; `checkpoint`: the weights the metrics come
from; `code`: the git commit of the checkout that ran, and whether its tracked files were
edited — null from an installed copy). OUT is held by this process for the whole run (a
second writer exits 2), every flag is range-checked at parse time, and `--resume --epochs
N` trains on to epoch N or refuses (simulator/README.md, "Runs").

Same seed and thread count → the same metrics.json. `--model xgb` and `--model
curve-mlp` train the baselines through the same command.

XLA / TpuGraphs: the same models and loop on a TpuGraphs collection, read lazily
(`simulator.data.tpugraphs`: memory strategy, metrics)::

    python -m simulator.train --data tpugraphs:tile:xla --split official --data-root ROOT
    python -m simulator.train --data tpugraphs:layout:xla:random --data-root ROOT
    python -m simulator.train --data tpugraphs:layout:xla:random --data-root ROOT --model gcn [--join late]

Flags not given then default per collection: `--model gcn` (tile) / `layout-sum` (layout),
`--loss listmle` (`layout-sum`: `pairwise-hinge`, `--members 3`, `--keep-weights last`), `--split official`,
`--feature-transform log1p`, `--select-metric kaggle_score` (tile) / `kendall_tau`
(layout), `--batch-size` 8 graphs (tile) / 2 (layout), `--configs-per-graph` 16 / 8,
`--keep-hops` whole graph (tile) / `--depth` (layout).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from extract.cli import (COUNT, FRACTION, LEARNING_RATE, POSITIVE, PROBABILITY, SEED, SHARE, Float, Int,
                       output_folder)
from extract.provenance import code_version
from .checkpoint import CHECKPOINT_NAME, load_checkpoint
from .config import SHIPPED, ModelInfo, Normalization, TrainConfig, legacy_layer_options
from .data.features import check_spec, feature_set
from .data.sources import DataKind, RunData, data_kind
from .data.splits import SPLITS
from .distributed import DEVICES, Cluster, exit_rank, in_torchrun, start, stop
from .engine import locked_output, setup_determinism, write_json
from .losses import LOSSES
from .metrics import METRICS, format_table
from .models.costmodel import CostModel, build_cost_model, cost_model_class, model_names, reads_graphs
from .models.layers import POOLINGS, PROPAGATIONS
from .registry import SimulatorError, run_cli
from .sgd import RunContext, check_resume

# flags that say where/how to run, not what the run is: kept out of the recorded config
RUN_FLAGS = ("out", "resume", "overwrite", "device")
# what a run writes into OUT (cleared by --overwrite; metrics.json exists only while it
# describes the checkpoint beside it)
METRICS_NAME = "metrics.json"
RUN_FILES = (CHECKPOINT_NAME, METRICS_NAME)
# flags that make up the propagation layer's options (config.model.layer_options)
LAYER_FLAGS = {"heads": "heads", "cheb_k": "k"}

Add = Callable[..., Any]


# ---------------------------------------------------------------- command line
def _data_flags(add: Add) -> None:
    add("--data", nargs="+", default=[SHIPPED],
        help="'shipped' (default), AutoTVM log files/folders, folders of .npz samples, or "
             "tpugraphs:COLLECTION (tile:xla, layout:{xla,nlp}:{random,default}) with --data-root")
    add("--data-root", default=None, help="tpugraphs: folder holding npz/{tile,layout}/…/{train,valid,test}/*.npz")
    add("--cache-dir", default=None, help="where extracted samples are cached")
    add("--split", default="cross-workload", help=f"one of: {', '.join(SPLITS.names())} (tpugraphs: official)")
    add("--train-workloads", nargs="+", default=None, metavar="W")
    add("--test-workloads", nargs="+", default=None, metavar="W")
    add("--test-network", default=None, metavar="NET",
        help="leave-network-out: the held-out network (e.g. bert; the networks dataset's tags)")
    add("--test-op-kind", default=None, metavar="KIND",
        help="leave-op-kind-out: the held-out operator kind (e.g. softmax)")
    add("--val-fraction", type=SHARE, default=0.2,
        help="cross-workload: share of each training workload's configs for validation")
    add("--feature-transform", choices=["none", "log1p"], default="none",
        help="log1p: sign(x)·log(1+|x|) on node features, vectors and tile configs before "
             "standardising (the TIR extractor's features are already log-scaled)")
    add("--train-fraction", type=FRACTION, default=1.0,
        help="seeded share of each training workload's configs to train on (learning curve over records)")
    add("--train-task-fraction", type=FRACTION, default=1.0,
        help="seeded share of the training workloads to train on, whole (learning curve over tasks)")
    add("--configs-per-graph", type=COUNT, default=None,
        help="tpugraphs: measured configs of each graph drawn per step (default 16 tile, 8 layout)")
    add("--keep-hops", type=Int(-1), default=None,
        help="tpugraphs layout: keep configurable nodes and their K-hop neighbourhood "
             "(default: --depth; -1: the whole graph)")
    add("--max-batch-nodes", type=COUNT, default=2_000_000,
        help="tpugraphs evaluation: at most this many nodes (graph copies × nodes) per forward pass")
    add("--graph-cache-mb", type=Float(0, 2 ** 30), default=1024,
        help="tpugraphs: memory for prepared (pruned) graphs kept between steps (0: none kept)")


def _model_flags(add: Add) -> None:
    add("--model", default="gcn", help=f"one of: {', '.join(model_names())}")
    add("--width", type=COUNT, default=64)
    add("--depth", type=COUNT, default=3, help="propagation layers")
    add("--type-dim", type=COUNT, default=32, help="node-type embedding width")
    add("--dropout", type=PROBABILITY, default=0.0, help="0 ≤ p < 1")
    add("--no-residual", dest="residual", action="store_false")
    add("--norm", choices=["layer", "none"], default="layer")
    add("--pooling", default="mean", help=f"one of: {', '.join(POOLINGS.names())}")
    add("--heads", type=COUNT, default=None, help="gat: attention heads (default 4; layer option heads)")
    add("--cheb-k", type=COUNT, default=None, help="cheb: polynomial order (default 3; layer option k)")
    add("--layer-option", action="append", default=[], metavar="KEY=VALUE",
        help="an option of the propagation layer (repeatable); unknown options are an error")
    add("--join", choices=["early", "late"], default="early",
        help="XLA config features: early (onto the nodes: every node for tile, the "
             "configurable nodes for layout) or late (at the pooled graph embedding)")
    add("--xgb-objective", choices=["auto", "reg", "rank"], default="auto",
        help="xgb: auto: rank for a ranking --loss, else reg")
    add("--features", default=None, metavar="SET[,±COLUMN…]",
        help="node-feature columns the model reads: base (the TIR walk's columns, tir-ast-v1's), all (+ the "
             "context columns), full (all + the derived columns), invariant (all but the size-scaling ones), "
             "then +COLUMN / -COLUMN changes (simulator.data.features; default: the model's, else full on "
             "MetaSchedule databases, base on other data)")
    add("--members", type=COUNT, default=1,
        help="an ensemble: this many networks, each initialised on its own, trained side by side on the "
             "same batches, their mean predicted (models that support it: layout-sum, whose default is 3)")


def _fit_flags(add: Add) -> None:
    add("--loss", default="huber", help=f"one of: {', '.join(LOSSES.names())} (default huber; listmle for tpugraphs)")
    add("--huber-delta", type=POSITIVE, default=1.0, help="huber: δ in log-runtime units")
    add("--temperature", type=POSITIVE, default=1.0, help="ranking losses: score = −ŷ/T")
    add("--epochs", type=COUNT, default=60)
    add("--batch-size", type=COUNT, default=64, help="graphs per batch (tpugraphs default: 8 tile, 2 layout)")
    add("--group-size", type=COUNT, default=16, help="ranking losses: configs of one workload per group in a batch")
    add("--lr", type=LEARNING_RATE, default=2e-3, help="AdamW learning rate, 0 < lr ≤ 100")
    add("--weight-decay", type=Float(0, 10), default=1e-4, help="AdamW weight decay, 0 ≤ λ ≤ 10")
    add("--grad-clip", type=POSITIVE, default=1.0)
    add("--patience", type=COUNT, default=15, help="early stopping: epochs without a better val score")
    add("--keep-weights", choices=["best", "last"], default="best",
        help="the weights a run ends with: best (the epoch with the best val score; early stopping after "
             "--patience epochs without one) or last (every epoch trained, val still scored; default last "
             "for layout-sum)")
    add("--select-metric", default="kendall_tau", help="validation metric (mean over workloads) for early stopping")
    add("--eval-batch-size", type=COUNT, default=256, help="configs per evaluation forward pass")
    add("--seed", type=SEED, default=0)
    add("--threads", type=COUNT, default=min(2, os.cpu_count() or 1),
        help="torch/DGL threads (results are reproducible for a fixed count)")
    add("--xgb-rounds", type=COUNT, default=500, help="xgb: boosting rounds")
    add("--xgb-eta", type=FRACTION, default=0.3, help="xgb: learning rate")
    add("--xgb-early-stopping", type=COUNT, default=25, help="xgb: rounds without a better validation score")


def _run_flags(add: Add) -> None:
    add("--out", type=output_folder, default=None, help="run folder (default runs/SPLIT-MODEL-LOSS-seedS[-fF])")
    add("--resume", action="store_true", help="continue the run in OUT from its checkpoint")
    add("--overwrite", action="store_true", help="replace a run already in OUT")
    add("--device", choices=DEVICES, default="cpu",
        help="train and score on this device (cuda: the GPU of this process, LOCAL_RANK under torchrun)")


FLAG_GROUPS = (("data", _data_flags), ("model", _model_flags), ("training", _fit_flags), ("run", _run_flags))


def build_parser(explicit_only: bool = False) -> argparse.ArgumentParser:
    """The CLI. `explicit_only`: the same flags with no defaults (argparse.SUPPRESS), so
    that parsing yields only the flags given on the command line."""
    ap = argparse.ArgumentParser(prog="python -m simulator.train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    for title, flags in FLAG_GROUPS:
        group = ap.add_argument_group(title)

        def add(*names: str, _group=group, **kw: Any) -> None:
            if explicit_only:
                kw["default"] = argparse.SUPPRESS
            _group.add_argument(*names, **kw)
        flags(add)
    return ap


def explicit_flags(argv: Optional[Sequence[str]]) -> Dict[str, Any]:
    """The flags given on the command line (not defaults), by dest."""
    return vars(build_parser(explicit_only=True).parse_args(argv))


def layer_options_of(flags: Dict[str, Any]) -> Dict[str, Any]:
    """The propagation layer's options given as flags (`--heads`, `--cheb-k`, `--layer-option`)."""
    options = {option: flags[flag] for flag, option in LAYER_FLAGS.items() if flags.get(flag) is not None}
    for pair in flags.get("layer_option") or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SimulatorError(f"--layer-option {pair!r}: expected KEY=VALUE")
        options[key] = value
    return options


def config_from_flags(flags: Dict[str, Any]) -> TrainConfig:
    return TrainConfig.from_dict(dict(flags, layer_options=layer_options_of(flags)))


def validate(config: TrainConfig) -> TrainConfig:
    """Fail on unknown names before any data is read; the layer's options completed."""
    cost_model_class(config.model.model)
    LOSSES.get(config.fit.loss)
    POOLINGS.get(config.model.pooling)
    SPLITS.get(config.data.split)
    METRICS.get(config.fit.select_metric)
    if config.fit.epochs < 1 or config.fit.batch_size < 1:
        raise SimulatorError("--epochs and --batch-size must be positive")
    config.model.features = check_spec(feature_set(config))  # recorded: the set this run reads
    options = config.model.layer_options
    if config.model.model in PROPAGATIONS:
        config.model.layer_options = PROPAGATIONS.get(config.model.model).resolve_options(options)
    elif options:
        raise SimulatorError(f"--model {config.model.model} has no propagation layer; its options "
                             f"({', '.join(options)}) do not apply")
    if config.model.join != "early" and config.model.model not in PROPAGATIONS:
        raise SimulatorError(f"--join {config.model.join}: --model {config.model.model} is no graph network "
                             f"joining config features; --join applies to the propagation models (e.g. --model gcn)")
    return config


def describe(config: TrainConfig) -> str:
    if config.model.model.endswith("xgb"):
        return f"{config.model.model}, objective {config.model.xgb_objective}"
    return f"{config.model.model}, {config.fit.loss} loss"


def default_out(config: TrainConfig, kind: DataKind) -> str:
    name = f"{kind.run_name(config)}-{config.model.model}-{config.fit.loss}-seed{config.seed}"
    if config.data.train_fraction < 1.0:
        name += f"-f{config.data.train_fraction:g}"
    if config.data.train_task_fraction < 1.0:
        name += f"-tasks{config.data.train_task_fraction:g}"
    return os.path.join("runs", name)


# ---------------------------------------------------------------- the run
def ignored_flags(given: Dict[str, Any], saved: Dict[str, Any]) -> List[str]:
    """Flags given to a resumed run that differ from its saved config (--epochs may change)."""
    options = saved.get("layer_options") or legacy_layer_options(saved)
    out = []
    for key, value in given.items():
        if key in RUN_FLAGS or key == "epochs":
            continue
        if key in LAYER_FLAGS or key == "layer_option":
            differs = any(str(v) != str(options.get(k)) for k, v in layer_options_of({key: value}).items())
        else:
            differs = value != saved.get(key)
        if differs:
            out.append(key)
    return sorted(out)


def clear_run(out: str) -> None:
    """--overwrite: remove the earlier run's files (and any temporaries a killed writer
    left), before anything of this run is written. Other files in OUT are kept."""
    removed = []
    for name in sorted(os.listdir(out)):
        if name in RUN_FILES or any(name.startswith(f".{f}.") and name.endswith(".partial") for f in RUN_FILES):
            os.remove(os.path.join(out, name))
            removed.append(name)
    if removed:
        print(f"{out}: removed the earlier run's {', '.join(removed)} (--overwrite)", file=sys.stderr)


def resume_state(out: str, flags: Dict[str, Any], given: Dict[str, Any],
                 cluster: Cluster = Cluster()) -> Optional[Dict[str, Any]]:
    """The checkpoint to continue from (None: a new run); refuses to overwrite a run,
    clears it with --overwrite (rank 0 of a distributed run). Called with OUT locked (by
    rank 0)."""
    ckpt_path = os.path.join(out, CHECKPOINT_NAME)
    holds_run = any(os.path.exists(os.path.join(out, name)) for name in RUN_FILES)
    state = None
    if flags["resume"] and flags["overwrite"]:
        raise SimulatorError("--resume continues the run in OUT, --overwrite replaces it: give one of them")
    if os.path.exists(ckpt_path) and flags["resume"]:
        state = load_checkpoint(ckpt_path)
        ignored = ignored_flags(given, state["config"])
        if "epoch" not in state and given.get("epochs", state["config"].get("epochs")) != state["config"].get("epochs"):
            ignored.append("epochs")  # not trained by epochs (xgb): the saved value stays
        if ignored:
            print(f"warning: --resume keeps the run's saved config; ignoring "
                  f"{', '.join('--' + k.replace('_', '-') for k in sorted(ignored))}", file=sys.stderr)
    elif holds_run and not flags["overwrite"] and not flags["resume"]:
        raise SimulatorError(f"{out} already holds a run: pass --resume to continue it, "
                             f"--overwrite to replace it, or another --out")
    elif flags["resume"] and cluster.is_main:
        print(f"{ckpt_path}: no checkpoint yet, starting the run", file=sys.stderr)
    if flags["overwrite"] and cluster.is_main:
        clear_run(out)
    return state


def resumed_config(state: Dict[str, Any], given: Dict[str, Any], ckpt_path: str) -> TrainConfig:
    """A resumed run's config: the saved one, with --epochs if given (and trainable: see
    `sgd.check_resume`, which refuses what would not be trained)."""
    saved = state["config"]
    epochs = given.get("epochs", saved["epochs"]) if "epoch" in state else saved["epochs"]
    check_resume(state, int(epochs), ckpt_path)  # before any work (the loop says what it extends)
    return TrainConfig.from_dict(saved).replace(epochs=epochs)


def evaluate_parts(model: CostModel, data: RunData, config: TrainConfig, out: str,
                   cluster: Cluster = Cluster()) -> Dict[str, Any]:
    """Metrics of the val and test parts (a part whose runtimes are withheld is skipped);
    the ranks of a distributed run score shares of each, rank 0 prints."""
    metrics: Dict[str, Any] = {}
    for part in ("val", "test"):
        if not len(data.parts[part]):
            continue
        result = cluster.evaluate(data.parts[part], model, config.fit.eval_batch_size)
        if not cluster.is_main:
            continue
        if not result:  # TpuGraphs test split with its runtimes withheld
            print(f"\n{part}: no measured configs (runtimes withheld); not scored — rank them with "
                  f"python -m simulator.predict {out} --kaggle-csv FILE", file=sys.stderr)
            continue
        metrics[part] = result
        print(format_table(result, f"\n{part} ({describe(config)})"))
    return metrics


def resolve_argv(argv: Optional[Sequence[str]]) -> Tuple[Dict[str, Any], Dict[str, Any], TrainConfig, DataKind]:
    """(flags, the flags given, the run's config, its data kind) of a command line: the
    data kind's defaults filled in, names checked; no data read."""
    flags, given = vars(build_parser().parse_args(argv)), explicit_flags(argv)
    config = config_from_flags(flags)
    kind = data_kind(config.data.data)
    return flags, given, validate(kind.resolve(config, set(given))), kind


def run(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """One training run: this process alone, or one rank of a torchrun run
    (`simulator.distributed`; rank 0 holds OUT and writes)."""
    flags, given, config, kind = resolve_argv(argv)
    out = flags["out"] or default_out(config, kind)
    cluster = start(flags["device"], graphs=reads_graphs(config.model.model))
    finished = False
    try:
        # one writer per run folder, for the whole run
        with locked_output(out) if cluster.is_main else contextlib.nullcontext():
            metrics = train_run(out, flags, given, config, kind, cluster)
        finished = True
        return metrics
    finally:
        stop(cluster, finished)


def train_run(out: str, flags: Dict[str, Any], given: Dict[str, Any], config: TrainConfig,
              kind: DataKind, cluster: Cluster = Cluster()) -> Dict[str, Any]:
    """The run in OUT (held by this process, or by rank 0): resume or start, fit,
    evaluate, write (rank 0)."""
    # ------------------------------------------------------------ config
    ckpt_path, metrics_path = os.path.join(out, CHECKPOINT_NAME), os.path.join(out, METRICS_NAME)
    state = resume_state(out, flags, given, cluster)
    if state is not None:  # a resumed run keeps its config; only --epochs may change
        config = resumed_config(state, given, ckpt_path)
    setup_determinism(config.seed, config.threads)

    # ------------------------------------------------------------ data and model
    data = kind.open_run(config, None if state is None else ModelInfo.from_dict(state["info"]))
    if cluster.is_main:
        print(data.summary + (f"; {cluster.world_size} processes" if cluster.distributed else ""), file=sys.stderr)
        if config.fit.keep_weights == "last" and "patience" in given:
            print(f"note: --patience {config.fit.patience} is not used: --keep-weights last trains every epoch "
                  f"and never stops early", file=sys.stderr)
    model = build_cost_model(config, data.info)
    model.place(cluster)
    model.set_normalization(data.parts["train"].normalization(model.batch_spec, config.seed) if state is None
                            else Normalization.from_dict(state["normalization"]))

    # ------------------------------------------------------------ fit, evaluate, write
    if cluster.is_main and os.path.exists(metrics_path):  # it only ever describes the checkpoint beside it
        os.remove(metrics_path)
    checkpoint = RunContext(ckpt_path, resume=state, cluster=cluster, base={
        "config": config.to_dict(), "info": data.info.to_dict(), "normalization": model.normalization.to_dict(),
        "split": data.split})
    summary = model.fit(data.parts["train"], data.parts["val"], checkpoint)
    scores = evaluate_parts(model, data, config, out, cluster)
    if not cluster.is_main:
        return {}
    metrics: Dict[str, Any] = {"config": config.to_dict(), "run": dict(
        summary, **{f"{part}_samples": len(names) for part, names in data.split.items()}),
        "checkpoint": checkpoint.record(), "code": code_version()}
    metrics.update(scores)
    write_json(metrics_path, metrics)
    print(f"\nwrote {metrics_path}", file=sys.stderr)
    return metrics


def main(argv: Optional[Sequence[str]] = None) -> int:
    code = run_cli(run, argv, interrupted_hint='continue with --resume')
    if in_torchrun():
        exit_rank(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
