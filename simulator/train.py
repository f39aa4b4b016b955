"""Train a runtime simulator and evaluate it on validation and test workloads.

    python -m simulator.train --split cross-workload [--model gcn] [--loss huber]
        [--epochs N] [--train-fraction F] [--seed S] [--out DIR] [--resume]

Reads the data (`--data`: the shipped dataset, AutoTVM logs or folders of them, or
folders of .npz samples), splits it by workload, trains with early stopping on the
validation workloads' Kendall τ, keeps an atomic checkpoint in OUT after every epoch
(`--resume` continues a killed run from it), and writes OUT/metrics.json:

    {"test": {"kendall_tau": {"mean": …, "per_workload": {…}}, …}, "val": {…},
     "config": {…}, "run": {…}}

Same seed and thread count → the same metrics.json. `--model xgb` and `--model
curve-mlp` train the baselines through the same command.

XLA / TpuGraphs: the same model and loop on a TpuGraphs collection, read lazily
(`simulator.tpugraphs`: memory strategy, metrics)::

    python -m simulator.train --data tpugraphs:tile:xla --split official --data-root ROOT
    python -m simulator.train --data tpugraphs:layout:xla:random --data-root ROOT [--join late]

Flags not given then default per collection: `--loss listmle`, `--split official`,
`--feature-transform log1p`, `--select-metric kaggle_score` (tile) / `kendall_tau`
(layout), `--batch-size` 8 graphs (tile) / 2 (layout), `--configs-per-graph` 16 / 8,
`--keep-hops` whole graph (tile) / `--depth` (layout).
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from typing import Any, Dict, Optional, Sequence

import numpy as np
import torch

from .batching import make_batch, batch_indices
from .checkpoint import CHECKPOINT_NAME, load_checkpoint, save_checkpoint
from . import tpugraphs as xla
from .data import SHIPPED, is_tpugraphs, load_data
from .engine import evaluate_items, model_info, prepare_samples, setup_determinism, write_json
from .layers import POOLINGS
from .losses import LOSSES, build_loss
from .metrics import METRICS, format_table, higher_is_better
from .model import build_model, model_names, normalization_stats
from .registry import SimulatorError, UnknownNameError, run_cli
from .splits import SPLITS, make_split

# flags that say where/how to run, not what the run is: kept out of the recorded config
RUN_FLAGS = ("out", "resume", "overwrite", "crash_after_steps")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m simulator.train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    d = ap.add_argument_group("data")
    d.add_argument("--data", nargs="+", default=[SHIPPED],
                   help="'shipped' (default), AutoTVM log files/folders, folders of .npz samples, or "
                        "tpugraphs:COLLECTION (tile:xla, layout:{xla,nlp}:{random,default}) with --data-root")
    d.add_argument("--data-root", default=None,
                   help="tpugraphs: folder holding npz/{tile,layout}/…/{train,valid,test}/*.npz")
    d.add_argument("--cache-dir", default=None, help="where extracted samples are cached")
    d.add_argument("--split", default="cross-workload",
                   help=f"one of: {', '.join(SPLITS.names())} (tpugraphs: official)")
    d.add_argument("--train-workloads", nargs="+", default=None, metavar="W")
    d.add_argument("--test-workloads", nargs="+", default=None, metavar="W")
    d.add_argument("--val-fraction", type=float, default=0.2,
                   help="cross-workload: share of each training workload's configs for validation")
    d.add_argument("--feature-transform", choices=["none", "log1p"], default="none",
                   help="log1p: sign(x)·log(1+|x|) on node features and vectors before "
                        "standardising (the TIR extractor's features are already log-scaled)")
    d.add_argument("--train-fraction", type=float, default=1.0,
                   help="seeded share of the training set to train on (data-efficiency sweep)")
    d.add_argument("--configs-per-graph", type=int, default=None,
                   help="tpugraphs: measured configs of each graph drawn per step (default 16 tile, 8 layout)")
    d.add_argument("--keep-hops", type=int, default=None,
                   help="tpugraphs layout: keep configurable nodes and their K-hop neighbourhood "
                        "(default: --depth; -1: the whole graph)")
    d.add_argument("--max-batch-nodes", type=int, default=2_000_000,
                   help="tpugraphs evaluation: at most this many nodes (graph copies × nodes) per forward pass")
    d.add_argument("--graph-cache-mb", type=float, default=1024,
                   help="tpugraphs: memory for prepared (pruned) graphs kept between steps")

    m = ap.add_argument_group("model")
    m.add_argument("--model", default="gcn", help="one of: gcn, sage, gat, cheb, mlp, curve-mlp, xgb")
    m.add_argument("--width", type=int, default=64)
    m.add_argument("--depth", type=int, default=3, help="propagation layers")
    m.add_argument("--type-dim", type=int, default=32, help="node-type embedding width")
    m.add_argument("--dropout", type=float, default=0.0)
    m.add_argument("--no-residual", dest="residual", action="store_false")
    m.add_argument("--norm", choices=["layer", "none"], default="layer")
    m.add_argument("--pooling", default="mean", help=f"one of: {', '.join(POOLINGS.names())}")
    m.add_argument("--heads", type=int, default=4, help="gat: attention heads")
    m.add_argument("--cheb-k", type=int, default=3, help="cheb: polynomial order")
    m.add_argument("--join", choices=["early", "late"], default="early",
                   help="XLA config features: early (onto the nodes: every node for tile, the "
                        "configurable nodes for layout) or late (at the pooled graph embedding)")

    t = ap.add_argument_group("training")
    t.add_argument("--loss", default="huber",
                   help=f"one of: {', '.join(LOSSES.names())} (default huber; listmle for tpugraphs)")
    t.add_argument("--huber-delta", type=float, default=1.0, help="huber: δ in log-runtime units")
    t.add_argument("--temperature", type=float, default=1.0, help="ranking losses: score = −ŷ/T")
    t.add_argument("--epochs", type=int, default=60)
    t.add_argument("--batch-size", type=int, default=64,
                   help="graphs per batch (tpugraphs default: 8 tile, 2 layout)")
    t.add_argument("--group-size", type=int, default=16,
                   help="ranking losses: configs of one workload per group in a batch")
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--weight-decay", type=float, default=1e-4)
    t.add_argument("--grad-clip", type=float, default=1.0)
    t.add_argument("--patience", type=int, default=15, help="early stopping: epochs without a better val score")
    t.add_argument("--select-metric", default="kendall_tau",
                   help="validation metric (mean over workloads) for early stopping")
    t.add_argument("--eval-batch-size", type=int, default=256, help="configs per evaluation forward pass")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1),
                   help="torch/DGL threads (results are reproducible for a fixed count)")

    x = ap.add_argument_group("xgb baseline")
    x.add_argument("--xgb-objective", choices=["auto", "reg", "rank"], default="auto",
                   help="auto: rank for a ranking --loss, else reg")
    x.add_argument("--xgb-rounds", type=int, default=500)
    x.add_argument("--xgb-eta", type=float, default=0.3)
    x.add_argument("--xgb-early-stopping", type=int, default=25)

    r = ap.add_argument_group("run")
    r.add_argument("--out", default=None, help="run folder (default runs/SPLIT-MODEL-LOSS-seedS[-fF])")
    r.add_argument("--resume", action="store_true", help="continue the run in OUT from its checkpoint")
    r.add_argument("--overwrite", action="store_true", help="replace a run already in OUT")
    r.add_argument("--crash-after-steps", type=int, default=0, help=argparse.SUPPRESS)  # test hook: SIGKILL self
    return ap


def explicit_flags(argv: Optional[Sequence[str]]) -> Dict[str, Any]:
    """The flags given on the command line (not defaults)."""
    parser = build_parser()
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    return vars(parser.parse_args(argv))


def validate(config: Dict[str, Any]) -> None:
    """Fail on unknown names before any data is read."""
    if config["model"] not in model_names():
        raise UnknownNameError(f"unknown model {config['model']!r} (known: {', '.join(model_names())})")
    LOSSES.get(config["loss"])
    POOLINGS.get(config["pooling"])
    SPLITS.get(config["split"])
    METRICS.get(config["select_metric"])
    if config["epochs"] < 1 or config["batch_size"] < 1:
        raise SimulatorError("--epochs and --batch-size must be positive")


def describe(config: Dict[str, Any]) -> str:
    if config["model"] == "xgb":
        return f"xgb, objective {config['xgb_objective']}"
    return f"{config['model']}, {config['loss']} loss"


def default_out(config: Dict[str, Any]) -> str:
    where = config["split"]
    if is_tpugraphs(config["data"]):
        where = xla.parse_collection(config["data"]).replace(":", "-")
    name = f"{where}-{config['model']}-{config['loss']}-seed{config['seed']}"
    if config["train_fraction"] < 1.0:
        name += f"-f{config['train_fraction']:g}"
    return os.path.join("runs", name)


# ---------------------------------------------------------------- training loops
def train_sgd(config, model, train_items, val_items, val_samples, ckpt_path, state, base_state):
    """The SGD loop for the torch models; returns the model with its best weights."""
    loss_fn = build_loss(config["loss"], config["huber_delta"], config["temperature"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=config["weight_decay"])
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=config["epochs"],
                                                           eta_min=config["lr"] * 0.05)
    rng = np.random.default_rng([config["seed"], 2])
    epoch, step, history = 0, 0, []
    best_score, best_epoch, bad_epochs, best_model = None, -1, 0, None
    if state is not None:  # resume: every piece of state the loop touches
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scheduler.T_max = config["epochs"]
        rng.bit_generator.state = state["rng"]["numpy"]
        torch.set_rng_state(state["rng"]["torch"])
        random.setstate(state["rng"]["python"])
        epoch, step, history = state["epoch"], state["step"], state["history"]
        best_score, best_epoch = state["best_score"], state["best_epoch"]
        bad_epochs, best_model = state["bad_epochs"], state["best_model"]
        print(f"resumed from {ckpt_path} after epoch {epoch}", file=sys.stderr)

    def snapshot(finished: bool) -> Dict[str, Any]:
        """Everything needed to continue (or to use) the run, for the checkpoint."""
        return dict(base_state, model=model.state_dict(), optimizer=optimizer.state_dict(),
                    scheduler=scheduler.state_dict(), epoch=epoch, step=step, history=history,
                    best_score=best_score, best_epoch=best_epoch, bad_epochs=bad_epochs,
                    best_model=best_model, finished=finished,
                    rng={"numpy": rng.bit_generator.state, "torch": torch.get_rng_state(),
                         "python": random.getstate()})

    from tqdm import tqdm
    groups = item_groups(train_items) if loss_fn.ranking else None
    with_graph, with_vector = model.uses_graph, model.vector_name is not None and not model.uses_graph
    expand = bool(getattr(model, "expands", False))
    # lazy sources (TpuGraphs) draw each graph's configs for this step with the loop's RNG
    fetch = (lambda i: train_items.sample(i, rng)) if hasattr(train_items, "sample") else train_items.__getitem__
    select, sign = config["select_metric"], (1 if higher_is_better(config["select_metric"]) else -1)
    finished = state is not None and state.get("finished", False)
    while not finished and epoch < config["epochs"] and bad_epochs < config["patience"]:
        model.train()
        start, seen, loss_sum = time.perf_counter(), 0, 0.0
        batches = list(batch_indices(len(train_items), config["batch_size"], rng, groups, config["group_size"]))
        bar = tqdm(batches, desc=f"epoch {epoch + 1}/{config['epochs']}", unit="batch", leave=False,
                   mininterval=1.0, file=sys.stderr, disable=None)
        for idx in bar:
            batch = make_batch([fetch(int(i)) for i in idx], with_graph, with_vector, expand=expand)
            loss = loss_fn(model(batch), batch.y, batch.group)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config["grad_clip"])
            optimizer.step()
            step += 1
            seen += len(idx)
            loss_sum += loss.item() * len(idx)
            bar.set_postfix(loss=f"{loss_sum / seen:.4f}")
            if config.get("crash_after_steps") and step >= config["crash_after_steps"]:
                os.kill(os.getpid(), signal.SIGKILL)  # test hook: die as a killed job would
        bar.close()
        scheduler.step()
        seconds = time.perf_counter() - start
        epoch += 1

        score = None
        if val_items:
            score = evaluate_items(model, val_items, val_samples, config["eval_batch_size"]).get(
                select, {}).get("mean")
        if score is not None and (best_score is None or sign * score > sign * best_score):
            best_score, best_epoch, bad_epochs = score, epoch, 0
            best_model = {k: v.clone() for k, v in model.state_dict().items()}
        elif score is not None:
            bad_epochs += 1
        history.append({"epoch": epoch, "train_loss": loss_sum / max(seen, 1), f"val_{select}": score,
                        "graphs_per_s": seen / seconds, "seconds": seconds})
        shown = "-" if score is None else f"{score:.4f}"
        print(f"epoch {epoch:3d}  loss {loss_sum / max(seen, 1):.4f}  val {select} {shown}  "
              f"{seen / seconds:7.0f} graphs/s  ({seconds:.1f} s){'  *' if best_epoch == epoch else ''}",
              file=sys.stderr, flush=True)
        save_checkpoint(ckpt_path, snapshot(finished=False))
    if not finished:
        if bad_epochs >= config["patience"]:
            print(f"early stop: no better val {select} for {config['patience']} epochs "
                  f"(best {best_score:.4f} at epoch {best_epoch})", file=sys.stderr)
        if best_model is None:  # no validation set: keep the last weights
            best_model, best_epoch = {k: v.clone() for k, v in model.state_dict().items()}, epoch
        state = snapshot(finished=True)
        save_checkpoint(ckpt_path, state)
    model.load_state_dict(state["best_model"])
    return model, {"best_epoch": state["best_epoch"], "epochs_run": state["epoch"],
                   f"best_val_{select}": state["best_score"]}


def item_groups(items) -> Optional[np.ndarray]:
    """Group of each item for ranking batches; None when every item is a group of its own
    (a TpuGraphs graph with its configs), so plain shuffled batches suffice."""
    if hasattr(items, "item_groups"):
        return items.item_groups
    return np.array([it.group for it in items])


def train_xgb(config, model, train_items, val_items, ckpt_path, state, base_state):
    if state is not None and state.get("finished") and state.get("xgb"):
        return model.load_json(state["xgb"]), state.get("run", {})

    def arrays(items):
        if not items:
            return None, None, None
        return (torch.cat([it.vector for it in items]).numpy(), torch.cat([it.y for it in items]).numpy(),
                np.concatenate([[it.group] * len(it.y) for it in items]))

    start = time.perf_counter()
    x, y, g = arrays(train_items)
    model.fit(x, y, g, *arrays(val_items))
    seconds = time.perf_counter() - start
    print(f"xgb ({model.objective}): {len(x)} configs in {seconds:.1f} s, "
          f"{len(x) / seconds:.0f} configs/s", file=sys.stderr)
    best = getattr(model.booster, "best_iteration", None)
    run = {"best_iteration": None if best is None else int(best)}
    save_checkpoint(ckpt_path, dict(base_state, xgb=model.to_json(), run=run, finished=True))
    return model, run


# ---------------------------------------------------------------- main
def run(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    args = build_parser().parse_args(argv)
    config = {k: v for k, v in vars(args).items() if k not in RUN_FLAGS}
    if is_tpugraphs(config["data"]):  # per-collection defaults for the flags not given
        config = xla.resolve_config(config, explicit_flags(argv))
    validate(config)
    out = args.out or default_out(config)
    ckpt_path = os.path.join(out, CHECKPOINT_NAME)
    state = None
    if os.path.exists(ckpt_path) and args.resume:
        state = load_checkpoint(ckpt_path)
        given = explicit_flags(argv)
        ignored = sorted(k for k in given if k not in RUN_FLAGS and k != "epochs"
                         and given[k] != state["config"].get(k))
        if ignored:
            print(f"warning: --resume keeps the run's saved config; ignoring "
                  f"{', '.join('--' + k.replace('_', '-') for k in ignored)}", file=sys.stderr)
        config = dict(state["config"], epochs=given.get("epochs", state["config"]["epochs"]))
    elif os.path.exists(ckpt_path) and not args.overwrite:
        raise SimulatorError(f"{out} already holds a run: pass --resume to continue it, "
                             f"--overwrite to replace it, or another --out")
    elif args.resume:
        print(f"{ckpt_path}: no checkpoint yet, starting the run", file=sys.stderr)
    os.makedirs(out, exist_ok=True)
    run_config = dict(config, crash_after_steps=args.crash_after_steps)

    setup_determinism(config["seed"], config["threads"])
    if is_tpugraphs(config["data"]):
        # lazy: one item per graph file, configs drawn per step (simulator.tpugraphs)
        split_names, part_items, info, normalization = xla.load_run_data(config, state)
        part_samples: Dict[str, Any] = {k: None for k in part_items}
        print(f"data: {config['data'][0]} under {config['data_root']}; train {len(part_items['train'])}, "
              f"val {len(part_items['val'])}, test {len(part_items['test'])} graphs (official split)",
              file=sys.stderr)
    else:
        samples = load_data(config["data"], config["cache_dir"])
        parts = make_split([s.group for s in samples], config["split"], config["seed"],
                           config["train_workloads"], config["test_workloads"], config["val_fraction"],
                           config["train_fraction"])
        group_index = {g: i for i, g in enumerate(sorted({s.group for s in samples}))}
        info = state["info"] if state is not None else model_info(samples, config)
        info["groups"] = sorted(group_index)
        items = prepare_samples(samples, config, info, group_index)
        part_items = {k: [items[i] for i in v] for k, v in parts.items()}
        part_samples = {k: [samples[i] for i in v] for k, v in parts.items()}
        split_names = {k: [samples[i].name for i in v] for k, v in parts.items()}
        print(f"data: {len(samples)} samples, {len(group_index)} workloads; train {len(parts['train'])}, "
              f"val {len(parts['val'])}, test {len(parts['test'])} ({config['split']})", file=sys.stderr)
        normalization = state["normalization"] if state is not None else normalization_stats(part_items["train"])

    model = build_model(config, info)
    if isinstance(model, torch.nn.Module):
        with torch.no_grad():
            model.set_normalization(normalization)
    base_state = {"config": config, "info": info, "normalization": normalization, "split": split_names}
    if isinstance(model, torch.nn.Module):
        n_params = sum(p.numel() for p in model.parameters())
        print(f"model: {config['model']}, {n_params} parameters; loss {config['loss']}", file=sys.stderr)
        model, run_info = train_sgd(run_config, model, part_items["train"], part_items["val"],
                                    part_samples["val"], ckpt_path, state, base_state)
    else:
        model, run_info = train_xgb(run_config, model, part_items["train"], part_items["val"],
                                    ckpt_path, state, base_state)

    metrics: Dict[str, Any] = {"config": config, "run": dict(run_info, train_samples=len(split_names["train"]),
                                                             val_samples=len(split_names["val"]),
                                                             test_samples=len(split_names["test"]))}
    for part in ("val", "test"):
        if len(part_items[part]):
            result = evaluate_items(model, part_items[part], part_samples[part], config["eval_batch_size"])
            if not result:  # TpuGraphs test split with its runtimes withheld
                print(f"\n{part}: no measured configs (runtimes withheld); not scored — rank them with "
                      f"python -m simulator.predict {out} --kaggle-csv FILE", file=sys.stderr)
                continue
            metrics[part] = result
            print(format_table(metrics[part], f"\n{part} ({describe(config)})"))
    write_json(os.path.join(out, "metrics.json"), metrics)
    print(f"\nwrote {os.path.join(out, 'metrics.json')}", file=sys.stderr)
    return metrics


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_cli(run, argv, interrupted_hint='continue with --resume')


if __name__ == "__main__":
    sys.exit(main())
