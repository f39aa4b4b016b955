"""Synthetic loop-nest graph samples: for tests and speed runs, not for claims.

Each workload is a random tree (a stand-in for a TIR AST, edges parent → child) whose
shape is fixed per workload; a config sets every loop's extent and its vectorize /
unroll flags. The runtime is a loop-nest cost a GNN can learn and a bag of node
features cannot: each store node costs the product of its ancestor loops' extents,
cheaper under a vectorized ancestor, times a per-workload scale, with 2% noise.

    python -m simulator.data.synthetic OUT.npz --workloads 12 --configs 600 --nodes 100 300

writes groups C1…C12 (so `--split cross-workload` works on it) with `vectors["curve"]`
and `vectors["per_store"]` filled in for the baselines.
"""
from __future__ import annotations

import argparse
import os
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


# ---------------------------------------------------------------- TpuGraphs-like
def make_tpugraphs_arrays(kind: str, rng: np.random.Generator, nodes: int = 30, configs: int = 20,
                          config_nodes: int = 4, measured: bool = True) -> dict:
    """One synthetic graph in TpuGraphs' npz arrays (extract/xla/npz_format.py), with runtimes a
    graph model can learn from the config features:

    * tile: runtime = Σ_v size_v / min(tile_0, want_v) · (1 + |log2 tile_1 − 2|), i.e.
      kernel dims 0 and 1 of the 24 config features trade against the node sizes;
    * layout: runtime = Σ_{configurable v} size_v · (1 + |output minor-to-major[0] −
      preferred_v|) + 0.2 Σ_v size_v, preferred_v a function of the node's
      (feature-visible) rank.

    `measured=False` leaves the runtime arrays out (a test split with withheld runtimes)."""
    n = int(nodes)
    consumer = np.arange(1, n)
    producer = np.array([rng.integers(max(0, u - 4), u) for u in consumer], dtype=np.int64)
    edge_index = np.stack([consumer, producer], axis=1)                 # u consumes v
    node_feat = np.zeros((n, 140), np.float32)
    dims = rng.choice([1, 2, 4, 8, 16, 32, 64, 128], size=(n, 4))
    node_feat[:, 21:25] = dims
    node_feat[:, 27] = dims.sum(1)
    node_feat[:, 28] = dims.prod(1)
    node_feat[:, 13] = 1.0                                              # f32
    node_feat[np.arange(n) == n - 1, 0] = 1.0                           # root
    rank = rng.integers(1, 5, n)
    node_feat[:, 31] = rank                                             # "dimensions_0"
    opcode = rng.choice([2, 13, 26, 34, 41, 59, 63, 75, 98], size=n).astype(np.uint8)
    size = np.log2(dims.prod(1).astype(np.float64)) + 1.0
    arrays = {"node_feat": node_feat, "node_opcode": opcode, "edge_index": edge_index}
    if kind == "tile":
        tiles = rng.choice([1, 2, 4, 8, 16], size=(configs, 6)).astype(np.float64)
        config_feat = np.zeros((configs, 24), np.float32)
        config_feat[:, :6] = tiles
        config_feat[:, 6] = tiles.sum(1)
        config_feat[:, 7] = tiles.prod(1)
        want = 2.0 ** rank
        cost = np.array([np.sum(size / np.minimum(t[0], want)) * (1 + abs(np.log2(t[1]) - 2))
                         for t in tiles])
        runtime = np.maximum(1, (1e4 * cost * np.exp(rng.normal(0, 0.01, configs)))).astype(np.int64)
        arrays["config_feat"] = config_feat
        if measured:
            arrays["config_runtime"] = runtime
            arrays["config_runtime_normalizers"] = np.full(configs, runtime[0], np.int64)
    else:
        ids = np.sort(rng.choice(n, size=min(config_nodes, n), replace=False)).astype(np.int64)
        feat = np.full((configs, len(ids), 18), -1, np.float32)
        for c in range(configs):
            for j in range(len(ids)):
                feat[c, j, :4] = rng.permutation(4)
                feat[c, j, 6:10] = rng.permutation(4)
        preferred = rank[ids] - 1
        distance = np.abs(feat[:, :, 0] - preferred[None, :])
        cost = (size[ids][None, :] * (1.0 + distance)).sum(1) + 0.2 * size.sum()
        runtime = (1e5 * cost * np.exp(rng.normal(0, 0.01, configs))).astype(np.int64)
        arrays["node_config_ids"] = ids
        arrays["node_config_feat"] = feat
        arrays["node_splits"] = np.array([[0, n]], np.int64)
        if measured:
            arrays["config_runtime"] = runtime
    return arrays


def write_tpugraphs_collection(root: str, collection: str = "tile:xla", graphs=(6, 2, 2),
                               nodes: Tuple[int, int] = (12, 30), configs: Tuple[int, int] = (12, 24),
                               config_nodes: int = 4, seed: int = 0, withhold_test: bool = True) -> List[str]:
    """Write a small synthetic TpuGraphs collection in the dataset's folder layout:
    `root/npz/<collection as folders>/{train,valid,test}/g<i>.npz` (graphs per split),
    test runtimes withheld if `withhold_test`. Returns the written paths."""
    from extract.xla.npz_format import collection_dir, sample_from_arrays, write_npz
    rng = np.random.default_rng(seed)
    kind = collection.split(":")[0]
    written, index = [], 0
    for split, count in zip(("train", "valid", "test"), graphs):
        folder = collection_dir(os.path.join(root, "npz"), collection, split)
        for _ in range(count):
            arrays = make_tpugraphs_arrays(
                kind, rng, int(rng.integers(nodes[0], nodes[1] + 1)),
                int(rng.integers(configs[0], configs[1] + 1)), config_nodes,
                measured=not (withhold_test and split == "test"))
            name = f"g{index}"
            index += 1
            sample = sample_from_arrays(arrays, name=name)
            written.append(str(write_npz(folder / f"{name}.npz", sample)))
    return written


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simulator.data.synthetic", description=__doc__,
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
