"""Every cost model of `simulator.tune` tunes a tiny dense and leaves a
MetaSchedule database that the database reader reads back; GNNCostModel's save/load.

The command line itself (`tune.run`, a cold gnn) is the `ms_tuned` fixture of conftest;
here the other cost models share one builder (its workers start once: ~20 s), with
4 trials each. Measuring: extract.metaschedule.runner's protocol on the last core this process may
use (under `taskset -c 0`: core 0)."""
import json
import os

import numpy as np
import pytest

from conftest import MS_SMALL

TINY = "dense_16x16x32"


@pytest.fixture(scope="module")
def gnn_run(tmp_path_factory):
    """A simulator.train run on the committed database (1 epoch): a pre-trained gnn, on
    MetaSchedule data's default feature set (its derived columns computed for every candidate)."""
    import json

    from simulator import train

    out = tmp_path_factory.mktemp("gnn_run") / "run"
    cache = str(tmp_path_factory.mktemp("cache"))
    assert train.main(["--data", MS_SMALL, "--model", "gcn", "--split", "random", "--epochs", "1", "--threads", "1",
                       "--out", str(out), "--cache-dir", cache]) == 0
    with open(out / "metrics.json", encoding="utf-8") as f:
        assert json.load(f)["config"]["features"] == "full"
    return str(out)


@pytest.fixture(scope="module")
def stores_run(tmp_path_factory):
    """A pre-trained `segsum-mlp` (1 epoch): a model that reads the candidates' store rows."""
    from simulator import train

    out = tmp_path_factory.mktemp("stores_run") / "run"
    cache = str(tmp_path_factory.mktemp("cache"))
    assert train.main(["--data", MS_SMALL, "--model", "segsum-mlp", "--split", "random", "--epochs", "1",
                       "--threads", "1", "--out", str(out), "--cache-dir", cache]) == 0
    return str(out)


@pytest.fixture(scope="module")
def tuned_each(tmp_path_factory, gnn_run, stores_run):
    """{cost model: (work dir, TuneResult)} for tvm-xgb, tvm-xgb-pretrained (on the committed
    database), mlp, random, gnn from `gnn_run` and gnn from `stores_run` (`gnn-stores`), one
    shared builder."""
    from extract.metaschedule.runner import MeasureConfig, make_builder, make_runner
    from extract.tir.workloads import parse_workload
    from simulator.metaschedule import cost_model as ms_costmodel, tune

    target = tune.parse_target(None)
    measure = MeasureConfig.for_machine()
    builder, runner = make_builder(measure, target), make_runner(measure)
    settings = tune.SearchSettings(trials=4, trials_per_iter=4, population=8, init_min_unmeasured=4,
                                   genetic_num_iters=1, seed=1)
    out = {}
    try:
        checkpoints = {"gnn": gnn_run, "gnn-stores": stores_run}
        for label in ("tvm-xgb", "tvm-xgb-pretrained", "tvm-mlp", "random", "gnn", "gnn-stores"):
            task = tune._task(TINY, parse_workload(TINY).prim_func(), target)
            model = ms_costmodel.make_cost_model(label.split("-stores")[0], checkpoints.get(label), seed=1,
                                                 pretrain_data=[MS_SMALL] if label == "tvm-xgb-pretrained" else ())
            work = str(tmp_path_factory.mktemp(label.replace("-", "_")))
            out[label] = (work, tune.tune([task], target, model, work, settings, measure, builder, runner,
                                          quiet=True), model)
    finally:
        builder.pool.shutdown(wait=False)
    return out


@pytest.mark.parametrize("name", ["tvm-xgb", "tvm-xgb-pretrained", "tvm-mlp", "random", "gnn", "gnn-stores"])
def test_each_cost_model_tunes_and_writes_a_readable_database(tuned_each, name):
    from extract.metaschedule.database import database_samples

    work, result, model = tuned_each[name]
    (task,) = result.tasks
    assert task["trials"] == 4 and len(result.history) == 4
    samples, report = database_samples(work)
    assert len(samples) == task["trials"] - task["errors"] > 0
    assert {s.group for s in samples} == {task["key"]}
    best = min(s.runtimes[0] for s in samples)
    assert task["best_s"] == pytest.approx(best, rel=1e-6)
    assert result.cost_model_stats["predict_calls"] >= 1 and result.cost_model_stats["update_calls"] == 1
    assert 0 <= result.cost_model_share <= 1


