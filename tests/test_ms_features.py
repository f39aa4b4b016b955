"""benchmarks.metaschedule.features runs end to end on a small setting and reports every figure."""
import json
import math


def test_benchmark_reports_stages_rates_and_search(tmp_path):
    from benchmarks.metaschedule.features import PASS_NAMES, main

    out = tmp_path / "ms_features.json"
    assert main(["--count", "24", "--workloads", "matmul_512", "--cuda", "--workers", "1", "2",
                 "--es-trials", "16", "--es-population", "32", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    (case,) = result["cases"]
    assert case["name"] == "matmul_512" and case["candidates"] == 24 and case["target"] == "llvm"
    assert 10 < case["nodes"]["min"] <= case["nodes"]["mean"] <= case["nodes"]["max"]
    stages = case["stages_ms"]
    assert list(stages["lower_passes"]) == list(PASS_NAMES)
    assert math.isclose(sum(stages["lower_passes"].values()), stages["lower"])
    for key in ("walk", "sample", "prepare", "batch", "forward"):
        assert stages[key] > 0, key
    workers = [w for w in (1, 2) if w <= result["cores"]]
    assert set(case["per_second"]) == {"per_store_xgb", "per_store_only",
                                       *(f"fast_{w}proc" for w in workers)}
    assert all(math.isfinite(v) and v > 0 for v in case["per_second"].values())
    assert set(case["cpu_ms_per_candidate"]) == set(case["per_second"])
    assert all(math.isfinite(v) and v > 0 for v in case["cpu_ms_per_candidate"].values())
    (row,) = result["search"]
    for side in ("gnn", "xgb"):
        assert row[side]["scored"] > 0 and 0 < row[side]["cost_model_s"] <= row[side]["search_s"]
    assert 0 <= row["gnn"]["cache_hit_rate"] <= 1
