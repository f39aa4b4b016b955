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

Non-finite values stop the loop: a step whose loss is NaN or ±inf raises a one-line
`SimulatorError` naming the epoch, the step and the batch's samples, before the
optimizer takes it; weights that become non-finite are reported at the end of the
epoch. No checkpoint is written for the failed epoch.

Extending a finished run: resumed with a larger `--epochs`, a run that ended because
it reached its epochs (early stopping did not fire) trains on from its last weights,
optimizer, RNG states and epoch counter, the cosine schedule stretched to the new
length from where it is (3 + 3 epochs is therefore not the same as 6 straight). A run
that stopped early, or a `--epochs` below the epochs already trained, is refused
(`check_resume`), since nothing would be trained that the config would then claim.

Under torchrun (`RunContext.cluster` distributed) the same loop is data-parallel: every
rank builds the same global batches, trains on its shard of each (`train_epoch_shard`,
`shard_step`), scores its share of the validation set, and rank 0 writes checkpoints;
see `simulator.distributed`. A single process never enters those functions.
"""
from __future__ import annotations

import math
import random
import sys
import time
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from .checkpoint import checkpoint_record, save_checkpoint
from .data.batching import Batch, batch_indices
from .distributed import Cluster
from .engine import stderr_is_terminal
from .losses import Loss, build_loss
from .metrics import higher_is_better
from .registry import SimulatorError


class NonFiniteLoss(ArithmeticError):
    """A step's loss was NaN or infinite (raised before the optimizer step)."""

    def __init__(self, value: float):
        super().__init__(f"the training loss is {value}")
        self.value = value


@dataclass
class RunContext:
    """Where a fit checkpoints and what it continues from.

    `base`: plain data saved with every checkpoint (config, info, normalization, split);
    `resume`: the checkpoint a resumed run continues from (None: a new run);
    `cluster`: this process's place in a torchrun run (only rank 0 writes)."""

    path: str
    base: Dict[str, Any]
    resume: Optional[Dict[str, Any]] = None
    saved: Optional[Dict[str, Any]] = None   # what `record` says of the last checkpoint written
    cluster: Cluster = field(default_factory=Cluster)

    def save(self, state: Dict[str, Any]) -> None:
        if not self.cluster.is_main:
            return
        full = dict(self.base, **state)
        save_checkpoint(self.path, full)
        self.saved = checkpoint_record(full)

    def record(self) -> Dict[str, Any]:
        """What metrics.json records of the checkpoint it was computed from (the weights'
        SHA-256, epoch, step): the last one written, or the resumed one if none was."""
        if self.saved is not None:
            return dict(self.saved)
        return checkpoint_record(self.resume) if self.resume is not None else {}


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


def check_resume(state: Dict[str, Any], epochs: int, where: str = "the run") -> Optional[str]:
    """Whether a run saved in `state` can be resumed with `epochs` (a `SimulatorError`
    when not); returns a note when a finished run will be extended, else None. A
    checkpoint without an epoch counter (xgb) is not trained by epochs: nothing to check."""
    if "epoch" not in state:
        return None
    done, patience = int(state["epoch"]), int(state["config"].get("patience", 0) or 0)
    if epochs < done:
        raise SimulatorError(f"--epochs {epochs}: {where} has already trained {done} epochs; give --epochs "
                             f"{done} or more (or start a new run)")
    if not state.get("finished") or epochs == done:
        return None
    if patience and int(state.get("bad_epochs", 0)) >= patience:
        raise SimulatorError(f"--epochs {epochs}: {where} stopped early at epoch {done} (no better validation "
                             f"score for {patience} epochs, best at epoch {state.get('best_epoch')}); it cannot "
                             f"be extended — start a new run with more --epochs or --patience")
    return f"extending the finished run from {done} to {epochs} epochs"


def batch_loss(loss_fn: Loss, pred: torch.Tensor, batch: Batch) -> torch.Tensor:
    """The loss of a batch's predictions: (C,) one network's; (C, K) an ensemble's members'
    (`simulator.models.ensemble`), the mean of each member's own loss."""
    if pred.dim() == 1:
        return loss_fn(pred, batch.y, batch.group)
    return torch.stack([loss_fn(member, batch.y, batch.group) for member in pred.unbind(dim=1)]).mean()


