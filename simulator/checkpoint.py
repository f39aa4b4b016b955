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
    checksum        SHA-256 of every other entry (`state_digest`: each tensor's dtype, shape
                    and bytes, each plain value, dict keys in sorted order), written by
                    `save_checkpoint` and verified by `load_checkpoint`: a checkpoint whose
                    archive is intact but whose tensors were changed (a flipped byte, a
                    tensor replaced) is refused with a one-line error naming the file

A run's metrics.json names the weights it was computed from (`weights_digest`, the
SHA-256 of the evaluated weights, with the epoch and step), so evaluate/predict can
tell a metrics.json that belongs to another run's checkpoint.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import struct
import sys
import zipfile
from typing import Any, Dict, Optional

import numpy as np
import torch

from extract.fileio import atomic_write

from .registry import SimulatorError

CHECKPOINT_FORMAT = "tpsim-simulator-1"
CHECKPOINT_NAME = "checkpoint.pt"
REQUIRED = ("format", "config", "info", "normalization")
CHECKSUM = "checksum"
WEIGHT_ENTRIES = ("best_model", "model", "xgb")  # what a model's predictions depend on


def _feed(h: "hashlib._Hash", obj: Any) -> None:
    """Feed `obj` into `h`, unambiguously (a type tag and a length before every value)."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        h.update(b"T" + f"{t.dtype}:{tuple(t.shape)}:{len(data)}:".encode())
        h.update(data)
    elif isinstance(obj, np.ndarray):
        data = np.ascontiguousarray(obj).tobytes()
        h.update(b"A" + f"{obj.dtype.str}:{obj.shape}:{len(data)}:".encode())
        h.update(data)
    elif isinstance(obj, dict):
        h.update(b"D" + f"{len(obj)}:".encode())
        for key in sorted(obj, key=lambda k: (type(k).__name__, str(k))):
            _feed(h, key)
            _feed(h, obj[key])
    elif isinstance(obj, (list, tuple)):
        h.update((b"L" if isinstance(obj, list) else b"U") + f"{len(obj)}:".encode())
        for item in obj:
            _feed(h, item)
    elif obj is None or isinstance(obj, bool):
        h.update(b"N" if obj is None else (b"b1" if obj else b"b0"))
    elif isinstance(obj, (int, np.integer)):
        text = str(int(obj)).encode()
        h.update(b"I" + f"{len(text)}:".encode() + text)
    elif isinstance(obj, (float, np.floating)):
        h.update(b"F" + struct.pack("<d", float(obj)))
    elif isinstance(obj, str):
        data = obj.encode("utf-8", "surrogatepass")
        h.update(b"S" + f"{len(data)}:".encode() + data)
    elif isinstance(obj, (bytes, bytearray)):
        h.update(b"B" + f"{len(obj)}:".encode() + bytes(obj))
    else:
        raise TypeError(f"state_digest: cannot hash a {type(obj).__name__}")


def state_digest(obj: Any) -> str:
    """SHA-256 (hex) of a checkpoint entry or a whole checkpoint: tensors by dtype, shape
    and bytes, plain values by type and value, dict keys in sorted order."""
    h = hashlib.sha256()
    _feed(h, obj)
    return h.hexdigest()


def weights_entry(state: Dict[str, Any], which: str = "best_model") -> Optional[Any]:
    """The entry holding the weights a model loaded from `state` would use."""
    for key in (which, "model", "xgb"):
        if state.get(key) is not None:
            return state[key]
    return None


def weights_digest(state: Dict[str, Any], which: str = "best_model") -> Optional[str]:
    """SHA-256 of the weights `load_weights(state, which)` would take (None: no weights)."""
    entry = weights_entry(state, which)
    return None if entry is None else state_digest(entry)


def checkpoint_record(state: Dict[str, Any]) -> Dict[str, Any]:
    """What a run's metrics.json records of the checkpoint it was computed from: the file
    name, the SHA-256 of the evaluated (best) weights, and the epoch and step (SGD runs)."""
    record: Dict[str, Any] = {"file": CHECKPOINT_NAME, "weights_sha256": weights_digest(state)}
    record.update({k: int(state[k]) for k in ("epoch", "step") if state.get(k) is not None})
    return record


def run_folder_of(path: str) -> str:
    """The run folder of `path` (a run folder, or a checkpoint file in one)."""
    return path if os.path.isdir(path) else os.path.dirname(path) or "."


def metrics_mismatch(path: str, state: Dict[str, Any]) -> Optional[str]:
    """A one-line warning when the metrics.json beside the checkpoint at `path` was
    computed from other weights than the checkpoint holds (None: they agree, or there is
    no metrics.json, or it predates the record)."""
    metrics_path = os.path.join(run_folder_of(path), "metrics.json")
    if not os.path.exists(metrics_path):
        return None
    try:
        with open(metrics_path, encoding="utf-8") as f:
            recorded = json.load(f).get("checkpoint")
    except (OSError, ValueError, AttributeError) as e:
        return f"{metrics_path}: unreadable ({type(e).__name__}); it may not describe this checkpoint"
    if not isinstance(recorded, dict) or "weights_sha256" not in recorded:
        return None
    actual = checkpoint_record(state)
    if recorded.get("weights_sha256") == actual["weights_sha256"]:
        return None

    def show(r: Dict[str, Any]) -> str:
        return f"epoch {r.get('epoch', '-')}, step {r.get('step', '-')}, weights {str(r.get('weights_sha256'))[:12]}…"
    return (f"{metrics_path} was computed from other weights ({show(recorded)}) than the checkpoint holds "
            f"({show(actual)}); its numbers do not describe this checkpoint")


def save_checkpoint(path: str, state: Dict[str, Any]) -> None:
    """Atomically, with the format and a checksum of every entry."""
    state = {k: v for k, v in state.items() if k != CHECKSUM}
    state["format"] = CHECKPOINT_FORMAT
    state[CHECKSUM] = state_digest(state)
    with atomic_write(path, "wb") as f:
        torch.save(state, f)


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
    verify(path, state)
    return state


def verify(path: str, state: Dict[str, Any]) -> None:
    """The checksum stored with the checkpoint matches its entries, and its weights are
    finite; else a one-line `SimulatorError` naming the file."""
    stored = state.get(CHECKSUM)
    if stored is None:
        print(f"warning: {path}: written without a checksum (an older checkpoint); its weights "
              f"cannot be verified", file=sys.stderr)
    else:
        try:
            actual = state_digest({k: v for k, v in state.items() if k != CHECKSUM})
        except TypeError as e:
            raise SimulatorError(f"{path}: damaged checkpoint ({e})") from None
        if actual != stored:
            raise SimulatorError(f"{path}: damaged checkpoint: its contents do not match the checksum "
                                 f"stored with them (sha256 {actual[:12]}…, stored {str(stored)[:12]}…)")
    for key in WEIGHT_ENTRIES:
        weights = state.get(key)
        if not isinstance(weights, dict):
            continue
        for name, tensor in weights.items():
            if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and \
                    not bool(torch.isfinite(tensor).all()):
                bad = tensor[~torch.isfinite(tensor)].reshape(-1)[0].item()
                raise SimulatorError(f"{path}: {key} weight {name!r} holds a non-finite value "
                                     f"({'nan' if math.isnan(bad) else bad}); the run diverged or the "
                                     f"file was changed")
