"""XLA: HLO → graph arrays, the TpuGraphs npz format, raw TpuGraphs tuning protos and the
converters' command lines; and the measured XLA layout collection (docs/xla_collection.md,
`python -m extract.xla_collect`).

    hlo_graph.py, convert_hlo.py, convert_tuning.py, tpugraphs_npz.py, tpugraphs_cli.py,
    npz_output.py, proto/   HLO and TpuGraphs formats and their converters
    models.py     the models (ResNet, MobileNetV2, …) in JAX
    programs.py   their inference and training steps as `Program`s; the family split
    functions.py  a `module:function` with argument shapes as a `Program`
    layouts.py    configurable nodes (jaxpr interpreter + layout constraints), configs
    hlo_names.py  op names and layouts of HLO instructions, by graph node
    runner.py     compile and time one program under one config
    measure.py    the protocol: pinning, single thread, repeats, drift kernel
    plan.py       probe → configurable nodes (the selection rule) → sampled configs
    collect.py    plan, measure, resume, write npz; summaries
"""
