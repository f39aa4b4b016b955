"""The SGD loop of the torch cost models, readable top to bottom.

`fit_sgd(model, train, val, run)` trains `model.net` on a `Source` with early stopping on
the validation metric, checkpointing after every epoch:

    pieces   loss, AdamW, cosine schedule, the loop's RNG, the loop's state
    resume   every piece of state the loop touches, from the checkpoint
    epochs   shuffle (grouped for ranking losses) → batches from the source → steps;
             then validate, keep the best weights, checkpoint, print one line
    finish   early-stop note, the best weights, the final checkpoint

Same seed and thread count → the same numbers, and a run killed at any point and
resumed from its checkpoint gives the same result as one never killed: the checkpoint
holds the weights, optimizer, schedule, the loop's counters and all three RNG states
(numpy's for batches and config draws, torch's, Python's).

`update_sgd(model, items, steps)` takes a few optimizer steps on new items (online
updates, `CostModel.update`).

Under torchrun (`RunContext.cluster` distributed) the same loop is data-parallel: every
rank builds the same global batches, trains on its shard of each (`train_epoch_shard`,
`shard_step`), scores its share of the validation set, and rank 0 writes checkpoints;
see `simulator.distributed`. A single process never enters those functions.
"""
from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from .batching import Batch, batch_indices
from .checkpoint import save_checkpoint
from .distributed import Cluster
from .losses import Loss, build_loss
from .metrics import higher_is_better


@dataclass
class RunContext:
    """Where a fit checkpoints and what it continues from.

    `base`: plain data saved with every checkpoint (config, info, normalization, split);
    `resume`: the checkpoint a resumed run continues from (None: a new run);
    `cluster`: this process's place in a torchrun run (only rank 0 writes)."""

    path: str
    base: Dict[str, Any]
    resume: Optional[Dict[str, Any]] = None
    cluster: Cluster = field(default_factory=Cluster)

    def save(self, state: Dict[str, Any]) -> None:
        if self.cluster.is_main:
            save_checkpoint(self.path, dict(self.base, **state))


@dataclass
class LoopState:
    """The training loop's counters and best weights (checkpoint entries of the same names)."""

    epoch: int = 0
    step: int = 0
    history: List[Dict[str, Any]] = field(default_factory=list)
    best_score: Optional[float] = None
    best_epoch: int = -1
    bad_epochs: int = 0
    best_model: Optional[Dict[str, torch.Tensor]] = None
    finished: bool = False

    @classmethod
    def from_checkpoint(cls, state: Dict[str, Any]) -> "LoopState":
        return cls(**{f.name: state[f.name] for f in fields(cls) if f.name in state})

    def entries(self) -> Dict[str, Any]:
        """The fields as checkpoint entries (not copied)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def improved(self, score: Optional[float], sign: int) -> bool:
        return score is not None and (self.best_score is None or sign * score > sign * self.best_score)


def sgd_step(net: torch.nn.Module, batch: Batch, loss_fn: Loss, optimizer: torch.optim.Optimizer,
             grad_clip: float) -> float:
    """One optimizer step on one batch; the batch's loss."""
    loss = loss_fn(net(batch), batch.y, batch.group)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), grad_clip)
    optimizer.step()
    return loss.item()


def shard_step(trainer: torch.nn.Module, batch: Batch, loss_fn: Loss, optimizer: torch.optim.Optimizer,
               grad_clip: float, cluster: Cluster, stand_in: bool) -> float:
    """One distributed optimizer step on this rank's shard of a global batch; the global
    batch's loss. The gradient all-reduce weights each rank's gradients by its share of
    the batch's loss terms (`Cluster.wrap`'s hook), which makes the step the global
    batch's. A stand-in shard (a rank without items) has no share."""
    loss = loss_fn(trainer(batch), batch.y, batch.group)
    terms = 0 if stand_in else loss_fn.terms(batch.y, batch.group)
    total_terms, total_loss = cluster.all_reduce_sum([terms, loss.item() * terms])
    trainer.grad_share.value = terms / total_terms if total_terms else 0.0
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trainer.parameters(), grad_clip)
    optimizer.step()
    return total_loss / total_terms if total_terms else 0.0


