"""A layout row widened with what its most-minor dimensions are (`role_columns`).

A row of `node_config_feat` names dimension indices: "dimension 2 of the output is minor".
What makes that fast or slow is what dimension 2 is to the operation — the one a dot
contracts over, a free one, a batch one — and whether it is where XLA would have put it;
the index alone means something else in every program. For files that carry the
configurable nodes' roles and XLA's own layouts (`node_config_roles`,
`node_config_default`: extract/xla/npz_format.py), each config row of a node gets

* for each slot s (output, first, second operand) and each of its `ROLE_POSITIONS`
  most-minor positions k, the one-hot role (`LAYOUT_ROLES`) of the dimension there
  (all zeros where the slot has no dimension k or no layout);
* per (s, k), 1 where that dimension is not the one XLA's own layout has there.

`layout-sum` reads them where the files have them; on the XLA layout collection they lift
its τ on held-out model families' `random` configs by about 0.05, and fewer positions, or
roles or flags alone, gain less (docs/xla_collection.md, "What role a moved dimension plays").
"""
from __future__ import annotations

import numpy as np

from extract.xla.npz_format import LAYOUT_CONFIG_FEATURES, LAYOUT_ROLES

SLOTS = 3
SLOT_WIDTH = LAYOUT_CONFIG_FEATURES // SLOTS
ROLE_POSITIONS = 3
ROLE_COLUMNS = SLOTS * ROLE_POSITIONS * (len(LAYOUT_ROLES) + 1)


def role_columns(feat: np.ndarray, roles: np.ndarray, default: np.ndarray) -> np.ndarray:
    """(c, nc, ROLE_COLUMNS) float32 for config rows `feat` (c, nc, 18) of the nodes whose
    `roles` and XLA layouts `default` are (nc, 18): the role one-hots, slot by slot and
    position by position, then the (s, k) flags (module docstring)."""
    c, nc = feat.shape[:2]
    positions = [s * SLOT_WIDTH + k for s in range(SLOTS) for k in range(ROLE_POSITIONS)]
    dims = feat[:, :, positions].astype(np.int64)                          # (c, nc, P)
    present = dims >= 0
    slot_start = np.repeat(np.arange(SLOTS) * SLOT_WIDTH, ROLE_POSITIONS)  # (P,)
    column = slot_start + np.clip(dims, 0, SLOT_WIDTH - 1)
    role = np.take_along_axis(np.broadcast_to(roles[None], (c, nc, LAYOUT_CONFIG_FEATURES)), column, axis=2)
    role = np.where(role < 0, LAYOUT_ROLES.index("none"), role)           # a slot without roles
    one_hot = np.eye(len(LAYOUT_ROLES), dtype=np.float32)[role] * present[..., None]
    moved = (feat[:, :, positions] != default[None, :, positions]).astype(np.float32)
    return np.concatenate([one_hot.reshape(c, nc, -1), moved], axis=2)
