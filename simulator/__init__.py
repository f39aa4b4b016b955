"""Runtime simulator: a GNN (encode → propagate → pool → predict) over program graphs.

CLIs: `python -m simulator.train`, `simulator.evaluate`, `simulator.predict`; see
simulator/README.md. Import dgl only through `simulator.dgl_compat`.
"""
