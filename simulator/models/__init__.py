"""Cost models: the `CostModel` interface, the graph networks and their layers, and the
baselines."""
