"""XLA: HLO → graph arrays, the TpuGraphs npz format, raw TpuGraphs tuning protos, and the
converters' command lines."""
