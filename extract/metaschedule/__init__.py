"""MetaSchedule: tuning databases → samples, workload keys, networks → tasks, and the measuring campaign (runner, store, progress, drift, second pass)."""
