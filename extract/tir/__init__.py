"""The TIR side: the one TIR walk (`graph`), its node features (`context`, `hardware`), what a
PrimFunc computes as a key (`workload_key`), fast batches of scheduled programs
(`featurize`), and the operators (`workloads`)."""
