"""MetaSchedule: tuning databases → samples, networks → tasks, and the measuring campaign
(runner, store, progress, drift, second pass)."""
