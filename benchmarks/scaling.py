"""Scaling figures: training throughput with 1 vs 2 processes (torchrun) on
this machine, and the per-graph costs `docs/SCALING.md` scales up to TpuGraphs' layout
collections.

    python -m benchmarks.scaling throughput [--processes 1 2] [--epochs 4]
    python -m benchmarks.scaling per-graph [--nodes 10000 40000] [--configs-per-graph 8]
    python -m benchmarks.scaling all          # both; docs/results/scaling.json
    (`--json FILE`: write the results there too)

throughput: `simulator.train` on the shipped data (cross-workload split, gcn, `--batch-size` 64,
one thread per process), run as one process and through `torchrun --nproc_per_node N`
with the same global batch, the process counts interleaved `--rounds` times in one
invocation, on the cores this process may use (pin it: `taskset -c 0,1 python -m …`).
Per count, the median over every run's epochs after the first (validation excluded) of
training graphs/s (wall) and of training graphs per CPU second of the busiest rank (what
a core of its own per rank gives, waiting excluded: robust to other load), each also as a
ratio to the first count's; and the CPU seconds of each whole run (start-up, data,
validation and scoring included). Wall graphs/s of a 2-process run need two free cores.

per-graph: one TpuGraphs layout graph at a time — the real module of
`$TPUGRAPHS_RAW/module_tuning_data_layout.pb` (3,163 nodes) and synthetic HLO graphs
(`benchmarks.large_graph.synthetic_module`) of `--nodes` nodes with 2% of their nodes
configurable (the real module's share) — written as npz and read back through the
training code (`TpuGraphsSource`, gcn width 64 depth 3, early join, listmle, pruning to
`--depth` hops, one thread). Timed, each the median of `--repeats`:

  batch_cold     read the graph, prune, read k config rows, build the batch (cache miss)
  batch_warm     read k config rows, build the batch (graph in the LRU cache)
  step           forward + backward + AdamW step on that batch
  score_per_config  scoring every config of the graph (evaluation), per config

each in wall seconds (`…_s`) and CPU seconds of the process (`…_cpu_s`: what the stage
costs a core of its own, robust to other load on a shared machine), plus the graph's
pruned size, the batch's node count and the step's peak memory.
Prints one JSON object.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from extract.fileio import atomic_write

from .common import DEFAULT_RESULTS, dies_with_parent, log

RAW_LAYOUT = Path(os.environ.get("TPUGRAPHS_RAW", Path(__file__).resolve().parents[2] / "shared/data/tpugraphs_raw")) \
    / "module_tuning_data_layout.pb"
CONFIGURABLE_SHARE = 0.02  # the real layout module: 62 configurable nodes of 3,163


# ---------------------------------------------------------------- throughput
def train_command(processes: int, out: str, epochs: int, batch_size: int = 64,
                  extra: Sequence[str] = ()) -> List[str]:
    """`simulator.train` as one process, or through torchrun with `processes` ranks."""
    args = ["--split", "cross-workload", "--model", "gcn", "--epochs", str(epochs), "--threads", "1",
            "--batch-size", str(batch_size), "--patience", str(epochs + 1), "--out", out, "--overwrite", *extra]
    if processes == 1:
        return [sys.executable, "-m", "simulator.train", *args]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes),
            "-m", "simulator.train", *args]


def run_once(processes: int, folder: str, epochs: int, batch_size: int) -> Dict[str, Any]:
    """One training run; its per-epoch history and the CPU seconds of all its processes."""
    from simulator.checkpoint import load_checkpoint
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.getcwd())
    done = subprocess.run(train_command(processes, folder, epochs, batch_size), env=env, capture_output=True, text=True,
                          preexec_fn=dies_with_parent())
    if done.returncode != 0:
        raise RuntimeError(f"{processes}-process run failed:\n{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    state = load_checkpoint(folder)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"history": state["history"], "train_graphs": len(state["split"]["train"]), "cpu_s": cpu}


def summarize(runs: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The figures of one process count's runs (each `run_once`'s result): the median over
    every run's epochs after the first of

    graphs_per_s          training graphs / wall second of the epoch;
    graphs_per_rank_cpu_s training graphs / the CPU seconds of the busiest rank in the epoch:
                          the graphs/s with a core of its own per rank, waiting excluded
                          (robust to other load on a shared machine)."""
    def later(run):
        return run["history"][1:] or run["history"]
    wall = [h["graphs_per_s"] for run in runs for h in later(run)]
    cpu = [h["graphs_per_s"] * h["seconds"] / max(h["cpu_s_by_rank"]) for run in runs for h in later(run)]
    return {"graphs_per_s": round(statistics.median(wall), 1),
            "graphs_per_rank_cpu_s": round(statistics.median(cpu), 1),
            "epochs_measured": len(wall), "run_cpu_s": [round(run["cpu_s"], 1) for run in runs],
            "train_graphs": runs[0]["train_graphs"]}


