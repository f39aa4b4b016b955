"""The measured XLA layout collection: JAX programs timed on this machine under sampled
layout configs, written as a TpuGraphs layout root (docs/xla_collection.md,
`python -m extract.xla_collect`).

    models.py     the models (ResNet, MobileNetV2, …) in JAX
    programs.py   their inference and training steps as `Program`s; the family split
    functions.py  a `module:function` with argument shapes as a `Program`
    layouts.py    configurable nodes (jaxpr interpreter + layout constraints), configs
    hlo_names.py  op names and layouts of HLO instructions, by graph node
    runner.py     compile and time one program under one config
    compile_ahead.py  a helper on another core compiling half of each batch
    measure.py    the protocol: pinning, single thread, repeats, drift kernel
    plan.py       probe → configurable nodes (the selection rule) → sampled configs
    collect.py    plan, measure, resume, write npz; summaries
    ship.py       a finished root, compacted into the shipped folder
    cli.py        the command line (`python -m extract.xla_collect`)
"""