def test_pretrained_gnn_scores_candidates_before_any_measurement(tuned_each):
    _, result, model = tuned_each["gnn"]
    assert not model.is_cold and model.stats.random_predictions == 0 and model.stats.scored > 0
    assert sum(len(v) for v in model.measured.values()) == 4


def test_store_row_model_scores_candidates_by_their_store_rows(tuned_each):
    """The candidates of a model that reads store rows get MetaSchedule's PerStoreFeature
    rows, as the dataset's extractor packs them: what it was trained on."""
    _, _, model = tuned_each["gnn-stores"]
    assert model.model.config.model.model == "segsum-mlp" and model.stats.scored > 0
    samples = [s for group in model.measured.values() for s in group]
    rows = np.stack([s.vectors["per_store_rows"][0] for s in samples])
    assert rows.shape[1] % 165 == 0 and (rows.reshape(len(rows), -1, 165)[:, 0, 0] == 1).all()
    assert np.isfinite(model.model.predict(samples)).all()


def test_cold_gnn_trains_after_min_measured_and_scores_higher_is_faster(ms_tuned):
    """The cold model of the CLI run: random until 8 measurements, then trained; its
    scores are float64, one per candidate, finite."""
    _, spy, summary, inner = ms_tuned
    assert inner.stats.trained_at == 8 and not inner.is_cold
    assert all(out.dtype == np.float64 and out.shape == (len(mods),) for mods, out in spy.predicted)
    samples = [s for group in inner.measured.values() for s in group]
    score = -np.asarray(inner.model.predict(samples))
    assert np.isfinite(score).all()
    assert len(summary["history"]) == 16


def test_gnn_cost_model_save_load_round_trip(ms_tuned, tmp_path):
    from simulator.metaschedule.cost_model import GNNCostModel

    inner = ms_tuned[3]
    path = str(tmp_path / "gnn.pt")
    inner.save(path)
    again = GNNCostModel()
    again.load(path)
    samples = [s for group in inner.measured.values() for s in group]
    assert {k: len(v) for k, v in again.measured.items()} == {k: len(v) for k, v in inner.measured.items()}
    np.testing.assert_allclose(again.model.predict(samples), inner.model.predict(samples), rtol=1e-6)
    with pytest.raises(ValueError, match="cold"):
        GNNCostModel().save(str(tmp_path / "cold.pt"))


def test_tune_summary_and_refused_rerun(ms_tuned, capsys):
    from simulator.metaschedule import tune

    work, _, summary, _ = ms_tuned
    saved = json.loads(open(os.path.join(work, tune.SUMMARY)).read())
    assert saved["cost_model"] == "gnn" and saved["tasks"][0]["trials"] == 16
    measure = saved["settings"]["measure"]
    assert (measure["number"], measure["min_repeat_ms"], measure["enable_cpu_cache_flush"]) == (1, 20, False)
    assert measure["build_timeout_s"] > 0 and measure["run_timeout_s"] > 0
    assert tune.main(["dense_32x32x48", "--trials", "4", "--work-dir", work]) != 0
    assert "holds a run of another command" in capsys.readouterr().err


def test_search_keeps_off_the_measuring_core_and_gets_its_cores_back():
    import threading

    from extract.metaschedule.runner import MeasureConfig, off_measure_core

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    before = os.sched_getaffinity(0)
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)   # a thread that exists before (torch's pool, say)
    worker.start()
    try:
        with off_measure_core(MeasureConfig(measure_core=cores[-1], build_cores=(cores[0],))):
            assert {os.sched_getaffinity(int(t)) == {cores[0]} for t in os.listdir("/proc/self/task")} == {True}
        assert os.sched_getaffinity(worker.native_id) == before == os.sched_getaffinity(0)
        with off_measure_core(MeasureConfig(measure_core=cores[0], build_cores=(cores[0],))):  # one core: shared
            assert os.sched_getaffinity(0) == before
    finally:
        stop.set()
        worker.join()


def test_torch_threads_inside_and_restored_after():
    import torch

    from simulator.metaschedule.cost_model import torch_threads

    before = torch.get_num_threads()
    with torch_threads(before + 1):
        assert torch.get_num_threads() == before + 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError):
        with torch_threads(1):
            raise RuntimeError("a failing predict")
    assert torch.get_num_threads() == before
