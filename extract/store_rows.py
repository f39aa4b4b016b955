"""MetaSchedule's `PerStoreFeature` rows, unpooled, as one fixed-width vector per config.

TVM computes one 164-wide row per buffer store of a scheduled program (C++,
`ms.feature_extractor.PerStoreFeature`). TenSet's MLP and MetaSchedule's `MLPModel` read
the rows themselves (an MLP per row, summed over the program's rows), where the `xgb`
baseline reads them pooled. A `GraphSample`'s vectors are fixed-width per config, so the
rows travel as `STORE_SLOTS` slots of `1 + 164` values: a presence flag, then the row;
absent slots are all zero. A program with more stores than slots (none in the networks
dataset: at most 6) keeps its first `STORE_SLOTS - 1` rows and sums the rest into the last
slot, whose flag then counts the rows summed; `pack_store_rows` returns how many rows were
summed so that the extractor records it (`meta.extra["store_cut"]`), never silently.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

STORE_ROW_WIDTH = 164       # one PerStoreFeature row
STORE_SLOTS = 16            # rows kept per program
SLOT_WIDTH = 1 + STORE_ROW_WIDTH
STORE_ROWS_VECTOR = "per_store_rows"
STORE_ROWS_VERSION = 1      # part of the extraction cache's key: a change here re-extracts


def pack_store_rows(rows: np.ndarray) -> Tuple[np.ndarray, int]:
    """(the (STORE_SLOTS · SLOT_WIDTH,) float32 vector of `rows` (s, 164), the number of
    rows summed into the last slot because s > STORE_SLOTS; 0 when none)."""
    rows = np.asarray(rows, dtype=np.float64).reshape(-1, STORE_ROW_WIDTH)
    slots = np.zeros((STORE_SLOTS, SLOT_WIDTH), dtype=np.float64)
    kept = min(len(rows), STORE_SLOTS)
    cut = 0
    if len(rows) > STORE_SLOTS:
        kept = STORE_SLOTS - 1
        cut = len(rows) - kept
        slots[kept, 0] = cut
        slots[kept, 1:] = rows[kept:].sum(0)
    slots[:kept, 0] = 1.0
    slots[:kept, 1:] = rows[:kept]
    return slots.reshape(-1).astype(np.float32), cut


def unpack_store_rows(vectors: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(present (n, STORE_SLOTS) bool, rows (n, STORE_SLOTS, 164)) of packed vectors (n, ·)."""
    slots = np.asarray(vectors).reshape(len(vectors), -1, SLOT_WIDTH)
    return slots[:, :, 0] > 0, slots[:, :, 1:]
