"""The simulator inside MetaSchedule: the cost-model adapter, its first-stage filter, and the
tuner (resume, Ctrl-C).

Below: the registration list of the cost models `simulator.tune --cost-model` offers
(`@register_tuning_cost_model`, `simulator.metaschedule.cost_model`, which holds `gnn`): one
import line per module of others.
"""
from . import rivals  # noqa: F401
