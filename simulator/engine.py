"""What train, evaluate and predict share besides the model and the data: determinism,
writing results, and whether progress bars are drawn."""
from __future__ import annotations

import contextlib
import json
import math
import os
import random
import sys
from typing import Any, Iterator

import numpy as np
import torch

from extract.fileio import LOCK_NAME, OutputBusyError, atomic_write, output_lock

from .registry import SimulatorError


def stderr_is_terminal() -> bool:
    """Whether progress bars may be drawn (stderr is a terminal); otherwise a few summary
    lines are printed instead (one per epoch, one per stage)."""
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def locked_output(folder: str) -> Iterator[str]:
    """Hold `folder` (created if needed) as this process's output for the block
    (`extract.fileio.output_lock`): a second writer gets a one-line `SimulatorError`
    naming the folder. A folder this call created and left holding nothing is removed."""
    created = not os.path.exists(folder)
    try:
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(output_lock(folder))
            except (OutputBusyError, NotADirectoryError) as e:
                created = False
                raise SimulatorError(str(e)) from None
            yield folder
    finally:
        if created:
            with contextlib.suppress(OSError):
                if os.listdir(folder) == [LOCK_NAME]:
                    os.remove(os.path.join(folder, LOCK_NAME))
                    os.rmdir(folder)


def setup_determinism(seed: int, threads: int) -> None:
    """Same seed and thread count → same numbers."""
    from .dgl_compat import dgl
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    dgl.seed(seed)
    torch.set_num_threads(threads)
    dgl.utils.set_num_threads(threads)
    # torch.use_deterministic_algorithms also sets TorchInductor's flag, importing
    # torch.compile's whole stack (~1.2 s of CPU a process); nothing here compiles
    torch._C._set_deterministic_algorithms(True, warn_only=True)


def write_json(path: str, obj: Any) -> None:
    """Atomically, with sorted keys. A non-finite number is an error (`SimulatorError`
    naming its key), never written as null: metrics carry no NaN — a workload where a
    metric has no value is None already, and the metric's `count` says how many
    workloads its mean is over (`simulator.metrics.evaluate`)."""
    text = json.dumps(_plain(obj, path, ""), indent=2, sort_keys=True)
    with atomic_write(path, "w") as f:
        f.write(text + "\n")


def _plain(obj: Any, path: str, key: str) -> Any:
    if isinstance(obj, dict):
        return {k: _plain(v, path, f"{key}.{k}" if key else str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v, path, f"{key}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, np.generic):
        return _plain(obj.item(), path, key)
    if isinstance(obj, float) and not math.isfinite(obj):
        raise SimulatorError(f"{path}: {key or 'the value'} is {obj}; refusing to write a non-finite number "
                             f"(it would read back as null)")
    return obj
