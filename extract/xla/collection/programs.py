"""The programs of the layout collection: an inference step and a training step of each
model in `extract.xla.collection.models`, as JAX functions of flat array arguments.

A `Program` is what the collector measures: `fn(*args)` with `args` the example arrays
(the parameters first, so that XLA's entry parameter i is argument i). The training
step is what most TpuGraphs graphs are: `value_and_grad` of the loss and an Adam update
of every parameter, returning the loss and the new parameters and moments.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

ADAM = (1e-3, 0.9, 0.999, 1e-8)  # learning rate, beta1, beta2, eps


@dataclass(frozen=True)
class Program:
    """A JAX function and example arguments: one graph of the collection."""

    name: str
    family: str
    fn: Callable[..., Any]
    example: Callable[[], List[np.ndarray]]  # built on request (needs JAX)
    # how another process builds the same program (compile_ahead.py): ("zoo", name) or
    # ("function", spec, name, family, *shapes); () where it cannot
    recipe: Tuple[str, ...] = ()

    def args(self) -> List[np.ndarray]:
        return [np.asarray(a) for a in self.example()]


def _loss(model: Any, params: Any, x: Any, y: Any) -> Any:
    import jax
    import jax.numpy as jnp
    out = model.apply(params, x)
    if model.loss == "mse":
        return jnp.mean((out - y) ** 2)
    logp = jax.nn.log_softmax(out, -1)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], -1))


def _inference(model: Any) -> Tuple[Callable, Callable]:
    import jax

    treedef: List[Any] = []

    def example() -> List[np.ndarray]:
        params = model.init(0)
        leaves, tree = jax.tree_util.tree_flatten(params)
        treedef[:] = [tree]
        x, _ = model.batch(1)
        return leaves + [x]

    def fn(*args: Any) -> Any:
        return model.apply(jax.tree_util.tree_unflatten(treedef[0], args[:-1]), args[-1])

    return fn, example


def _training(model: Any) -> Tuple[Callable, Callable]:
    """loss, new params, new first and second moments = step(params, m, v, x, y)."""
    import jax
    import jax.numpy as jnp

    treedef: List[Any] = []

    def example() -> List[np.ndarray]:
        leaves, tree = jax.tree_util.tree_flatten(model.init(0))
        treedef[:] = [tree]
        x, y = model.batch(1)
        zeros = [np.zeros_like(a) for a in leaves]
        return leaves + zeros + zeros + [x, y]

    def fn(*args: Any) -> Any:
        n = (len(args) - 2) // 3
        tree = treedef[0]
        params, m, v = (jax.tree_util.tree_unflatten(tree, args[i * n:(i + 1) * n]) for i in range(3))
        loss, grads = jax.value_and_grad(lambda p: _loss(model, p, args[-2], args[-1]))(params)
        lr, b1, b2, eps = ADAM
        m = jax.tree_util.tree_map(lambda a, g: b1 * a + (1 - b1) * g, m, grads)
        v = jax.tree_util.tree_map(lambda a, g: b2 * a + (1 - b2) * g * g, v, grads)
        params = jax.tree_util.tree_map(lambda p, a, b: p - lr * a / (jnp.sqrt(b) + eps), params, m, v)
        return loss, params, m, v

    return fn, example


def zoo() -> Dict[str, Program]:
    """Every program: `<model>.infer` and `<model>.train` for each model."""
    from extract.xla.collection.models import MODELS

    programs: Dict[str, Program] = {}
    for model in MODELS.values():
        for step, make in (("infer", _inference), ("train", _training)):
            fn, example = make(model)
            fn.__name__ = f"{model.name}_{step}"
            name = f"{model.name}.{step}"
            programs[name] = Program(name, model.family, fn, example, ("zoo", name))
    return programs


def select(names: Sequence[str]) -> List[Program]:
    """The zoo programs named (`all`: every one); an unknown name is a ValueError."""
    programs = zoo()
    if list(names) in ([], ["all"]):
        return list(programs.values())
    unknown = [n for n in names if n not in programs]
    if unknown:
        raise ValueError(f"unknown program(s) {', '.join(unknown)}; known: {', '.join(programs)}")
    return [programs[n] for n in names]


# The collection's official split, by model family (held-out families, not programs).
SPLIT_OF_FAMILY = {"gpt2": "valid", "wavenet": "valid", "efficientnet": "test", "mixer": "test"}
