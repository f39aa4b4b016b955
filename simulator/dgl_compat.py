"""The project's only door to DGL.

dgl 2.1.0 (PyPI's newest Linux wheel) ships GraphBolt C++ libraries only for torch
≤ 2.2.1, and `import dgl` imports `dgl.graphbolt` eagerly, which fails on torch 2.13
("Cannot find DGL C++ graphbolt library"). The core we use — DGLGraph, batch, readout,
the nn.pytorch conv layers, save/load — does not need GraphBolt, so an empty module is
registered in its place before the import. Import dgl as `from simulator.dgl_compat
import dgl`; never import dgl.sparse or dgl.graphbolt.
"""
import os
import sys
import types

os.environ.setdefault("DGLBACKEND", "pytorch")
if os.environ["DGLBACKEND"] != "pytorch":
    raise ImportError(f"DGLBACKEND={os.environ['DGLBACKEND']!r}: this project needs the pytorch backend")
# a plain `import dgl` that failed earlier leaves its submodules behind (dgl.utils, …);
# importing over them would give a package without those attributes
if not hasattr(sys.modules.get("dgl"), "batch"):
    for name in [m for m in sys.modules if m == "dgl" or m.startswith("dgl.")]:
        del sys.modules[name]
sys.modules.setdefault("dgl.graphbolt", types.ModuleType("dgl.graphbolt"))

import dgl  # noqa: E402
import dgl.nn.pytorch as dglnn  # noqa: E402

__all__ = ["dgl", "dglnn"]
