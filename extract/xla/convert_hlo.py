"""XLA HLO modules → TpuGraphs npz files: the converter for XLA programs (HLO files, JAX).

    python -m extract.hlo FILE.pb [FILE.pb ...] --out DIR [--kind both|layout|tile]
                          [--overwrite] [-v]

reads a serialized `HloModuleProto` or `HloProto` (XLA dump; see extract/xla/hlo_graph.py
`read_hlo_module`) and writes TpuGraphs npz files (format: extract/xla/npz_format.py):

* `DIR/layout/<stem>.npz`: the whole module, as TpuGraphs' layout collections hold it;
* `DIR/tile/<stem>.<kernel>.npz`: one graph per kernel, as TpuGraphs' tile collection
  holds them (extract/xla/hlo_graph.py `kernel_modules`),

where `<stem>` is the input file's name without `.pb`. A module without any fusion
instruction has not been through XLA's optimization yet, so it yields no tile graphs
(the command says so).

The output folder (extract/xla/npz_output.py): one process writes into DIR at a time (a
second one gets an error at once); DIR must not already hold `layout/*.npz` or
`tile/*.npz` files of an earlier run, which a reader would mix with this run's, unless
`--overwrite` is given, which deletes those npz files first (other files stay); two
inputs that would write the same file are an error for the second. Each file is written
whole or not at all. The command prints one line per input (`-v`: per file written) and
a total; a progress bar only when stderr is a terminal. Exit status: 0, 1 if some
input failed (each named on stderr), 2 if DIR cannot be used.

No runtimes are measured here, so the files have zero configs (`config_runtime` of
length 0); their graphs are what a trained model ranks configs on. The featurized graph
goes to the npz arrays as it is (`module_graphs`); from Python, `from_jax(f, *args)`
gives a JAX function's graphs as `GraphSample`s.
"""
from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path
from typing import Any, Callable, Counter, List, Optional, Sequence, Union

from extract.fileio import OutputBusyError
from extract.xla.hlo_graph import (
    UNKNOWN_OPCODE_ID, featurize_module, is_fused, kernel_modules, module_problem, read_hlo_module,
)
from extract.xla.npz_output import NpzOutput, OutputNotEmptyError, progress
from extract.sample import GraphSample
from extract.xla.npz_format import NpzGraph, layout_arrays, tile_arrays

KINDS = ("both", "layout", "tile")
OUTPUT_PATTERNS = ("layout/*.npz", "tile/*.npz")  # what the command writes into --out


def module_graphs(module: Any, kind: str = "both", source: str = "",
                  layout_module: Optional[Any] = None) -> List[NpzGraph]:
    """The npz files (zero configs) of a module: its layout graph and/or its kernels'
    tile graphs. `layout_module`, if given, is featurized for the layout graph instead
    of `module` (from_jax passes the pre-fusion module there, as TpuGraphs' layout graphs
    are). The layout graph is named after its module, a kernel `<module>.<kernel>`."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    label = source or module.name
    problem = module_problem(module)  # before anything is decided from it (is_fused)
    if problem is not None:
        raise ValueError(f"{label}: {problem}")
    graphs = []
    if kind in ("both", "layout"):
        graph = featurize_module(layout_module if layout_module is not None else module,
                                 source=label)
        graphs.append(NpzGraph(name=graph.name, arrays=layout_arrays(graph.arrays()),
                               source=label, meta=graph.meta()))
    if kind in ("both", "tile") and is_fused(module):
        for kernel in kernel_modules(module, source=label):
            graph = featurize_module(kernel, source=f"{label} kernel {kernel.name}")
            graphs.append(NpzGraph(name=f"{module.name}.{kernel.name}",
                                   arrays=tile_arrays(graph.arrays()), source=label,
                                   meta={"kernel": graph.name, **graph.meta(),
                                         "module": module.name}))
    return graphs


def npz_path(out_dir: Union[str, Path], stem: str, graph: NpzGraph) -> Path:
    """Where the command writes one of `module_graphs`' files (module docstring)."""
    if graph.kind == "layout":
        return Path(out_dir) / "layout" / f"{stem}.npz"
    return Path(out_dir) / "tile" / f"{stem}.{graph.meta['kernel']}.npz"