def sgd_step(net: torch.nn.Module, batch: Batch, loss_fn: Loss, optimizer: torch.optim.Optimizer,
             grad_clip: float) -> float:
    """One optimizer step on one batch; the batch's loss. A non-finite loss raises
    `NonFiniteLoss` before the step (the weights stay as they were)."""
    loss = batch_loss(loss_fn, net(batch), batch)
    if not bool(torch.isfinite(loss)):
        raise NonFiniteLoss(float(loss.item()))
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
    batch's. A stand-in shard (a rank without items) has no share. A non-finite loss on
    any rank raises `NonFiniteLoss` on every rank, before the step."""
    loss = batch_loss(loss_fn, trainer(batch), batch)
    finite = bool(torch.isfinite(loss))
    terms = 0 if stand_in else loss_fn.terms(batch.y, batch.group)
    total_terms, total_loss, bad = cluster.all_reduce_sum(
        [terms, loss.item() * terms if finite else 0.0, 0.0 if finite else 1.0])
    if bad:
        raise NonFiniteLoss(float(loss.item()) if not finite else float("nan"))
    trainer.grad_share.value = terms / total_terms if total_terms else 0.0
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trainer.parameters(), grad_clip)
    optimizer.step()
    return total_loss / total_terms if total_terms else 0.0


def batch_names(source, idx: Sequence[int], batch: Optional[Batch] = None, shown: int = 4) -> str:
    """The samples of a batch whose loss was not finite, for the error message: those with
    a non-finite runtime, vector or config feature row if there are any (else the first
    few of the batch)."""
    names, idx = source.names, [int(i) for i in idx]
    bad: List[int] = []
    if batch is not None:
        for rows in (batch.y, batch.vector, batch.config_x):
            if rows is not None:
                finite = torch.isfinite(rows.reshape(len(rows), -1)).all(1)
                bad += [int(g) for g in batch.config_graph[~finite].tolist()]
    if bad:
        chosen = sorted(set(bad))
        picked = [f"{names[idx[g]]}" for g in chosen[:shown]]
        more = f", … ({len(chosen)} in all)" if len(chosen) > shown else ""
        return f"{len(idx)} samples; non-finite values in {', '.join(picked)}{more}"
    picked = [str(names[i]) for i in idx[:shown]]
    more = f", … ({len(idx)} in all)" if len(idx) > shown else ""
    return ", ".join(picked) + more


def non_finite_weights(net: torch.nn.Module) -> Optional[str]:
    """The first parameter or buffer holding a NaN/inf, or None."""
    for name, t in net.state_dict().items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            return name
    return None


def stretch_schedule(scheduler, optimizer, epochs: int) -> None:
    """Give a resumed cosine schedule a new length: T_max = `epochs`, the learning rate
    set to the closed form's value at the current epoch (unchanged length: nothing done,
    so a killed and resumed run matches one never killed)."""
    if scheduler.T_max == epochs:
        return
    scheduler.T_max = epochs
    t = min(scheduler.last_epoch, epochs)
    for group, base in zip(optimizer.param_groups, scheduler.base_lrs):
        group["lr"] = scheduler.eta_min + (base - scheduler.eta_min) * (1 + math.cos(math.pi * t / epochs)) / 2


def resume_loop(run: RunContext, net: torch.nn.Module, optimizer, scheduler, rng: np.random.Generator,
                epochs: int) -> Tuple[LoopState, Optional[int]]:
    """Every piece of state the loop touches, from the checkpoint `run.resume`; (the loop's
    state, the epoch a finished run is extended from, or None)."""
    state = run.resume
    note = check_resume(state, epochs, run.path)
    net.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    stretch_schedule(scheduler, optimizer, epochs)
    rng.bit_generator.state = state["rng"]["numpy"]
    ranks = state["rng"].get("ranks") or []  # a distributed run's: each rank takes its own
    own = ranks[run.cluster.rank] if len(ranks) == run.cluster.world_size else state["rng"]
    torch.set_rng_state(own["torch"])
    random.setstate(own["python"])
    loop = LoopState.from_checkpoint(state)
    say(run.cluster, f"resumed from {run.path} after epoch {loop.epoch}")
    if note is None:
        return loop, None
    say(run.cluster, note)  # a finished run, extended
    loop.finished = False
    if loop.best_score is None:  # no validation: the last weights are the result
        loop.best_model = None
    return loop, loop.epoch


@dataclass
class Pieces:
    """What the loop trains and checkpoints: the network, loss, optimizer, cosine schedule,
    the loop's RNG (batches, config draws) and its state."""

    net: torch.nn.Module
    loss_fn: Loss
    optimizer: torch.optim.Optimizer
    scheduler: Any
    rng: np.random.Generator
    cluster: Cluster
    loop: LoopState = field(default_factory=LoopState)

    @classmethod
    def of(cls, model, cluster: Cluster) -> "Pieces":
        fit = model.config.fit
        loss_fn = build_loss(fit.loss, fit.huber_delta, fit.temperature)
        optimizer = torch.optim.AdamW(model.net.parameters(), lr=fit.lr, weight_decay=fit.weight_decay)
        return cls(model.net, loss_fn, optimizer,
                   torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=fit.epochs, eta_min=fit.lr * 0.05),
                   np.random.default_rng([model.config.seed, 2]), cluster)

    def snapshot(self) -> Dict[str, Any]:
        """Everything needed to continue (or to use) the run, for the checkpoint."""
        rngs = {"numpy": self.rng.bit_generator.state, "torch": torch.get_rng_state(), "python": random.getstate()}
        if self.cluster.distributed:  # each rank's own streams (dropout differs per rank)
            rngs["ranks"] = self.cluster.gather({"torch": torch.get_rng_state(), "python": random.getstate()})
        return dict(self.loop.entries(), model=self.net.state_dict(), optimizer=self.optimizer.state_dict(),
                    scheduler=self.scheduler.state_dict(), rng=rngs)


