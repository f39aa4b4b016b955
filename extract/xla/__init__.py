"""XLA: HLO → graph arrays, the TpuGraphs npz format, raw TpuGraphs tuning protos and the
converters' command lines; the measured XLA layout collection is in `collection/`.

    hlo_graph.py, convert_hlo.py, convert_tuning.py, npz_format.py, convert_tpugraphs.py,
    npz_output.py, proto/   HLO and TpuGraphs formats and their converters
    collection/             the measured layout collection (docs/xla_collection.md,
                            `python -m extract.xla_collect`)
"""
