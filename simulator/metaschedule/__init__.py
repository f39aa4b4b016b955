"""The simulator inside MetaSchedule: the cost-model adapter, its first-stage filter, and the
tuner (resume, Ctrl-C)."""
