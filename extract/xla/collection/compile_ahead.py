"""Compiling a batch of configs on two cores: the measuring process from the first config
on, a helper process on another core from the last one back.

Compiling is most of a program's collection on one core (55–77 % of its wall time on an
Intel Xeon: a ResNet training step's config compiles in 3–6 s and is timed in about one
second of repeats). Both processes compile through JAX's persistent compilation cache (a
folder under ROOT), so each finds there the configs the other has compiled (loading one
takes ~0.1 s) and a batch is compiled in about half the time. What is timed does not change:

* every config of a batch is compiled once, by one of the two: the cache is emptied before
  each batch, so a re-measured config is compiled anew, as the noise ceiling asks (XLA's CPU
  code differs from one compile of a config to the next);
* the helper is stopped before the batch is timed, so the measuring core times alone, as
  before; and no cache is used outside a batch's compiles (the probe compiles XLA's layout
  several times on purpose).

A config the helper cannot compile is compiled again by the measuring process, which records
the error; a helper that dies leaves the rest of the batch to it.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
from pathlib import Path
from typing import Iterator, Optional, Sequence, Tuple

from extract.xla.collection.layouts import parse_config_key
from extract.xla.collection.programs import Program, zoo
from extract.xla.collection.runner import Lowering

CACHE_FOLDER = "compile_cache"   # under ROOT; empty between batches
CACHE_MAX_BYTES = 1 << 36        # a size limit makes JAX lock the cache's files between the processes


def rebuild(recipe: Tuple[str, ...]) -> Program:
    """The program a `Program.recipe` names, built again (in the helper process)."""
    from extract.xla.collection.functions import function_program

    kind, *rest = recipe or ("",)
    if kind == "zoo":
        return zoo()[rest[0]]
    if kind == "function":
        spec, name, family, *shapes = rest
        return function_program(spec, shapes, name, family)
    raise ValueError(f"no recipe to build program {recipe!r} in another process")


class CompileAhead:
    """Compiles a program's batches on `core` too (None: no helper, the measuring process
    compiles alone), through the cache in `folder`."""

    def __init__(self, program: Program, core: Optional[int], folder: Path) -> None:
        if core is not None and not program.recipe:
            raise ValueError(f"{program.name}: a compile core ({core}) needs the program's recipe "
                             f"(Program.recipe: how another process builds it, ('zoo', NAME) or "
                             f"('function', …)); give it one, or measure without a compile core")
        self.recipe = program.recipe
        self.core = core
        self.folder = Path(folder).resolve()

    @contextlib.contextmanager
    def batch(self, keys: Sequence[str]) -> Iterator[None]:
        """While the block compiles the configs `keys` in this order, the helper compiles
        them from the back; it is stopped when the block ends."""
        if self.core is None or len(keys) < 2:
            yield
            return
        _empty(self.folder)
        helper = multiprocessing.get_context("spawn").Process(
            target=_compile_backwards, args=(self.recipe, list(keys), str(self.folder), self.core, os.getpid()),
            daemon=True)
        helper.start()
        use_cache(str(self.folder))
        try:
            yield
        finally:
            use_cache(None)
            helper.terminate()
            helper.join()
            _empty(self.folder)


def use_cache(folder: Optional[str]) -> None:
    """This process's compiles go through JAX's persistent cache in `folder`, every one of
    them however quick or small (None: no cache)."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    jax.config.update("jax_compilation_cache_max_size", CACHE_MAX_BYTES)
    compilation_cache.reset_cache()  # JAX reads the settings again at the next compile


def _empty(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)


def _compile_backwards(recipe: Tuple[str, ...], keys: Sequence[str], folder: str, core: int, parent: int) -> None:
    """The helper: compile `keys` from the last one back into the cache (XLA_FLAGS are the
    measuring process's: the environment is inherited, and the cache's keys include them);
    it stops if the measuring process is killed."""
    os.sched_setaffinity(0, {core})
    use_cache(folder)
    program = rebuild(recipe)
    lowering = Lowering(program.fn, program.args())
    for key in reversed(keys):
        if os.getppid() != parent:
            return
        try:
            lowering.lower(parse_config_key(key)).compile()
        except Exception:  # noqa: BLE001 - the measuring process compiles it too, and records the error
            continue
