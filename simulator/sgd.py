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
from .losses import Loss, build_loss
from .metrics import higher_is_better


@dataclass
class RunContext:
    """Where a fit checkpoints and what it continues from.

    `base`: plain data saved with every checkpoint (config, info, normalization, split);
    `resume`: the checkpoint a resumed run continues from (None: a new run)."""

    path: str
    base: Dict[str, Any]
    resume: Optional[Dict[str, Any]] = None

    def save(self, state: Dict[str, Any]) -> None:
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


def fit_sgd(model, train, val, run: Optional[RunContext] = None) -> Dict[str, Any]:
    """Train `model` (a `TorchCostModel`) on the source `train`, early-stopping on `val`;
    returns the run summary (best epoch, epochs run, best validation score). The model
    ends with its best weights."""
    config, fit = model.config, model.config.fit
    net, spec = model.net, model.batch_spec
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
        return dict(loop.entries(), model=net.state_dict(), optimizer=optimizer.state_dict(),
                    scheduler=scheduler.state_dict(),
                    rng={"numpy": rng.bit_generator.state, "torch": torch.get_rng_state(),
                         "python": random.getstate()})

    # ------------------------------------------------------------ resume
    if run is not None and run.resume is not None:
        state = run.resume
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scheduler.T_max = fit.epochs
        rng.bit_generator.state = state["rng"]["numpy"]
        torch.set_rng_state(state["rng"]["torch"])
        random.setstate(state["rng"]["python"])
        loop = LoopState.from_checkpoint(state)
        print(f"resumed from {run.path} after epoch {loop.epoch}", file=sys.stderr)

    # ------------------------------------------------------------ epochs
    while not loop.finished and loop.epoch < fit.epochs and loop.bad_epochs < fit.patience:
        loss, seen, seconds = train_epoch(net, spec, train, loss_fn, optimizer, rng, groups, fit, loop)
        scheduler.step()
        loop.epoch += 1
        score = val.evaluate(model, fit.eval_batch_size).get(select, {}).get("mean") if val else None
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
        print(f"epoch {loop.epoch:3d}  loss {loss / max(seen, 1):.4f}  val {select} {shown}  "
              f"{seen / seconds:7.0f} graphs/s  ({seconds:.1f} s){'  *' if loop.best_epoch == loop.epoch else ''}",
              file=sys.stderr, flush=True)

    # ------------------------------------------------------------ finish
    if not loop.finished:
        if loop.bad_epochs >= fit.patience:
            print(f"early stop: no better val {select} for {fit.patience} epochs "
                  f"(best {loop.best_score:.4f} at epoch {loop.best_epoch})", file=sys.stderr)
        if loop.best_model is None:  # no validation set: keep the last weights
            loop.best_model, loop.best_epoch = {k: v.clone() for k, v in net.state_dict().items()}, loop.epoch
        loop.finished = True
        if run is not None:
            run.save(snapshot())
    net.load_state_dict(loop.best_model)
    return {"best_epoch": loop.best_epoch, "epochs_run": loop.epoch, f"best_val_{select}": loop.best_score}


def train_epoch(net, spec, train, loss_fn: Loss, optimizer, rng: np.random.Generator,
                groups: Optional[np.ndarray], fit, loop: LoopState) -> Tuple[float, int, float]:
    """One pass over `train` in shuffled batches; (Σ loss × items, items seen, seconds)."""
    from tqdm import tqdm
    net.train()
    start, seen, loss_sum = time.perf_counter(), 0, 0.0
    batches = list(batch_indices(len(train), fit.batch_size, rng, groups, fit.group_size))
    bar = tqdm(batches, desc=f"epoch {loop.epoch + 1}/{fit.epochs}", unit="batch", leave=False,
               mininterval=1.0, file=sys.stderr, disable=None)
    for idx in bar:
        loss = sgd_step(net, train.batch(idx, rng, spec), loss_fn, optimizer, fit.grad_clip)
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
            losses.append(sgd_step(model.net, items.batch(idx, rng, model.batch_spec), loss_fn, optimizer,
                                   fit.grad_clip))
    return losses
