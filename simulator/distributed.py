"""Training across processes and machines with torchrun.

    torchrun --standalone --nproc_per_node 2 -m simulator.train --data … --out RUN
    torchrun --nnodes 4 --nproc_per_node 8 --rdzv-backend c10d \\
        --rdzv-endpoint HOST:29400 --rdzv-id RUN -m simulator.train … --out RUN   # each machine

torchrun starts the processes and sets RANK / WORLD_SIZE / LOCAL_RANK; `start` joins
them into one process group (`gloo` on CPU, `nccl` on GPUs) and the SGD loop
(`simulator.sgd`) becomes data-parallel:

* every process shuffles the epoch into the same global batches (same seed, same
  `--batch-size` as a single-process run: the global batch); each takes its shard of
  every batch (`Cluster.shard`: whole groups for ranking losses, else items), so an
  epoch's training set is split across the ranks;
* the network is wrapped in `DistributedDataParallel`, whose all-reduce sums each
  process's gradients weighted by its share of the batch's loss terms (`Loss.terms`:
  rows, ranked groups, pairs), so the step is the single-process step on the global
  batch, up to floating-point rounding (exactly, when one rank holds the whole batch);
* validation and the final val/test scores are sharded too: each rank scores its share
  of the workloads (graphs) and the per-workload metrics are merged (`Cluster.evaluate`);
* rank 0 alone prints and writes the checkpoint (atomically, with every rank's RNG
  state) and metrics; `--resume` restarts all ranks from it.

Without torchrun (WORLD_SIZE unset or 1) nothing here is used: a single-process run is
exactly what it was. A TpuGraphs source draws each graph's configs for a step from an
RNG of (seed, step, rank) in a distributed run (instead of the loop's stream), so that
the ranks' loop RNGs stay in step; its numbers then match a single-process run's in
distribution, not draw for draw.
"""
from __future__ import annotations

import datetime
import os
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, NoReturn, Optional, Sequence, Tuple

import numpy as np
import torch

from .registry import SimulatorError

DEVICES = ("cpu", "cuda")
# how long a rank waits at a collective (rank 0 scoring a large validation set, saving)
TIMEOUT = datetime.timedelta(hours=3)