def fit_sgd(model, train, val, run: Optional[RunContext] = None) -> Dict[str, Any]:
    """Train `model` (a `TorchCostModel`) on the source `train`, early-stopping on `val`;
    returns the run summary (best epoch, epochs run, best validation score). The model
    ends with its best weights."""
    config, fit = model.config, model.config.fit
    net, spec = model.net, model.batch_spec
    cluster = run.cluster if run is not None else Cluster()
    # ------------------------------------------------------------ the pieces
    loss_fn = build_loss(fit.loss, fit.huber_delta, fit.temperature)
    optimizer = torch.optim.AdamW(net.parameters(), lr=fit.lr, weight_decay=fit.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=fit.epochs, eta_min=fit.lr * 0.05)
    rng = np.random.default_rng([config.seed, 2])
    loop = LoopState()
    select, sign = fit.select_metric, (1 if higher_is_better(fit.select_metric) else -1)
    groups = train.groups if loss_fn.ranking else None

    def snapshot() -> Dict[str, Any]:
        """Everything needed to continue (or to use) the run, for the checkpoint."""
        rngs = {"numpy": rng.bit_generator.state, "torch": torch.get_rng_state(), "python": random.getstate()}
        if cluster.distributed:  # each rank's own streams (dropout differs per rank)
            rngs["ranks"] = cluster.gather({"torch": torch.get_rng_state(), "python": random.getstate()})
        return dict(loop.entries(), model=net.state_dict(), optimizer=optimizer.state_dict(),
                    scheduler=scheduler.state_dict(), rng=rngs)

    # ------------------------------------------------------------ resume
    if run is not None and run.resume is not None:
        loop = resume(run, net, optimizer, scheduler, rng, fit)
        say(cluster, f"resumed from {run.path} after epoch {loop.epoch}")
    trainer = cluster.wrap(net)

    # ------------------------------------------------------------ epochs
    while not loop.finished and loop.epoch < fit.epochs and loop.bad_epochs < fit.patience:
        if cluster.distributed:
            loss, seen, seconds = train_epoch_shard(trainer, spec, train, loss_fn, optimizer, rng, groups, fit,
                                                    loop, cluster, config.seed)
        else:
            loss, seen, seconds = train_epoch(net, spec, train, loss_fn, optimizer, rng, groups, fit, loop)
        scheduler.step()
        loop.epoch += 1
        score = validation_score(model, val, fit, cluster)
        if loop.improved(score, sign):
            loop.best_score, loop.best_epoch, loop.bad_epochs = score, loop.epoch, 0
            loop.best_model = {k: v.clone() for k, v in net.state_dict().items()}
        elif score is not None:
            loop.bad_epochs += 1
        loop.history.append({"epoch": loop.epoch, "train_loss": loss / max(seen, 1), f"val_{select}": score,
                             "graphs_per_s": seen / seconds, "seconds": seconds})
        if run is not None:
            run.save(snapshot())
        shown = "-" if score is None else f"{score:.4f}"
        say(cluster, f"epoch {loop.epoch:3d}  loss {loss / max(seen, 1):.4f}  val {select} {shown}  "
                     f"{seen / seconds:7.0f} graphs/s  ({seconds:.1f} s){'  *' if loop.best_epoch == loop.epoch else ''}")

    # ------------------------------------------------------------ finish
    if not loop.finished:
        if loop.bad_epochs >= fit.patience:
            say(cluster, f"early stop: no better val {select} for {fit.patience} epochs "
                         f"(best {loop.best_score:.4f} at epoch {loop.best_epoch})")
        if loop.best_model is None:  # no validation set: keep the last weights
            loop.best_model, loop.best_epoch = {k: v.clone() for k, v in net.state_dict().items()}, loop.epoch
        loop.finished = True
        if run is not None:
            run.save(snapshot())
    net.load_state_dict(loop.best_model)
    return {"best_epoch": loop.best_epoch, "epochs_run": loop.epoch, f"best_val_{select}": loop.best_score}


def say(cluster: Cluster, line: str) -> None:
    """A progress line on stderr (rank 0's only, in a distributed run)."""
    if cluster.is_main:
        print(line, file=sys.stderr, flush=True)