def throughput(processes: Sequence[int], epochs: int, rounds: int, batch_size: int, folder: str) -> Dict[str, Any]:
    """Training graphs/s per process count, the counts' runs interleaved (`rounds` times
    each) in one invocation, and each count's figures as a ratio to the first count's."""
    import torch
    cores = sorted(os.sched_getaffinity(0))
    runs: Dict[int, List[Dict[str, Any]]] = {n: [] for n in processes}
    for r in range(rounds):
        for n in processes:
            log(f"throughput: round {r + 1}/{rounds}, {n} process(es) on cores {cores}")
            runs[n].append(run_once(n, os.path.join(folder, f"p{n}"), epochs, batch_size))
    out: Dict[str, Any] = {"data": "shipped (cross-workload train split)", "model": "gcn", "global_batch": batch_size,
                           "threads_per_process": 1, "epochs": epochs, "rounds": rounds, "cores": cores,
                           "runs": {str(n): summarize(runs[n]) for n in processes}}
    base = out["runs"][str(processes[0])]
    for r in out["runs"].values():
        r["ratio_wall"] = round(r["graphs_per_s"] / base["graphs_per_s"], 3)
        r["ratio_rank_cpu"] = round(r["graphs_per_rank_cpu_s"] / base["graphs_per_rank_cpu_s"], 3)
    if len(cores) < max(processes):
        out["note"] = (f"{max(processes)} processes on {len(cores)} core(s): wall graphs/s measure the "
                       f"scheduler's shares; graphs_per_rank_cpu_s is what a core per rank would give")
    out["load_average_1min"], out["torch"] = round(os.getloadavg()[0], 2), torch.__version__
    return out


# ---------------------------------------------------------------- per-graph costs
def synthetic_layout(nodes: int, configs: int, seed: int = 0) -> Dict[str, np.ndarray]:
    """A synthetic HLO graph of `nodes` nodes as layout npz arrays, 2% of its nodes
    configurable (convolutions, dots, reshapes, transposes first), random layouts and
    runtimes."""
    from extract.xla.hlo_graph import OPCODE_IDS, featurize_module
    from extract.xla.npz_format import check_arrays, layout_arrays

    from .large_graph import synthetic_module

    graph = featurize_module(synthetic_module(nodes, seed), source="synthetic")
    rng = np.random.default_rng(seed)
    kinds = [OPCODE_IDS[o] for o in ("convolution", "dot", "reshape", "transpose")]
    candidates = np.flatnonzero(np.isin(graph.node_opcode, kinds))
    want = max(1, int(round(CONFIGURABLE_SHARE * graph.num_nodes)))
    if len(candidates) < want:
        candidates = np.arange(graph.num_nodes)
    ids = np.sort(rng.choice(candidates, size=want, replace=False))
    feat = np.full((configs, len(ids), 18), -1, np.float32)
    feat[:, :, :4] = np.argsort(rng.random((configs, len(ids), 4)), axis=2)
    arrays = layout_arrays(graph.arrays(), node_config_ids=ids.astype(np.int64), node_config_feat=feat,
                           config_runtime=rng.integers(10 ** 6, 10 ** 7, configs).astype(np.int64))
    check_arrays(arrays, "synthetic")
    return arrays


