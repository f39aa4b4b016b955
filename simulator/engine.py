"""What train, evaluate and predict share besides the model and the data: determinism
and writing results."""
from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import torch

from extract.fileio import atomic_write


def setup_determinism(seed: int, threads: int) -> None:
    """Same seed and thread count → same numbers."""
    from .dgl_compat import dgl
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    dgl.seed(seed)
    torch.set_num_threads(threads)
    dgl.utils.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)


def write_json(path: str, obj: Any) -> None:
    """Atomically, with sorted keys, NaN as null."""
    with atomic_write(path, "w") as f:
        json.dump(_finite(obj), f, indent=2, sort_keys=True)
        f.write("\n")


def _finite(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    if isinstance(obj, np.generic):
        return _finite(obj.item())
    return obj
