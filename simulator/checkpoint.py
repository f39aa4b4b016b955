"""Atomic checkpoints (`extract.fileio.atomic_write`): a kill leaves either the old
checkpoint or the new one, never half of one.

A checkpoint is a dict of tensors and plain Python values (loadable with
`torch.load(weights_only=True)`); the typed objects are stored as dicts:

    format          CHECKPOINT_FORMAT
    config          the run's config, `TrainConfig.to_dict()` (flat, the flags' names)
    info            `ModelInfo.to_dict()`: feature_dim, num_types, vector_dims, vocabulary
                    (the data's node-type names, used to map other data's types on load),
                    feature_names, extractor_version, groups, config dims, tpugraphs
    normalization   `Normalization.to_dict()`: training-set mean/std of node features,
                    vectors, config features and log runtimes
    split           item names of each part (train, val, test)
    model           state dict of the current weights (includes the normalisation buffers)
    best_model      state dict of the weights with the best validation score so far
    optimizer, scheduler, epoch, step, rng, best_score, best_epoch, bad_epochs,
    history, finished
    xgb             (xgb runs) the booster as JSON text
"""
from __future__ import annotations

import os
import pickle
import zipfile
from typing import Any, Dict

import torch

from extract.fileio import atomic_write

from .registry import SimulatorError

CHECKPOINT_FORMAT = "tpsim-simulator-1"
CHECKPOINT_NAME = "checkpoint.pt"
REQUIRED = ("format", "config", "info", "normalization")


def save_checkpoint(path: str, state: Dict[str, Any]) -> None:
    with atomic_write(path, "wb") as f:
        torch.save(dict(state, format=CHECKPOINT_FORMAT), f)


def load_checkpoint(path: str) -> Dict[str, Any]:
    """The checkpoint at `path` (a file, or a run folder holding checkpoint.pt).
    Anything wrong is a one-line `SimulatorError` naming the file."""
    if os.path.isdir(path):
        path = os.path.join(path, CHECKPOINT_NAME)
    if not os.path.exists(path):
        raise SimulatorError(f"{path}: no such checkpoint")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, pickle.UnpicklingError, EOFError, OSError, ValueError, zipfile.BadZipFile,
            AttributeError, TypeError, IndexError, KeyError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SimulatorError(f"{path}: not a readable checkpoint ({reason[:200]})") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise SimulatorError(f"{path}: not a simulator checkpoint (format {found!r}, "
                             f"expected {CHECKPOINT_FORMAT!r})")
    missing = [k for k in REQUIRED if k not in state]
    if missing:
        raise SimulatorError(f"{path}: checkpoint lacks {', '.join(missing)}")
    return state