def _median_time(fn, repeats: int) -> Tuple[Tuple[float, float], Any]:
    """((median wall seconds, median CPU seconds of this process), fn's last result)."""
    wall, cpu, result = [], [], None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return (statistics.median(wall), statistics.median(cpu)), result


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def graph_costs(path: Path, k: int, depth: int, width: int, repeats: int) -> Dict[str, Any]:
    """The per-graph costs of one layout npz file (module docstring)."""
    import torch
    from extract.xla.npz_format import TpuGraphsFile
    from simulator.config import TrainConfig
    from simulator.models.costmodel import build_cost_model
    from simulator.losses import build_loss
    from simulator.sgd import sgd_step
    from simulator.data.tpugraphs import TpuGraphsSource, tpugraphs_model_info

    from .common import peak_rss_mib

    files = [TpuGraphsFile(path)]
    info = tpugraphs_model_info("layout:xla:random", files)
    config = TrainConfig.from_dict({"model": "gcn", "loss": "listmle", "width": width, "depth": depth,
                                    "configs_per_graph": k, "keep_hops": depth, "feature_transform": "log1p",
                                    "join": "early", "threads": 1, "eval_batch_size": 256})
    warm = TpuGraphsSource(files, config.data, info, "train")
    cold = TpuGraphsSource(files, dataclasses.replace(config.data, graph_cache_mb=0), info, "train")
    torch.manual_seed(0)
    model = build_cost_model(config, info)
    model.set_normalization(warm.normalization(model.batch_spec, 0))
    spec, rng = model.batch_spec, np.random.default_rng(0)
    loss_fn = build_loss("listmle")
    optimizer = torch.optim.AdamW(model.net.parameters(), lr=1e-3)
    batch_cold, _ = _median_time(lambda: cold.batch([0], rng, spec), repeats)
    batch_warm, batch = _median_time(lambda: warm.batch([0], rng, spec), repeats)
    sgd_step(model.net, batch, loss_fn, optimizer, 1.0)  # warm-up
    measured_peak = _reset_peak_rss()
    step, _ = _median_time(lambda: sgd_step(model.net, batch, loss_fn, optimizer, 1.0), repeats)
    configs = len(warm.measured(0))
    score, _ = _median_time(lambda: warm.evaluate(model, config.fit.eval_batch_size), max(1, repeats // 2))
    graph = warm.graph(0)
    out = {"nodes": files[0].num_nodes, "configurable_nodes": int(len(graph.config_nodes)),
           "pruned_nodes": graph.num_nodes, "configs_per_step": k, "batch_nodes": int(batch.graph.num_nodes()),
           "configs_scored": configs, "parameters": sum(p.numel() for p in model.net.parameters()),
           "step_peak_rss_gb": round(peak_rss_mib() / 1024, 3) if measured_peak else None}
    for name, (wall, cpu), per in (("batch_cold", batch_cold, 1), ("batch_warm", batch_warm, 1), ("step", step, 1),
                                   ("score_per_config", score, configs)):
        out[f"{name}_s"], out[f"{name}_cpu_s"] = round(wall / per, 5), round(cpu / per, 5)
    return out


def per_graph(nodes: Sequence[int], k: int, depth: int, width: int, repeats: int, configs: int,
              raw: Optional[Path]) -> Dict[str, Any]:
    import torch
    from extract.xla.npz_format import write_arrays
    from extract.xla.convert_tuning import read_tuning_file

    torch.set_num_threads(1)
    out: Dict[str, Any] = {"threads": 1, "model": f"gcn width {width} depth {depth}, early join, listmle",
                           "keep_hops": depth, "configs_per_graph": k, "graphs": {}}
    with tempfile.TemporaryDirectory(prefix="tpsim-scaling-") as tmp:
        paths: List[Tuple[str, Path]] = []
        if raw is not None and raw.exists():
            graph = read_tuning_file(raw)[0]
            paths.append((f"real {graph.name}", graph.write(Path(tmp) / "real.npz")))
        for n in nodes:
            log(f"per-graph: synthetic {n}-node graph")
            paths.append((f"synthetic {n}", write_arrays(Path(tmp) / f"synthetic_{n}.npz",
                                                         synthetic_layout(n, configs))))
        for name, path in paths:
            log(f"per-graph: timing {name}")
            out["graphs"][name] = graph_costs(path, k, depth, width, repeats)
    out["load_average_1min"] = round(os.getloadavg()[0], 2)
    return out


# ---------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    from extract.cli import COUNT, Int, output_file
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scaling", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["throughput", "per-graph", "all"])
    ap.add_argument("--processes", type=Int(1, 64), nargs="+", default=[1, 2])
    ap.add_argument("--epochs", type=COUNT, default=4)
    ap.add_argument("--batch-size", type=COUNT, default=64, help="throughput: the global batch (graphs)")
    ap.add_argument("--rounds", type=COUNT, default=3, help="throughput runs of each process count, interleaved")
    ap.add_argument("--nodes", type=Int(10, 5_000_000), nargs="+", default=[10_000, 40_000])
    ap.add_argument("--configs", type=Int(2), default=64, help="configs of each synthetic graph")
    ap.add_argument("--configs-per-graph", type=Int(2), default=8, help="k: configs per graph in a training step")
    ap.add_argument("--depth", type=COUNT, default=3)
    ap.add_argument("--width", type=COUNT, default=64)
    ap.add_argument("--repeats", type=COUNT, default=5)
    ap.add_argument("--raw", type=Path, default=RAW_LAYOUT, help="a raw layout ModuleTuningData file")
    ap.add_argument("--runs", default=os.path.join("runs", "scaling"), help="throughput run folders")
    ap.add_argument("--json", type=output_file, default=None,
                    help=f"write the results here too (`all`: default {os.path.join(DEFAULT_RESULTS, 'scaling.json')})")
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    result: Dict[str, Any] = {"cpus": os.cpu_count()}
    if args.what in ("throughput", "all"):
        result["throughput"] = throughput(args.processes, args.epochs, args.rounds, args.batch_size, args.runs)
    if args.what in ("per-graph", "all"):
        result["per_graph"] = per_graph(args.nodes, args.configs_per_graph, args.depth, args.width,
                                        args.repeats, args.configs, args.raw)
    text = json.dumps(result, indent=2)
    print(text)
    target = args.json or (os.path.join(DEFAULT_RESULTS, "scaling.json") if args.what == "all" else None)
    if target:
        with atomic_write(target) as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
