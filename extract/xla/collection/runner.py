"""Compile and time one JAX program under one layout configuration."""
from __future__ import annotations

import time
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from extract.xla.collection.hlo_names import NodeName, node_names
from extract.xla.collection.layouts import Candidate, Config, Constrained, locate
from extract.xla.collection.measure import MeasureSettings, time_call


def one_line(error: BaseException) -> str:
    """An exception as one line (XLA's messages run over many)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


class ProgramRunner:
    """A program's configurable results (`candidates`), its graph's HLO, and measuring
    one config (compile with the layouts pinned, then `time_call`)."""

    def __init__(self, fn: Any, args: Sequence[np.ndarray]) -> None:
        import jax

        self.args = [np.asarray(a) for a in args]
        self.constrained = Constrained(fn, self.args)
        self.device = jax.devices()[0]
        lowered = self.lower({})
        hlo = lowered.compiler_ir("hlo")
        self.pre_fusion = hlo.as_serialized_hlo_module_proto()
        self.pre_fusion_text = hlo.as_hlo_text()
        modules = lowered.compile().runtime_executable().hlo_modules()
        compiled = modules[0].as_serialized_hlo_module_proto()
        self.candidates: Dict[str, Candidate] = dict(self.constrained.candidates)
        self.dropped = locate(self.candidates, node_names(self.pre_fusion), node_names(compiled))

    def nodes(self) -> List[NodeName]:
        return node_names(self.pre_fusion)

    def _formats(self, config: Config) -> Tuple[Any, ...]:
        from jax.experimental.layout import Format, Layout
        from jax.sharding import SingleDeviceSharding

        sharding = SingleDeviceSharding(self.device)
        return tuple(Format(Layout(major_to_minor=tuple(config[f"p{i}"])), sharding)
                     if f"p{i}" in config else sharding for i in range(len(self.args)))

    def lower(self, config: Config) -> Any:
        import jax

        return jax.jit(self.constrained.function(config), in_shardings=self._formats(config),
                       keep_unused=True).lower(*self.args)

    def measure(self, config: Config, settings: MeasureSettings) -> Dict[str, Any]:
        """{runtime_s, repeats_s, number, compile_s} or {error} (a config XLA refuses)."""
        import jax

        start = time.perf_counter()
        try:
            compiled = self.lower(config).compile()
            args = [jax.device_put(a, f) for a, f in zip(self.args, self._formats(config))]
        except Exception as e:  # noqa: BLE001 - XLA raises many kinds; the config is recorded as failed
            return {"error": one_line(e), "compile_s": time.perf_counter() - start}
        compile_s = time.perf_counter() - start
        timing = time_call(lambda: jax.block_until_ready(compiled(*args)), settings)
        return {**timing, "compile_s": compile_s}
