"""Where the real TpuGraphs raw samples live (shared/ beside the repository), for the tests."""
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RAW = REPO.parent / "shared/data/tpugraphs_raw"
LAYOUT_PB = RAW / "module_tuning_data_layout.pb"
TILE_PB = RAW / "op_tuning_data.pb"
needs_raw = pytest.mark.skipif(not LAYOUT_PB.exists() or not TILE_PB.exists(),
                               reason=f"TpuGraphs raw samples not found under {RAW}")