def resume(run: RunContext, net, optimizer, scheduler, rng: np.random.Generator, fit) -> LoopState:
    """Every piece of state the loop touches, from `run.resume`; the loop's counters. Each
    rank of a distributed run takes its own torch/Python RNG states when the checkpoint
    has them for this many ranks (else rank 0's)."""
    state = run.resume
    net.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    scheduler.T_max = fit.epochs
    rng.bit_generator.state = state["rng"]["numpy"]
    ranks = state["rng"].get("ranks") or []
    own = ranks[run.cluster.rank] if len(ranks) == run.cluster.world_size else state["rng"]
    torch.set_rng_state(own["torch"])
    random.setstate(own["python"])
    return LoopState.from_checkpoint(state)


def validation_score(model, val, fit, cluster: Cluster) -> Optional[float]:
    """The validation metric's mean (None without a validation set); the ranks of a
    distributed run score shares of it (`Cluster.evaluate`)."""
    if not val:
        return None
    return cluster.evaluate(val, model, fit.eval_batch_size).get(fit.select_metric, {}).get("mean")


def train_epoch(net, spec, train, loss_fn: Loss, optimizer, rng: np.random.Generator,
                groups: Optional[np.ndarray], fit, loop: LoopState) -> Tuple[float, int, float]:
    """One pass over `train` in shuffled batches; (Σ loss × items, items seen, seconds)."""
    from tqdm import tqdm
    net.train()
    device = next(net.parameters()).device
    start, seen, loss_sum = time.perf_counter(), 0, 0.0
    batches = list(batch_indices(len(train), fit.batch_size, rng, groups, fit.group_size))
    bar = tqdm(batches, desc=f"epoch {loop.epoch + 1}/{fit.epochs}", unit="batch", leave=False,
               mininterval=1.0, file=sys.stderr, disable=None)
    for idx in bar:
        loss = sgd_step(net, train.batch(idx, rng, spec).to(device), loss_fn, optimizer, fit.grad_clip)
        loop.step += 1
        seen += len(idx)
        loss_sum += loss * len(idx)
        bar.set_postfix(loss=f"{loss_sum / seen:.4f}")
    bar.close()
    return loss_sum, seen, time.perf_counter() - start


def train_epoch_shard(trainer, spec, train, loss_fn: Loss, optimizer, rng: np.random.Generator,
                      groups: Optional[np.ndarray], fit, loop: LoopState, cluster: Cluster,
                      seed: int) -> Tuple[float, int, float]:
    """`train_epoch` of one rank of a distributed run: the same global batches (the
    loop's `rng`, identical on every rank), this rank's shard of each; the counts are
    the global batches'."""
    from tqdm import tqdm
    trainer.train()
    device = next(trainer.parameters()).device
    start, seen, loss_sum = time.perf_counter(), 0, 0.0
    batches = list(batch_indices(len(train), fit.batch_size, rng, groups, fit.group_size))
    bar = tqdm(batches, desc=f"epoch {loop.epoch + 1}/{fit.epochs}", unit="batch", leave=False,
               mininterval=1.0, file=sys.stderr, disable=None if cluster.is_main else True)
    for idx in bar:
        local, stand_in = cluster.shard(idx, groups)
        batch = train.batch(local, cluster.step_rng(seed, loop.step), spec).to(device)
        loss = shard_step(trainer, batch, loss_fn, optimizer, fit.grad_clip, cluster, stand_in)
        loop.step += 1
        seen += len(idx)
        loss_sum += loss * len(idx)
        bar.set_postfix(loss=f"{loss_sum / seen:.4f}")
    bar.close()
    return loss_sum, seen, time.perf_counter() - start


def update_sgd(model, items, steps: int, optimizer: torch.optim.Optimizer, rng: np.random.Generator) -> List[float]:
    """`steps` optimizer steps of `model.net` on the source `items` (shuffled batches,
    grouped for ranking losses, as many passes as needed); the losses."""
    fit = model.config.fit
    loss_fn = build_loss(fit.loss, fit.huber_delta, fit.temperature)
    groups = items.groups if loss_fn.ranking else None
    model.net.train()
    losses: List[float] = []
    while len(items) and len(losses) < steps:
        for idx in batch_indices(len(items), fit.batch_size, rng, groups, fit.group_size):
            if len(losses) == steps:
                break
            batch = items.batch(idx, rng, model.batch_spec).to(next(model.net.parameters()).device)
            losses.append(sgd_step(model.net, batch, loss_fn, optimizer, fit.grad_clip))
    return losses
