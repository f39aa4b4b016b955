"""Compile a JAX program under layout configurations and time them together."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from extract.xla.collection.hlo_names import NodeName, node_names
from extract.xla.collection.layouts import Candidate, Config, Constrained, locate
from extract.xla.collection.measure import MeasureSettings, time_interleaved


def one_line(error: BaseException) -> str:
    """An exception as one line (XLA's messages run over many)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


MAP_SHARE = 0.75  # of the kernel's memory-map limit that a batch's compiled configs may fill


def room_for_more() -> bool:
    """Whether this process may hold another compiled config: XLA's CPU code takes a few
    hundred memory maps per executable, and past `vm.max_map_count` (65,530 by default:
    ~170 compiled ResNet training steps) LLVM fails with "Cannot allocate memory" and the
    process dies."""
    try:
        limit = int(Path("/proc/sys/vm/max_map_count").read_text())
        with open("/proc/self/maps", "rb") as maps:
            used = sum(1 for _ in maps)
    except (OSError, ValueError):
        return True
    return used < MAP_SHARE * limit


@dataclass
class Prepared:
    """A config compiled with its arguments placed (`call` runs it to completion), or the
    error XLA gave (`info["error"]`); `info["compile_s"]` either way."""

    call: Optional[Callable[[], Any]]
    info: Dict[str, Any] = field(default_factory=dict)


class Lowering:
    """A program lowered under a config: its layout constraints applied, its parameters'
    layouts pinned (what `ProgramRunner` compiles, and compile_ahead.py's helper with it)."""

    def __init__(self, fn: Any, args: Sequence[np.ndarray]) -> None:
        import jax

        self.args = [np.asarray(a) for a in args]
        self.constrained = Constrained(fn, self.args)
        self.device = jax.devices()[0]

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


class ProgramRunner(Lowering):
    """A program's configurable results (`candidates`), its graph's HLO, and measuring
    configs (compile each with its layouts pinned, then time them in the same rounds)."""

    def __init__(self, fn: Any, args: Sequence[np.ndarray]) -> None:
        super().__init__(fn, args)
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

    def prepare(self, configs: Sequence[Config],
                journal: Callable[[int, str], None] = lambda i, event: None) -> List[Prepared]:
        """Compile configs, place the arguments in their layouts and run each once, as many
        as the process's memory maps hold (`room_for_more`; at least one): a prefix of
        `configs`. `journal(i, "started")` before config i, `journal(i, "compiled")` after
        (so a config that kills the process is the one started and not compiled)."""
        prepared: List[Prepared] = []
        for i, config in enumerate(configs):
            if i > 0 and not room_for_more():
                break
            journal(i, "started")
            prepared.append(self._compile(config))
            journal(i, "compiled")
        return prepared

    def _compile(self, config: Config) -> Prepared:
        import jax

        start = time.perf_counter()
        try:
            compiled = self.lower(config).compile()
            args = [jax.device_put(a, f) for a, f in zip(self.args, self._formats(config))]
            jax.block_until_ready(compiled(*args))  # a config that crashes XLA does so here
        except Exception as e:  # noqa: BLE001 - XLA raises many kinds; the config is recorded as failed
            return Prepared(None, {"error": one_line(e), "compile_s": time.perf_counter() - start})
        return Prepared(lambda: jax.block_until_ready(compiled(*args)),
                        {"compile_s": time.perf_counter() - start})

    @staticmethod
    def time_all(prepared: Sequence[Prepared], settings: MeasureSettings, seed: Any = 0) -> List[Dict[str, Any]]:
        """Per prepared config, its timing (measure.time_interleaved: all of them in the same
        rounds) and compile time, or its error."""
        ok = [p for p in prepared if p.call is not None]
        timings = iter(time_interleaved([p.call for p in ok], settings, seed) if ok else [])
        return [{**next(timings), **p.info} if p.call is not None else dict(p.info) for p in prepared]

    def measure(self, configs: Sequence[Config], settings: MeasureSettings, seed: Any = 0) -> List[Dict[str, Any]]:
        """{runtime_s, repeats_s, number, compile_s, …} or {error, compile_s} per config,
        compiled first and then timed in the same rounds — all of them, or as many at a time
        as the process holds (`prepare`)."""
        out: List[Dict[str, Any]] = []
        while len(out) < len(configs):
            prepared = self.prepare(configs[len(out):])
            out += self.time_all(prepared, settings, f"{seed}:{len(out)}")
        return out