@dataclass(frozen=True)
class Cluster:
    """This process's place in a run: rank, world size, device (the default: one CPU
    process)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: str = "cpu"

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def torch_device(self) -> torch.device:
        return torch.device(f"cuda:{self.local_rank}" if self.device == "cuda" else "cpu")

    # ------------------------------------------------------------------ sharding
    def shard(self, indices: np.ndarray, groups: Optional[np.ndarray]) -> Tuple[np.ndarray, bool]:
        """This rank's part of a global batch and whether it is a stand-in.

        `groups` (ranking losses): whole groups are dealt round-robin in order of first
        appearance, so a group's configs are compared in one process as they would be in
        one batch; else items are dealt round-robin. A rank left without items gets the
        batch's first item as a stand-in whose loss counts zero (every rank must take
        part in the gradient all-reduce)."""
        indices = np.asarray(indices)
        if groups is None:
            local = indices[self.rank::self.world_size]
        else:
            keys = np.asarray(groups)[indices]
            _, first = np.unique(keys, return_index=True)
            order = keys[np.sort(first)]
            local = indices[np.isin(keys, order[self.rank::self.world_size])]
        if len(local) == 0:
            return indices[:1], True
        return local, False

    def step_rng(self, seed: int, step: int) -> np.random.Generator:
        """The RNG a source draws a step's configs from in a distributed run."""
        return np.random.default_rng([seed, 7, step, self.rank])

    def evaluate(self, source, scorer, batch_size: int) -> Dict[str, Dict]:
        """`source.evaluate(scorer, batch_size)`; in a distributed run every rank scores its
        share of the groups (round-robin; each item its own group when the source has no
        groups) and the results are merged (`metrics.merge`), on every rank."""
        if not self.distributed:
            return source.evaluate(scorer, batch_size)
        groups = source.groups
        keys = np.arange(len(source)) if groups is None else np.asarray(groups)
        order = np.unique(keys)
        mine = np.flatnonzero(np.isin(keys, order[self.rank::self.world_size]))
        result = source.subset(mine).evaluate(scorer, batch_size) if len(mine) else {}
        from .metrics import merge
        return merge([r for r in self.gather(result) if r])

    # ------------------------------------------------------------------ collectives
    def all_reduce_sum(self, values: Sequence[float]) -> List[float]:
        tensor = torch.tensor(list(values), dtype=torch.float64, device=self._comm_device)
        torch.distributed.all_reduce(tensor)
        return tensor.tolist()

    def gather(self, obj: Any) -> List[Any]:
        """Every rank's `obj`, by rank (on every rank)."""
        out: List[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(out, obj)
        return out

    @property
    def _comm_device(self) -> torch.device:
        return self.torch_device if self.device == "cuda" else torch.device("cpu")

    def wrap(self, net: torch.nn.Module) -> torch.nn.Module:
        """`net` for training: in a distributed run, DistributedDataParallel around it,
        whose gradient all-reduce sums each rank's gradients times its share of the
        step's loss terms (`grad_share.value`, set before each backward). The
        normalisation buffers are constants, so not broadcast."""
        if not self.distributed:
            return net
        from torch.nn.parallel import DistributedDataParallel
        ddp = DistributedDataParallel(net, device_ids=None, broadcast_buffers=False)
        ddp.grad_share = GradShare()
        ddp.register_comm_hook(ddp.grad_share, _weighted_sum_hook)
        return ddp


class GradShare:
    """This rank's weight in the current step's gradient all-reduce."""

    value: float = 1.0


def _weighted_sum_hook(share: GradShare, bucket):
    """A DDP communication hook: Σ_ranks share_r · g_r (the shares sum to 1). Weighting
    the gradients, not the loss, keeps a rank that holds the whole batch bit-exact with a
    single process (scaling a loss by 2 is not exact through every backward op). No
    return annotation: DDP checks it, and `from __future__ import annotations` would
    make it a string."""
    buffer = bucket.buffer()
    if share.value != 1.0:
        buffer.mul_(share.value)
    future = torch.distributed.all_reduce(buffer, async_op=True).get_future()
    return future.then(lambda f: f.value()[0])


def check_device(device: str, graphs: bool = True) -> None:
    """A clear error for a device this machine (or, for a model that reads `graphs`,
    this DGL) cannot train on."""
    if device not in DEVICES:
        raise SimulatorError(f"--device {device!r}: one of {', '.join(DEVICES)}")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SimulatorError("--device cuda: torch sees no CUDA GPU here (this torch is "
                                 f"{torch.__version__}); leave --device at cpu")
        if not graphs:
            return
        from .dgl_compat import dgl
        try:
            dgl.graph(([0], [0])).to(torch.device("cuda"))
        except Exception as e:  # noqa: BLE001 - DGL's error for a CPU-only build varies
            raise SimulatorError(f"--device cuda: this DGL build cannot hold graphs on the GPU "
                                 f"({str(e).strip().splitlines()[0][:160]}); install a CUDA build of "
                                 f"dgl {dgl.__version__}") from None


def start(device: str = "cpu", graphs: bool = True) -> Cluster:
    """This process's `Cluster`: from torchrun's environment (joining the process group),
    or a single process. `graphs`: the model reads DGL graphs (`check_device`)."""
    check_device(device, graphs)
    if not in_torchrun():
        return Cluster(device=device)
    world = int(os.environ["WORLD_SIZE"])
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device == "cuda":
        torch.cuda.set_device(local_rank)
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if device == "cuda" else "gloo", timeout=TIMEOUT)
    return Cluster(rank, world, local_rank, device)


def stop(cluster: Cluster, finished: bool = False) -> None:
    """Leave the process group. After a finished run every rank waits for the others first:
    a rank that tears gloo down while a peer is still writing can abort at exit
    ("terminate called without an active exception"). After a failure, no wait (the
    others may never come)."""
    if cluster.distributed and torch.distributed.is_initialized():
        if finished:
            torch.distributed.barrier()
        torch.distributed.destroy_process_group()


def in_torchrun() -> bool:
    """Whether this process is one rank of a torchrun run of more than one process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def exit_rank(code: int) -> NoReturn:
    """End a torchrun rank with `code` now, skipping the interpreter's teardown: gloo's
    threads may still hold finished work whose tensors reference Python objects, and
    freeing those while the interpreter shuts down can abort the process ("terminate
    called without an active exception") after the run has written its results — a
    failed exit for a run that succeeded."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
