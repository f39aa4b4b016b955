"""Regenerate every benchmark result: docs/RESULTS.md, docs/results/*.png|csv|json.

    python -m benchmarks.all                      # the full protocol (see below for its runtime)
    python -m benchmarks.all --stages report      # only rewrite RESULTS.md from saved results (run_info.json unchanged)

Stages (`--stages`, in this order):
  train     every training run, `--parallel` at a time (1 thread each): the accuracy suite
            (models × seeds), the training-fraction sweep (its F = 1 points are the accuracy
            runs) and the tuning's ranking runs; finished runs with the same command line
            are reused (runs/bench/…)
  accuracy  tables of the accuracy suite and the noise ceiling
  sweep     tables of the sweep
  plots     runtime distribution, error/predicted vs measured and learning curves of
            each model (lowest seed), τ per workload, the sweep
  transfer  the transfer matrix (benchmarks.transfer: train on 1, 2, 4, 11 workloads, rank the
            others), why the graphs do not transfer (benchmarks.transfer.analysis of the
            best transfer spec, `--transfer-analysis-spec`) and what transfers: the register
            tile (benchmarks.transfer.families)
  ceiling   a third pass, now, on the quiet machine: pass 2's configs and `--ceiling-count`
            more of pass 1's (`extract.measure --remeasure … --also pass2`); τ of pass 1 and of
            pass 2 against it, to tell measurement noise from load during a pass, with enough
            configs per workload for a per-workload ceiling; and τ of each accuracy run's
            predictions against it, beside pass 1's (quiet_agreement.json)
  tuning    model-guided tuning, measured on this machine (benchmarks.tuning)
  speed     speed and memory vs xgb (benchmarks.speed)
  ms-tuning MetaSchedule tuning of held-out operators with gnn (alone and two-stage), tvm-xgb,
            tvm-xgb-pretrained and random, and their rank quality (benchmarks.metaschedule.tuning,
            `--ms-…` options)
  networks  leave-one-network-out and leave-one-operator-kind-out on the MetaSchedule
            networks dataset, gcn and its rivals xgb / segsum-mlp / tenset-mlp / tlp and the
            size-invariant gcn-inv-arf-noext-lane, 3 seeds, beside its noise ceiling, and with
            the shipped conv2d dataset added; on the operator-kind axis also the transfer
            study's knob-xgb / itervar-xgb (rank and reg), with a mean / worst summary per
            model (benchmarks.networks)
  curves    learning curves: leave-one-network-out on seeded shares of the training tasks and of
            every task's records, gcn and tenset-mlp (benchmarks.learning_curves, `--curve-…` options)
  xla-layout  the cost models judged on the measured XLA layout collection (`--xla-root`, default:
            the shipped datasets/xla_layout_<cpu>; skipped, with one log line, when there is none):
            model families held out, then programs held out (their model's other step trained on);
            per held-out program and search, τ and top-k slowdown beside the noise ceiling and
            XLA's default layout and a rule that learns nothing (benchmarks.xla_layout, `--xla-…` options)
  ms-replay the gnn's online phase replayed offline on the networks dataset's pools, each
            update recipe and way of picking (benchmarks.metaschedule.replay; no kernel timed)
  ms-networks  (not in the default stages: it measures for a day) whole networks tuned with
            gnn / tvm-xgb / tvm-xgb-pretrained / random at 8–64 trials per task, compiled and timed
            end to end (benchmarks.metaschedule.networks, `--e2e-…` options; it resumes and says how
            long it will take)
  report    docs/RESULTS.md (benchmarks.report)
The timing stages (tuning, speed) wait while `extract.measure` is measuring
(`--no-wait` fails instead). The results, runs, tuning-runs and spaces folders are held
by this process while it runs (a second benchmark writing to one of them exits 2 with a
one-line error); every file is written atomically, and every numeric option is
range-checked at parse time. Every count, seed and fraction is an option whose default
is the full protocol; the options that differ from it are listed in RESULTS.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

from simulator.distributed import DEVICES

from . import accuracy, cross_cpu, learning_curves, networks, speed, sweep, tuning, xla_layout
from .metaschedule import networks as ms_networks, replay as ms_replay, tuning as ms_tuning
from .common import (COUNT, DEFAULT_RESULTS, DEFAULT_RUNS, SEED, busy_measuring, cli, dies_with_parent, locked_outputs,
                     log, machine, model_name, output_file, output_folder, run_many, write_json)
from .transfer import analysis, families, matrix, specs

STAGES = ["train", "accuracy", "sweep", "plots", "transfer", "ceiling", "tuning", "speed", "ms-tuning", "ms-replay",
          "networks", "curves", "xla-layout", "cross-cpu", "ms-networks", "report"]
LONG_STAGES = ["ms-networks"]   # measures for a day: run only when asked for
DEFAULT_STAGES = [s for s in STAGES if s not in LONG_STAGES]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.all", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stages", nargs="+", default=DEFAULT_STAGES, choices=STAGES)
    ap.add_argument("--data", nargs="+", default=["shipped"])
    ap.add_argument("--runs", type=output_folder, default=DEFAULT_RUNS, help="training runs go under this folder")
    ap.add_argument("--results", type=output_folder, default=DEFAULT_RESULTS)
    ap.add_argument("--report", type=output_file, default=os.path.join("docs", "RESULTS.md"))
    ap.add_argument("--parallel", type=COUNT, default=2, help="training runs at a time (1 thread each)")
    ap.add_argument("--device", choices=DEVICES, default="cpu",
                    help="the networks, learning-curve and XLA stages' runs train on this device")
    ap.add_argument("--no-wait", action="store_true", help="fail instead of waiting for extract.measure")
    ap.add_argument("--ceiling-logs", nargs=2, default=None, metavar=("FIRST", "SECOND"),
                    help="the two measurement passes for the noise ceiling (default: the shipped dataset's)")
    a = ap.add_argument_group("accuracy")
    a.add_argument("--models", nargs="+", type=model_name, default=accuracy.MODELS)
    a.add_argument("--seeds", nargs="+", type=SEED, default=[0, 1, 2])
    a.add_argument("--epochs", type=COUNT, default=None, help="every training run (default: simulator.train's 60)")
    s = ap.add_argument_group("training-fraction sweep")
    sweep.add_arguments(s, prefix="sweep-")
    t = ap.add_argument_group("tuning")
    tuning.add_arguments(t)
    c = ap.add_argument_group("quiet re-measurement (ceiling stage)")
    c.add_argument("--ceiling-count", type=COUNT, default=1200, help="configs of pass 1 (besides pass 2's)")
    c.add_argument("--ceiling-seed", type=SEED, default=2, help="picks them (pass 2 used seed 1)")
    p = ap.add_argument_group("speed")
    speed.add_arguments(p)
    x = ap.add_argument_group("transfer matrix")
    matrix.add_arguments(x, prefix="transfer-", sizes_models=specs.SIZES_MODELS)
    x.add_argument("--no-transfer-analysis", dest="transfer_analysis", action="store_false",
                   help="skip benchmarks.transfer.analysis in the transfer stage")
    x.add_argument("--transfer-analysis-spec", default=analysis.DEFAULT_SPEC, choices=list(specs.MODEL_SPECS),
                   help="the transfer spec benchmarks.transfer.analysis analyses (RESULTS/transfer_analysis.json; "
                        "transfer_analysis_before.json, the tir-ast-v1 gcn reference, is kept as it is)")
    ms_tuning.add_arguments(ap.add_argument_group("MetaSchedule tuning"))
    ms_networks.add_arguments(ap.add_argument_group("whole networks end to end (benchmarks.metaschedule.networks)"),
                              prefix=ms_networks.ALL_PREFIX)
    n = ap.add_argument_group("networks dataset (benchmarks.networks)")
    networks.add_arguments(n, kind_models=networks.KIND_MODELS)
    learning_curves.add_arguments(ap.add_argument_group("learning curves (benchmarks.learning_curves)"))
    xla_layout.add_arguments(ap.add_argument_group("measured XLA layout collection (benchmarks.xla_layout)"))
    return ap


def protocol_notes(args) -> List[str]:
    """Each option that differs from the full protocol, in words."""
    defaults = build_parser().parse_args([])
    skip = {"stages", "runs", "results", "report", "parallel", "device", "no_wait", "data", "ceiling_logs", "transfer_quiet_log",
            "extraction_log", "tuning_runs", "spaces", "space_workers", "force", "split_run", "networks_data",
            "xla_root"}
    notes = []
    for key, value in vars(args).items():
        if key in skip or getattr(defaults, key, value) == value:
            continue
        full = getattr(defaults, key)
        if key in ("epochs", "tuning_epochs") and full is None:
            full = "60 (simulator.train's default; early stopping after 15 epochs without a better val τ)"
        notes.append(f"`--{key.replace('_', '-')} {_show(value)}` instead of the full protocol's "
                     f"`{_show(full) if full is not None else '(default)'}`")
    if args.epochs is None:
        notes.append("training runs use simulator.train's defaults (60 epochs, early stopping after 15 "
                     "epochs without a better validation τ)")
    return notes


def _show(v: Any) -> str:
    return " ".join(str(x) for x in v) if isinstance(v, (list, tuple)) else str(v)


def wait_quiet(no_wait: bool) -> None:
    if not busy_measuring():
        return
    if no_wait:
        raise SystemExit("extract.measure is running; the timing stages must not overlap it")
    log("waiting for extract.measure to finish before timing …")
    while busy_measuring():
        time.sleep(20)


def training_jobs(args) -> Dict[str, List[Dict[str, Any]]]:
    acc_runs = os.path.join(args.runs, "accuracy")
    acc = accuracy.accuracy_jobs(args.models, args.seeds, acc_runs, args.data, args.epochs)
    sw = sweep.sweep_jobs(args.sweep_models, args.sweep_fractions, args.sweep_seeds, acc_runs, args.data,
                          args.epochs)
    tj = tuning.train_jobs(args.workloads, args.train, args.model, args.tuning_runs, args.data,
                           args.tuning_epochs if args.tuning_epochs is not None else args.epochs,
                           args.train_seed, args.split_run, acc_runs)
    tun = [j for j in {j["out"]: j for j in tj.values()}.values() if j["argv"] is not None]
    return {"accuracy": acc, "sweep": sw, "tuning": tun}


def ordered_unique(groups: Dict[str, List[Dict[str, Any]]], seeds: Sequence[int]) -> List[Dict[str, Any]]:
    """Most useful first (lowest accuracy seed, the tuning runs, the other seeds, the sweep),
    each run folder once."""
    first = [j for j in groups["accuracy"] if j["seed"] == min(seeds)]
    rest = [j for j in groups["accuracy"] if j["seed"] != min(seeds)]
    seen, out = set(), []
    for j in first + groups["tuning"] + rest + groups["sweep"]:
        if j["out"] not in seen:
            seen.add(j["out"])
            out.append(j)
    return out


def suite_plots(args, acc_results, sweep_rows, ceiling) -> None:
    import numpy as np

    from simulator.data.collection import load_data

    from . import plots
    samples = load_data(list(args.data))
    plots.plot_runtime_distribution([s.group for s in samples for _ in range(s.num_configs)],
                                    np.concatenate([s.runtimes for s in samples]),
                                    os.path.join(args.results, "runtime_distribution.png"),
                                    "Measured runtime per workload (shipped dataset)")
    seed = min(args.seeds)
    chosen = [r for r in acc_results if r["seed"] == seed]
    preds = {r["model"]: plots.test_predictions(r["out"], None, samples) for r in chosen}
    plots.plot_scatter(preds, os.path.join(args.results, "error_vs_runtime.png"), "error")
    plots.plot_scatter(preds, os.path.join(args.results, "predicted_vs_measured.png"), "pred")
    hists = {r["model"]: plots.history_of(r["out"]) for r in chosen if r["model"] != "xgb"}
    plots.plot_learning_curves(hists, os.path.join(args.results, "learning_curves.png"))
    acc_summary = accuracy.summarize(acc_results)
    plots.plot_accuracy(acc_summary, ceiling, os.path.join(args.results, "accuracy.png"))
    if sweep_rows:
        plots.plot_sweep(sweep_rows, os.path.join(args.results, "sweep.png"))
    import json
    for name, fn in (("tuning", plots.plot_tuning), ("speed", plots.plot_speed)):
        path = os.path.join(args.results, f"{name}.json")
        if os.path.exists(path):  # redrawn from the saved numbers
            with open(path, encoding="utf-8") as f:
                fn(json.load(f), os.path.join(args.results, f"{name}.png"))


def quiet_ceiling(args, acc_results) -> Dict[str, Any]:
    """Pass 3: pass 2's configs and more of pass 1's, now; noise ceilings of 1 vs 3 and 2 vs 3,
    and the accuracy runs' predictions against pass 3 beside pass 1's measurements."""
    import gzip
    import shutil
    import subprocess

    from datasets import SHIPPED_LOG, SHIPPED_REMEASURE
    from datasets.noise_ceiling import machine_load, noise_ceiling
    from extract.fileio import atomic_write
    from simulator.data.collection import load_data
    first, second = args.ceiling_logs or (str(SHIPPED_LOG), str(SHIPPED_REMEASURE))
    third = os.path.join(args.results, "pass3_quiet.jsonl.gz")  # committed compressed
    log_file = third[:-3]  # extract.measure appends to (and resumes) a plain log
    if os.path.exists(third) and not os.path.exists(log_file):
        with gzip.open(third, "rb") as src, open(log_file, "wb") as dst:
            shutil.copyfileobj(src, dst)
    subprocess.run([sys.executable, "-m", "extract.measure", "--remeasure", first, "--count",
                    str(args.ceiling_count), "--seed", str(args.ceiling_seed), "--also", second, "--log", log_file],
                   check=True, env=dict(os.environ, TQDM_DISABLE="1"), preexec_fn=dies_with_parent())
    with open(log_file, "rb") as src, atomic_write(third, "wb") as raw, \
            gzip.GzipFile(filename=third, mode="wb", fileobj=raw) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(log_file)
    out = {"pass1_vs_pass3": noise_ceiling(first, third), "pass2_vs_pass3": noise_ceiling(second, third),
           "pass1_vs_pass2": noise_ceiling(first, second), "pass1_load": machine_load(first, third), "log": third}
    write_json(os.path.join(args.results, "noise_ceiling_quiet.json"), out)
    write_json(os.path.join(args.results, "quiet_agreement.json"),
               accuracy.quiet_agreement(acc_results, load_data(list(args.data)), first, third))
    return out


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    with locked_outputs(args.results, args.runs, args.tuning_runs, args.spaces):  # one benchmark writing them
        return run_stages(args, argv)


def run_info(args, argv: Optional[Sequence[str]], info_path: str) -> Dict[str, Any]:
    """RESULTS/run_info.json as this run continues it: the commands so far, this machine,
    the options that differ from the full protocol."""
    info: Dict[str, Any] = {}
    if os.path.exists(info_path):
        import json
        with open(info_path, encoding="utf-8") as f:
            info = json.load(f)
    command = " ".join(["python -m benchmarks.all", *(argv if argv is not None else sys.argv[1:])])
    info.setdefault("stages", {})
    info.setdefault("commands", []).append(command)
    info["command"] = command if "train" in args.stages else info.get("command", command)
    info["machine"] = machine()
    info["protocol_notes"] = protocol_notes(args)
    return info


class Stages:
    """The stages of the protocol, each a method; `run` runs one if it was asked for and
    records its wall time in run_info.json. What a later stage reuses (the accuracy runs,
    the noise ceiling, the sweep) is kept in `state`."""

    def __init__(self, args, info: Dict[str, Any], info_path: str):
        self.args, self.info, self.info_path = args, info, info_path
        self.groups = training_jobs(args)
        self.state: Dict[str, Any] = {}

    def run(self, name: str, fn) -> Any:
        if name not in self.args.stages:
            return None
        log(f"== {name}")
        start = time.perf_counter()
        out = fn()
        self.info["stages"][name] = time.perf_counter() - start
        write_json(self.info_path, self.info)
        return out

    def train(self):
        return run_many(ordered_unique(self.groups, self.args.seeds), self.args.parallel)

    def accuracy(self):
        args = self.args
        self.state["acc"] = run_many(self.groups["accuracy"], args.parallel)  # all reused after "train"
        self.state["ceiling"] = accuracy.noise_ceiling(logs=args.ceiling_logs)
        return accuracy.write_outputs(self.state["acc"], args.results, self.state["ceiling"])

    def sweep(self):
        self.state["sweep"] = sweep.write_outputs(run_many(self.groups["sweep"], self.args.parallel), self.args.results)

    def plots(self):
        if "acc" not in self.state:
            self.accuracy()
        suite_plots(self.args, self.state["acc"], self.state.get("sweep"), self.state.get("ceiling"))

    def ceiling(self):
        wait_quiet(self.args.no_wait)
        if "acc" not in self.state:
            self.accuracy()
        return quiet_ceiling(self.args, self.state["acc"])

    def tuning(self):
        wait_quiet(self.args.no_wait)
        return tuning.run(self.args)

    def transfer(self):
        args, runs = self.args, os.path.join(self.args.runs, "transfer")
        matrix.run(args, args.data, runs, args.results, args.parallel, prefix="transfer-")
        if args.transfer_analysis:
            analysis.run(args.data, args.results, args.transfer_analysis_spec, None, args.transfer_epochs,
                         args.transfer_seed, None)
        chosen = [m for m in families.DEFAULT_MODELS if m in args.transfer_models]
        if chosen:  # reads the runs' predictions: only the models the matrix just ran
            write_json(os.path.join(args.results, "transfer_families.json"),
                       families.run(args.data, runs, chosen, families.REPEATS))

    def speed(self):
        wait_quiet(self.args.no_wait)
        return speed.run(self.args)

    def ms_tuning(self):
        wait_quiet(self.args.no_wait)
        return ms_tuning.run(self.args, command=self.info["command"])

    def ms_replay(self):
        return ms_replay.run(ms_replay.build_parser().parse_args(["--results", self.args.results]),
                             command="python -m benchmarks.metaschedule.replay")

    def networks(self):
        return networks.run(self.args)

    def curves(self):
        return learning_curves.run(self.args)

    def xla_layout(self):
        self.args.xla_root = xla_layout.root_of(self.args)
        if self.args.xla_root is None:
            log(f"xla-layout: skipped (no --xla-root and no datasets/{xla_layout.SHIPPED_PREFIX}<cpu> shipped)")
            return None
        return xla_layout.run(self.args)

    def cross_cpu(self):
        """Every pair of shipped CPU datasets that share enough tasks, from each one that
        ships a pre-trained cost model."""
        from datasets.networks import pretrained_path, shipped_datasets

        found = shipped_datasets()
        for a, b in ((a, b) for a in found for b in found if a != b and pretrained_path(found[a]).is_file()):
            try:
                cross_cpu.main(["--source", str(found[a]), "--target", str(found[b]), "--runs", self.args.runs,
                                "--results", self.args.results])
            except SystemExit as e:
                log(f"cross-cpu {a} → {b}: skipped ({e})")

    def ms_networks(self):
        wait_quiet(self.args.no_wait)
        return ms_networks.run_from_all(self.args, command=self.info["command"])


def run_stages(args, argv: Optional[Sequence[str]]) -> int:
    """The stages asked for, with the output folders held (see the module docstring)."""
    os.makedirs(args.results, exist_ok=True)
    if list(args.stages) == ["report"]:   # nothing measured: run_info.json stays the measuring runs' record
        return write_report(args)
    info_path = os.path.join(args.results, "run_info.json")
    info = run_info(args, argv, info_path)
    args.accuracy_runs = os.path.join(args.runs, "accuracy")
    if args.tuning_epochs is None and args.epochs is not None:
        args.tuning_epochs = args.epochs
    stages = Stages(args, info, info_path)
    for name in STAGES:
        if name != "report":
            stages.run(name, getattr(stages, name.replace("-", "_")))
    info["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    write_json(info_path, info)
    return write_report(args) if "report" in args.stages else 0


def write_report(args) -> int:
    from .report import build

    build(args.results, args.report)
    log(f"wrote {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
