"""Where the real TpuGraphs raw samples live, for the tests: shared/ beside the repository,
or the folder $TPUGRAPHS_RAW names (as tests/test_xla_training.py reads it; a git worktree
elsewhere has no shared/ beside it)."""
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RAW = Path(os.environ.get("TPUGRAPHS_RAW", REPO.parent / "shared/data/tpugraphs_raw"))
LAYOUT_PB = RAW / "module_tuning_data_layout.pb"
TILE_PB = RAW / "op_tuning_data.pb"
needs_raw = pytest.mark.skipif(not LAYOUT_PB.exists() or not TILE_PB.exists(),
                               reason=f"TpuGraphs raw samples not found under {RAW}")