def fit_sgd(model, train, val, run: Optional[RunContext] = None) -> Dict[str, Any]:
    """Train `model` (a `TorchCostModel`) on the source `train`, early-stopping on `val`;
    returns the run summary (best epoch, epochs run, best validation score; `extended_from`
    when a finished run was extended). The model ends with its best weights (the last ones
    with `--keep-weights last`)."""
    fit, spec = model.config.fit, model.batch_spec
    cluster = run.cluster if run is not None else Cluster()
    # ------------------------------------------------------------ the pieces
    pieces = Pieces.of(model, cluster)
    select, sign = fit.select_metric, (1 if higher_is_better(fit.select_metric) else -1)
    groups = train.groups if pieces.loss_fn.ranking else None

    # ------------------------------------------------------------ resume
    extended_from = None
    if run is not None and run.resume is not None:
        pieces.loop, extended_from = resume_loop(run, pieces.net, pieces.optimizer, pieces.scheduler, pieces.rng,
                                                 fit.epochs)
    trainer = cluster.wrap(pieces.net)

    # ------------------------------------------------------------ epochs
    loop = pieces.loop
    while not loop.finished and loop.epoch < fit.epochs and loop.bad_epochs < fit.patience:
        cpu = time.process_time()
        if cluster.distributed:
            loss, seen, seconds = train_epoch_shard(trainer, spec, train, pieces.loss_fn, pieces.optimizer,
                                                    pieces.rng, groups, fit, loop, cluster, model.config.seed)
        else:
            loss, seen, seconds = train_epoch(pieces.net, spec, train, pieces.loss_fn, pieces.optimizer,
                                              pieces.rng, groups, fit, loop)
        cpu = time.process_time() - cpu  # this process's CPU seconds for the epoch's training
        cpu_by_rank = cluster.gather(cpu) if cluster.distributed else [cpu]
        check_weights(pieces.net, loop)
        pieces.scheduler.step()
        loop.epoch += 1
        score = cluster.evaluate(val, model, fit.eval_batch_size).get(select, {}).get("mean") if val else None
        keep_best(loop, pieces.net, score, sign, fit.keep_weights)
        loop.history.append({"epoch": loop.epoch, "train_loss": loss / max(seen, 1), f"val_{select}": score,
                             "graphs_per_s": seen / seconds, "seconds": seconds,
                             "cpu_s_by_rank": cpu_by_rank})
        if run is not None:
            run.save(pieces.snapshot())
        shown = "-" if score is None else f"{score:.4f}"
        say(cluster, f"epoch {loop.epoch:3d}  loss {loss / max(seen, 1):.4f}  val {select} {shown}  "
                     f"{seen / seconds:7.0f} graphs/s  ({seconds:.1f} s){'  *' if loop.best_epoch == loop.epoch else ''}")

    # ------------------------------------------------------------ finish
    if not loop.finished:
        finish_loop(pieces, run, select, fit.patience)
    pieces.net.load_state_dict(loop.best_model)
    summary = {"best_epoch": loop.best_epoch, "epochs_run": loop.epoch, f"best_val_{select}": loop.best_score}
    if extended_from is not None:
        summary["extended_from"] = extended_from
    return summary


def check_weights(net: torch.nn.Module, loop: LoopState) -> None:
    """A one-line `SimulatorError` when the epoch left a parameter or buffer non-finite."""
    bad = non_finite_weights(net)
    if bad is not None:
        raise SimulatorError(f"epoch {loop.epoch + 1}, step {loop.step}: the weights became non-finite "
                             f"({bad}); stopping (try a lower --lr or --grad-clip)")


