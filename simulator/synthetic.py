"""Synthetic loop-nest graph samples: for tests and speed runs, not for claims.

Each workload is a random tree (a stand-in for a TIR AST, edges parent → child) whose
shape is fixed per workload; a config sets every loop's extent and its vectorize /
unroll flags. The runtime is a loop-nest cost a GNN can learn and a bag of node
features cannot: each store node costs the product of its ancestor loops' extents,
cheaper under a vectorized ancestor, times a per-workload scale, with 2% noise.

    python -m simulator.synthetic OUT.npz --workloads 12 --configs 600 --nodes 100 300

writes groups C1…C12 (so `--split cross-workload` works on it) with `vectors["curve"]`
and `vectors["per_store"]` filled in for the baselines.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional, Sequence, Tuple

import numpy as np

from extract.sample import GraphSample, save_samples

LOOP, STORE = 0, 1
FEATURE_NAMES = ["log2_extent", "vectorized", "unrolled", "depth", "noise", "one"]
CURVE_WIDTH = 24
PER_STORE_WIDTH = 164


def _tree(rng: np.random.Generator, n: int) -> np.ndarray:
    """Parent of each node (parent[0] = -1); recent nodes are likelier parents: deep nests."""
    parent = np.full(n, -1)
    for i in range(1, n):
        lo = max(0, i - 4)
        parent[i] = rng.integers(lo, i) if rng.random() < 0.8 else rng.integers(0, i)
    return parent


def make_synthetic_samples(num_workloads: int = 12, configs_per_workload: int = 40,
                           nodes: Tuple[int, int] = (20, 40), num_types: int = 8, seed: int = 0,
                           group_names: Optional[Sequence[str]] = None) -> List[GraphSample]:
    rng = np.random.default_rng(seed)
    names = list(group_names) if group_names else [f"C{i + 1}" for i in range(num_workloads)]
    samples: List[GraphSample] = []
    for w, group in enumerate(names[:num_workloads]):
        n = int(rng.integers(nodes[0], nodes[1] + 1))
        parent = _tree(rng, n)
        types = rng.integers(2, num_types, n)
        is_leaf = np.ones(n, bool)
        is_leaf[parent[1:]] = False
        types[~is_leaf] = LOOP
        types[is_leaf & (rng.random(n) < 0.6)] = STORE
        types[0] = LOOP
        depth = np.zeros(n)
        for i in range(1, n):
            depth[i] = depth[parent[i]] + 1
        ancestors = []
        for i in range(n):
            chain, j = [], parent[i]
            while j >= 0:
                chain.append(j)
                j = parent[j]
            ancestors.append(np.array(chain, dtype=np.int64))
        stores = np.flatnonzero(types == STORE)
        loops = types == LOOP
        scale = np.exp(rng.normal(0, 1))
        edges = np.stack([parent[1:], np.arange(1, n)], axis=1)
        for c in range(configs_per_workload):
            log_ext = np.where(loops, rng.integers(0, 5, n), 0).astype(np.float64)
            vec = loops & (rng.random(n) < 0.2)
            unr = loops & (rng.random(n) < 0.2)
            cost = 0.0
            per_store = []
            for s in stores:
                a = ancestors[s]
                work = 2.0 ** (0.3 * log_ext[a].sum())  # tamed: deep trees stay within ~10⁴
                speed = 1.0 + 3.0 * float(np.any(vec[a] & (log_ext[a] >= 2))) + 0.5 * float(np.any(unr[a]))
                cost += work / speed
                per_store.append([log_ext[a].sum(), vec[a].sum(), unr[a].sum(), len(a)])
            cost = max(cost, 1.0)
            runtime = 1e-6 * scale * cost * np.exp(rng.normal(0, 0.02))
            feats = np.stack([log_ext, vec, unr, depth / 10.0, rng.normal(0, 1, n), np.ones(n)], 1)
            ps = np.asarray(per_store, dtype=np.float64).reshape(-1, 4)
            curve = np.concatenate([
                np.bincount(np.clip(log_ext[loops].astype(int), 0, 7), minlength=8)[:8],
                [log_ext.sum(), vec.sum(), unr.sum(), n, len(stores), depth.max()],
                ps.mean(0) if len(ps) else np.zeros(4), ps.max(0) if len(ps) else np.zeros(4),
                [np.log(scale), 0.0],
            ])[:CURVE_WIDTH]
            pooled = np.concatenate([ps.mean(0), ps.max(0), ps.min(0), ps.sum(0)]) if len(ps) else np.zeros(16)
            per_store_vec = np.zeros(PER_STORE_WIDTH)
            per_store_vec[:16] = pooled
            samples.append(GraphSample(
                edges=edges, node_features=feats.astype(np.float32), node_types=types,
                runtimes=np.array([runtime]), group=group, name=f"{group}/{c}",
                runtime_std=np.array([runtime * 0.02]),
                vectors={"curve": curve[None].astype(np.float32),
                         "per_store": per_store_vec[None].astype(np.float32)},
                meta={"config_index": c, "synthetic": True}))
    return samples


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simulator.synthetic", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="npz file to write")
    ap.add_argument("--workloads", type=int, default=12)
    ap.add_argument("--configs", type=int, default=40, help="configs per workload")
    ap.add_argument("--nodes", type=int, nargs=2, default=[20, 40], metavar=("MIN", "MAX"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    samples = make_synthetic_samples(args.workloads, args.configs, tuple(args.nodes), seed=args.seed)
    save_samples(args.out, samples, info={"synthetic": True, "feature_names": FEATURE_NAMES})
    print(f"wrote {len(samples)} synthetic samples to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