def from_jax(f: Callable, *args: Any, kind: str = "both", **kwargs: Any) -> List[GraphSample]:
    """`GraphSample`s (zero configs) of a JAX function called on example arguments.

    The layout graph is the lowered, pre-fusion module (TpuGraphs' layout graphs have
    no fusions either); the tile graphs are the kernels of the module XLA compiles for
    the default backend. Keyword arguments other than `kind` go to `f`.
    """
    import jax  # optional dependency: setup.py's "jax" extra

    lowered = jax.jit(f).lower(*args, **kwargs)
    pre_fusion = read_hlo_module(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto(),
                                 name=f"jax:{getattr(f, '__name__', 'f')}")
    compiled_modules = lowered.compile().runtime_executable().hlo_modules()
    if len(compiled_modules) != 1:
        raise ValueError(f"{pre_fusion.name}: XLA compiled {len(compiled_modules)} modules; "
                         "expected one")
    compiled = read_hlo_module(compiled_modules[0].as_serialized_hlo_module_proto(),
                               name=f"jax:{pre_fusion.name} (compiled)")
    graphs = module_graphs(compiled, kind=kind, source=f"jax:{pre_fusion.name}",
                           layout_module=pre_fusion)
    return [graph.sample() for graph in graphs]


def _report(path: Path, graphs: Sequence[NpzGraph], kind: str) -> None:
    """Warn about opcodes typed UNK and about a module that gave no tile graphs."""
    # The layout graph holds every instruction once; kernels alone may repeat some.
    unknown: Counter = collections.Counter()
    for graph in graphs[:1] if kind != "tile" else graphs:
        unknown.update(graph.meta.get("unknown_opcodes", {}))
    if unknown:
        listed = ", ".join(f"{op} ×{n}" for op, n in unknown.most_common())
        print(f"{path}: opcodes outside the TpuGraphs vocabulary, typed UNK "
              f"(id {UNKNOWN_OPCODE_ID}): {listed}", file=sys.stderr)
    if kind != "layout" and not any(graph.kind == "tile" for graph in graphs):
        print(f"{path}: no fusion instructions, so not cut into kernels yet and no tile "
              "graphs written; XLA fuses during optimization, so use a module dumped "
              "after it", file=sys.stderr)


def _summary(path: Path, graphs: Sequence[NpzGraph], written: Sequence[Path], out: Path) -> str:
    """One line: what one input gave."""
    parts = []
    for graph, target in zip(graphs, written):
        if graph.kind == "layout":
            parts.append(f"{target.relative_to(out)} ({graph.num_nodes} nodes, "
                         f"{graph.num_edges} edges)")
    tiles = [g for g in graphs if g.kind == "tile"]
    if tiles:
        parts.append(f"{len(tiles)} tile graphs in tile/ ({sum(g.num_nodes for g in tiles)} "
                     "nodes)")
    return f"{path} → {', '.join(parts) or 'nothing'}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m extract.hlo", description="XLA HLO module protos → TpuGraphs npz files",
        epilog="DIR must not hold npz files from another run (layout/*.npz, tile/*.npz): a "
               "reader would mix them with this run's. --overwrite deletes them first.")
    parser.add_argument("files", nargs="+", type=Path, help="serialized HloModuleProto or HloProto")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
    parser.add_argument("--kind", choices=KINDS, default="both",
                        help="whole-module layout graph, per-kernel tile graphs, or both")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the npz files DIR holds from an earlier run")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="one line per file written (default: one line per input)")
    args = parser.parse_args(argv)
    failed, total = 0, 0
    try:
        with NpzOutput(args.out, OUTPUT_PATTERNS, overwrite=args.overwrite) as output:
            if output.removed:
                print(f"{args.out}: removed {output.removed} npz files of an earlier run "
                      "(--overwrite)")
            items, say = progress(args.files, "extract.hlo")
            for path in items:
                stem = path.name.removesuffix(".pb")
                try:
                    graphs = module_graphs(read_hlo_module(path), kind=args.kind, source=str(path))
                    written = output.write_all(graphs, lambda g: npz_path(args.out, stem, g),
                                               source=str(path))
                except ValueError as e:
                    print(f"error: {e}", file=sys.stderr)
                    failed += 1
                    continue
                total += len(written)
                if args.verbose:
                    for graph, target in zip(graphs, written):
                        say(f"{path} → {target} ({graph.num_nodes} nodes, {graph.num_edges} edges)")
                else:
                    say(_summary(path, graphs, written, args.out))
                _report(path, graphs, args.kind)
    except (OSError, OutputBusyError, OutputNotEmptyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.out}: {total} npz files from {len(args.files) - failed} of {len(args.files)} "
          f"inputs" + (f"; {failed} failed (errors above)" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
