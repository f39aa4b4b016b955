"""benchmarks.ms_tuning's pure parts: best-so-far at trial points, rank metrics, the held-out check."""
import pytest


def test_best_at_reads_the_best_so_far_and_none_when_not_reached():
    from benchmarks.ms_tuning import best_at

    history = [{"trial": i + 1, "best_s": b} for i, b in enumerate([None, 3.0, 2.0, 2.0, 1.0])]
    assert best_at(history, [1, 2, 4, 5, 6]) == {"1": None, "2": 3.0, "4": 2.0, "5": 1.0, "6": None}


def test_rank_metrics():
    from benchmarks.ms_tuning import kendall_tau, topk_recall

    runtime = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert kendall_tau([6, 5, 4, 3, 2, 1], runtime) == pytest.approx(1.0)   # higher score = faster
    assert kendall_tau([1, 2, 3, 4, 5, 6], runtime) == pytest.approx(-1.0)
    assert kendall_tau([1, 1, 1, 1, 1, 1], runtime) is None                 # undefined, never NaN
    assert topk_recall([6, 5, 0, 0, 0, 9], runtime, 2) == pytest.approx(0.5)
    assert topk_recall([1, 2], [1.0, 2.0], 2) is None                        # too few records


def test_an_operator_in_the_pretraining_data_is_refused():
    from benchmarks.ms_tuning import held_out
    from extract.ms_runner import host_target
    from extract.ms_workload import workload_key
    from extract.workloads import parse_workload

    target = host_target(1)
    key = workload_key(parse_workload("dense_16x16x32").prim_func(), target)
    assert held_out(["dense_16x16x32"], {"other"}, target) == {"dense_16x16x32": key}
    with pytest.raises(SystemExit, match="not held out: dense_16x16x32"):
        held_out(["dense_16x16x32"], {key}, target)
