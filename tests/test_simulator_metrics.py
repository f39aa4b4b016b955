"""Metrics against values worked out by hand."""
import math

import numpy as np
import pytest

from simulator.metrics import METRICS, evaluate, format_table, topk_score
from simulator.registry import SimulatorError


def m(name, p, t):
    return METRICS.get(name).fn(np.asarray(p, float), np.asarray(t, float))


T = [1.0, 2.0, 3.0, 4.0]   # measured seconds
P = [2.0, 1.0, 3.0, 4.0]   # predicted: configs 0 and 1 swapped


def test_kendall_tau_and_opa_by_hand():
    # 6 pairs, only (0, 1) is discordant: τ = (5 − 1) / 6, OPA = 5 / 6
    assert m("kendall_tau", P, T) == pytest.approx(4 / 6)
    assert m("opa", P, T) == pytest.approx(5 / 6)
    # a tie in the prediction counts half a pair
    assert m("opa", [1, 1, 2, 3], T) == pytest.approx(5.5 / 6)
    assert m("kendall_tau", [5, 5, 5, 5], T) == 0.0
    assert m("kendall_tau", T[::-1], T) == pytest.approx(-1.0)


def test_slowdowns_and_errors_by_hand():
    # model's top-1 is config 1 (measured 2 s) while the best is 1 s: 100% slower
    assert m("top1_slowdown", P, T) == pytest.approx(1.0)
    # top-5 holds all four configs, so it contains the best: no slowdown
    assert m("top5_slowdown", P, T) == 0.0
    assert m("top10_slowdown", P, T) == 0.0
    assert m("top5_slowdown", [6, 3, 2, 1, 0, 5, 4], [1, 9, 9, 9, 9, 9, 9]) == pytest.approx(8.0)
    # APE of the top-1 choice: predicted 1 s, measured 2 s
    assert m("top1_ape", P, T) == pytest.approx(0.5)
    assert m("mape", P, T) == pytest.approx((1 + 0.5) / 4)
    assert m("l1_ms", P, T) == pytest.approx(500.0)
    assert m("l1_log", P, T) == pytest.approx(math.log(2) / 2)


def test_evaluate_means_over_workloads():
    t = np.log([1, 2, 3, 4, 1, 2, 5])
    p = np.log([2, 1, 3, 4, 1, 2, 5])
    groups = ["C2"] * 4 + ["C10"] * 2 + ["C3"]
    out = evaluate(p, t, groups)
    tau = out["kendall_tau"]
    assert tau["per_workload"] == {"C2": pytest.approx(4 / 6), "C3": None, "C10": pytest.approx(1.0)}
    assert list(tau["per_workload"]) == ["C2", "C3", "C10"]   # natural order
    assert tau["mean"] == pytest.approx((4 / 6 + 1.0) / 2)     # C3 (one config) has no τ
    assert out["top1_slowdown"]["mean"] == pytest.approx(1.0 / 3)
    table = format_table(out, "test")
    assert "C10" in table and "mean" in table and "100.00%" in table


def test_top5_recall_by_hand():
    t = [1, 2, 3, 4, 5, 6, 7, 8]            # the 5 fastest: configs 0…4
    assert m("top5_recall", t, t) == 1.0
    assert m("top5_recall", t[::-1], t) == pytest.approx(2 / 5)  # model picks 3…7: 3 and 4 are right
    assert math.isnan(m("top5_recall", [1, 2, 3], [1, 2, 3]))   # ≤ 5 configs: no value


def test_topk_score_by_hand():
    # two tasks: weights 2 and 1, fastest 1 ms and 10 ms; picks 50% and 0% slower
    assert topk_score([1.0, 10.0], [0.5, 0.0], [2, 1]) == pytest.approx((2 + 10) / (2 * 1.5 + 10))
    assert topk_score([3.0], [0.0], [1]) == 1.0
    assert m("best_ms", P, T) == pytest.approx(1000.0)
    # the top-5 slowdown of evaluate's per-workload values and best_ms give the picks' latency back
    out = evaluate(np.log([2.0, 1.0, 3.0]), np.log([0.001, 0.004, 0.002]), ["a"] * 3)
    assert out["best_ms"]["per_workload"]["a"] == pytest.approx(1.0)
    assert out["best_ms"]["per_workload"]["a"] * (1 + out["top1_slowdown"]["per_workload"]["a"]) == pytest.approx(4.0)
    for bad in (([1.0], [float("nan")], [1]), ([1.0], [0.1], [-1]), ([], [], []), ([0.0], [0.1], [1]),
                ([1.0, 2.0], [0.1], [1, 1])):
        with pytest.raises(SimulatorError):
            topk_score(*bad)
