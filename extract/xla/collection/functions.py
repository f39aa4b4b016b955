"""A JAX function named on the command line (`package.module:function`) with example
argument shapes (`f32[8,64]`, `s32[8]`, `bf16[2,3,4]`, `f32[]`) as a `Program`.

Arguments are seeded random values: floats standard normal, integers in 0..9 (valid
indices and labels for small tables). Every error is one ValueError naming the input.
"""
from __future__ import annotations

import importlib
import re
from typing import List, Sequence, Tuple

import numpy as np

from extract.xla.collection.programs import Program

DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
          "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64", "u8": "uint8",
          "u32": "uint32", "pred": "bool"}
_SHAPE = re.compile(r"^([a-z0-9]+)\[([0-9, ]*)\]$")


def load_function(spec: str):
    """The function `module:function` names (a dotted attribute path after the colon)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{spec}: expected MODULE:FUNCTION (e.g. mypkg.models:step)")
    try:
        obj = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - any import failure is the input's fault
        raise ValueError(f"{spec}: cannot import module {module_name} ({type(e).__name__}: {e})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{spec}: module {module_name} has no attribute {attr}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{spec}: {attr} is not callable")
    return obj


def parse_shape(text: str) -> Tuple[str, Tuple[int, ...]]:
    match = _SHAPE.match(text.strip())
    if not match or match.group(1) not in DTYPES:
        raise ValueError(f"{text}: not an argument shape like f32[8,64] (dtypes: {', '.join(DTYPES)})")
    dims = tuple(int(d) for d in match.group(2).replace(" ", "").split(",") if d)
    return DTYPES[match.group(1)], dims


def example_arrays(shapes: Sequence[str], seed: int = 0) -> List[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for dtype, dims in (parse_shape(s) for s in shapes):
        if dtype in ("bool",) or dtype.startswith(("int", "uint")):
            out.append(rng.integers(0, 10, dims).astype(dtype))
        elif dtype == "bfloat16":
            import ml_dtypes
            out.append(rng.standard_normal(dims).astype(ml_dtypes.bfloat16))
        else:
            out.append(rng.standard_normal(dims).astype(dtype))
    return out


def function_program(spec: str, shapes: Sequence[str], name: str = "", family: str = "") -> Program:
    """A Program of a named function; checked by tracing it once on the shapes."""
    import jax

    fn = load_function(spec)
    arrays = example_arrays(shapes)
    try:
        jax.eval_shape(fn, *arrays)
    except Exception as e:  # noqa: BLE001 - a function that does not trace on these shapes
        text = str(e).strip().splitlines()
        raise ValueError(f"{spec}: does not run on {' '.join(shapes)} ({type(e).__name__}: "
                         f"{text[0] if text else ''})") from None
    label = name or spec.replace(":", ".")
    return Program(label, family or label, fn, lambda: arrays, ("function", spec, name, family, *shapes))