def keep_best(loop: LoopState, net: torch.nn.Module, score: Optional[float], sign: int, keep_weights: str) -> None:
    """Keep the weights of a better validation score; count the epochs without one. With
    `keep_weights` "last" the kept epoch is the latest (its weights taken when the loop ends)
    and nothing is counted: no early stop."""
    if keep_weights == "last":
        loop.best_score, loop.best_epoch, loop.best_model = score, loop.epoch, None
    elif loop.improved(score, sign):
        loop.best_score, loop.best_epoch, loop.bad_epochs = score, loop.epoch, 0
        loop.best_model = {k: v.clone() for k, v in net.state_dict().items()}
    elif score is not None:
        loop.bad_epochs += 1


def finish_loop(pieces: Pieces, run: Optional[RunContext], select: str, patience: int) -> None:
    """The early-stop note, the last weights as the result when nothing was validated,
    the final checkpoint."""
    loop = pieces.loop
    if loop.bad_epochs >= patience:
        say(pieces.cluster, f"early stop: no better val {select} for {patience} epochs "
                            f"(best {loop.best_score:.4f} at epoch {loop.best_epoch})")
    if loop.best_model is None:  # no validation set, or --keep-weights last: the last weights
        loop.best_model, loop.best_epoch = {k: v.clone() for k, v in pieces.net.state_dict().items()}, loop.epoch
    loop.finished = True
    if run is not None:
        run.save(pieces.snapshot())


def train_epoch(net, spec, train, loss_fn: Loss, optimizer, rng: np.random.Generator,
                groups: Optional[np.ndarray], fit, loop: LoopState) -> Tuple[float, int, float]:
    """One pass over `train` in shuffled batches; (Σ loss × items, items seen, seconds)."""
    from tqdm import tqdm
    net.train()
    device = next(net.parameters()).device
    start, seen, loss_sum = time.perf_counter(), 0, 0.0
    batches = list(batch_indices(len(train), fit.batch_size, rng, groups, fit.group_size))
    bar = tqdm(batches, desc=f"epoch {loop.epoch + 1}/{fit.epochs}", unit="batch", leave=False,
               mininterval=1.0, file=sys.stderr, disable=not stderr_is_terminal())
    for idx in bar:
        batch = train.batch(idx, rng, spec).to(device)
        try:
            loss = sgd_step(net, batch, loss_fn, optimizer, fit.grad_clip)
        except NonFiniteLoss as e:
            raise SimulatorError(f"epoch {loop.epoch + 1}, step {loop.step + 1}: {e} on the batch of "
                                 f"{batch_names(train, idx, batch)}; stopping (non-finite runtimes or features "
                                 f"in the data, or a diverging run: try a lower --lr)") from None
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
    loop's `rng`, identical on every rank), this rank's shard of each, its configs drawn
    from `Cluster.step_rng`; the counts are the global batches'."""
    from tqdm import tqdm
    trainer.train()
    device = next(trainer.parameters()).device
    start, seen, loss_sum = time.perf_counter(), 0, 0.0
    batches = list(batch_indices(len(train), fit.batch_size, rng, groups, fit.group_size))
    bar = tqdm(batches, desc=f"epoch {loop.epoch + 1}/{fit.epochs}", unit="batch", leave=False,
               mininterval=1.0, file=sys.stderr, disable=not (cluster.is_main and stderr_is_terminal()))
    for idx in bar:
        local, stand_in = cluster.shard(idx, groups)
        batch = train.batch(local, cluster.step_rng(seed, loop.step), spec).to(device)
        try:
            loss = shard_step(trainer, batch, loss_fn, optimizer, fit.grad_clip, cluster, stand_in)
        except NonFiniteLoss as e:
            raise SimulatorError(f"epoch {loop.epoch + 1}, step {loop.step + 1}: {e} on a batch of rank "
                                 f"{cluster.rank}'s or another's ({batch_names(train, local, batch)} here); "
                                 f"stopping (non-finite runtimes or features in the data, or a diverging "
                                 f"run: try a lower --lr)") from None
        loop.step += 1
        seen += len(idx)
        loss_sum += loss * len(idx)
        bar.set_postfix(loss=f"{loss_sum / seen:.4f}")
    bar.close()
    return loss_sum, seen, time.perf_counter() - start


def say(cluster: Cluster, line: str) -> None:
    """A progress line on stderr (rank 0's only, in a distributed run)."""
    if cluster.is_main:
        print(line, file=sys.stderr, flush=True)


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
            try:
                losses.append(sgd_step(model.net, batch, loss_fn, optimizer, fit.grad_clip))
            except NonFiniteLoss as e:
                raise SimulatorError(f"update step {len(losses) + 1}: {e} on the batch of "
                                     f"{batch_names(items, idx, batch)}; the update was stopped") from None
    return losses
