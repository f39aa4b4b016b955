"""The transfer study: how well a model trained on a few workloads ranks the configs of another.

    python -m benchmarks.transfer ...            the transfer matrix (`matrix`)
    python -m benchmarks.transfer.analysis ...   why the graphs do not transfer, per node feature
    python -m benchmarks.transfer.families ...   what transfers: the register-tile families

`specs`: the models the study trains (named `simulator.train` command lines, ensembles);
`report`: its section of docs/RESULTS.md (`benchmarks.report`). `benchmarks.all` runs the
three in its transfer stage.
"""
