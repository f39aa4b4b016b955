"""Rank the configs of a workload with a trained simulator and print the top k.

    python -m simulator.predict DIR LOG_OR_WORKLOAD --top-k 5

LOG_OR_WORKLOAD is either data (an AutoTVM log, a folder of logs, a folder of .npz
samples): its measured configs are ranked per workload, with the measured runtime
beside the prediction; or a workload (`C2`, or `1x64x56x56_64x3x3_s1_p1`) that need
never have been measured: its whole config space (`--template`, or a seeded
`--max-configs` subset of it) is extracted and ranked.

A model trained on a TpuGraphs collection ranks every config of TpuGraphs npz files —
measured or not — and can write a Kaggle submission::

    python -m simulator.predict RUN_DIR [tpugraphs:COLLECTION | NPZ_FILES_OR_FOLDERS ...]
        [--data-root ROOT] [--split test] [--kaggle-csv FILE]

With no target it ranks the test split of the run's own collection (under the run's
`--data-root`, or the one given). `--kaggle-csv` writes `ID,TopConfigs` rows, IDs
`tile:xla:<graph>` / `layout:<source>:<search>:<graph>`, config indices best first
joined by `;`: the 5 best for tile (fewer if a kernel has fewer configs), all configs
for layout. Loose npz files take their collection from their folders
(…/layout/xla/random/test/x.npz), else from `--collection`, else the run's.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List, Optional, Sequence

from extract.cli import COUNT, NONNEGATIVE, SEED, output_file
from .checkpoint import metrics_mismatch
from .data.collection import DEFAULT_TEMPLATE
from .data.sources import PredictOptions, data_kind
from .distributed import DEVICES, Cluster, check_device
from .engine import setup_determinism
from .models.costmodel import CostModel, load_trained
from .registry import run_cli


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m simulator.predict", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", metavar="DIR", help="run folder (or its checkpoint.pt)")
    ap.add_argument("target", metavar="LOG_OR_WORKLOAD", nargs="*",
                    help="data to rank (log files/folders, .npz folders), or one workload name; "
                         "TpuGraphs runs: tpugraphs:COLLECTION or TpuGraphs npz files/folders "
                         "(default: the run's collection)")
    ap.add_argument("--top-k", type=COUNT, default=5)
    ap.add_argument("--template", default=DEFAULT_TEMPLATE, help="for a workload: its schedule template")
    ap.add_argument("--max-configs", type=NONNEGATIVE, default=0,
                    help="for a workload: rank a seeded subset of this many configs (0: the whole space)")
    ap.add_argument("--seed", type=SEED, default=0)
    ap.add_argument("--workers", type=NONNEGATIVE, default=0,
                    help="for a workload: extraction processes (0: one per core)")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--threads", type=COUNT, default=None)
    ap.add_argument("--device", choices=DEVICES, default="cpu", help="score on this device")
    x = ap.add_argument_group("TpuGraphs runs")
    x.add_argument("--kaggle-csv", type=output_file, default=None, metavar="FILE",
                   help="write the rankings as a Kaggle submission (ID,TopConfigs)")
    x.add_argument("--data-root", default=None, help="for tpugraphs:COLLECTION (default: the run's)")
    x.add_argument("--split", choices=["train", "valid", "val", "test"], default="test",
                   help="for tpugraphs:COLLECTION: which folder to rank")
    x.add_argument("--collection", default=None,
                   help="collection of loose npz files whose folders do not name one")
    return ap


def rank(model: CostModel, options: PredictOptions) -> Dict[str, List[Dict[str, Any]]]:
    """Rank `options.targets` with `model`; print (and write) the rankings, return the rows shown."""
    config = model.config
    kind = data_kind(config.data.data)
    source = kind.open_targets(config, model.info, model.batch_spec, options)
    return kind.present(source.rankings(model, config.fit.eval_batch_size), options)


def run(argv: Optional[Sequence[str]] = None) -> Dict[str, List[Dict[str, Any]]]:
    args = build_parser().parse_args(argv)
    model, state = load_trained(args.run)
    check_device(args.device)  # a clear error without a GPU (or a CUDA build of DGL)
    model.place(Cluster(device=args.device))
    warning = metrics_mismatch(args.run, state)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    setup_determinism(model.config.seed, args.threads or model.config.threads)
    options = PredictOptions(
        targets=list(args.target), top_k=args.top_k, template=args.template, max_configs=args.max_configs,
        seed=args.seed, workers=args.workers, cache_dir=args.cache_dir, kaggle_csv=args.kaggle_csv,
        data_root=args.data_root, split=args.split, collection=args.collection)
    return rank(model, options)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_cli(run, argv)


if __name__ == "__main__":
    sys.exit(main())
