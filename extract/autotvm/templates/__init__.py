"""Schedule templates, registered by AutoTVM task name (see `base.Template`)."""
from extract.tir.workloads import Conv2dWorkload  # the kind the conv2d templates schedule
from .base import TEMPLATES, Template, UnknownTemplateError, get_template, register_template
from . import conv2d_x86  # noqa: F401  (registers)
from . import conv2d_cuda  # noqa: F401  (registers)

__all__ = ["TEMPLATES", "Conv2dWorkload", "Template", "UnknownTemplateError", "get_template",
           "register_template"]
