"""Runtime simulator: a GNN (encode → propagate → pool → predict) over program graphs.

CLIs: `python -m simulator.train`, `simulator.evaluate`, `simulator.predict`; see
simulator/README.md. From Python, the cost-model interface (`simulator.costmodel`:
`build_cost_model`, `CostModel.fit/update/predict/save/load`) and the data sources
(`simulator.sources`). Import dgl only through `simulator.dgl_compat`.
"""
