"""Configurable nodes of a JAX program and the layouts a configuration gives them.

The program is traced once to a jaxpr (`jax.make_jaxpr`: a training step's gradient is
already a flat list of dots and convolutions there) and re-run by a small interpreter
(`Constrained`) that, under `jit`, can pin the layout of any layout-sensitive result:

* candidates: the program's arguments (XLA's entry parameters) and the results of
  `dot_general`, `conv_general_dilated`, `reshape` and `transpose` with at least two
  dimensions of size > 1 (a layout of fewer is no choice);
* a layout is a major-to-minor permutation, applied with
  `jax.experimental.layout.with_layout_constraint` (results) or as the argument's
  `Format` in `in_shardings` plus a `device_put` in that format (parameters);
* each candidate result is computed under `jax.named_scope("tpsim_<id>")`, so the HLO
  instruction it lowers to is found by its `metadata.op_name` (extract/xla/collection/hlo_names.py):
  that gives its node index in the graph, and in the compiled module the layout XLA
  chose for it when nothing is constrained (XLA's own assignment, the default config).

Calls (`jit`, custom JVP/VJP rules, remat) are inlined so their insides are candidates
too; loops and conditionals (`scan`, `while`, `cond`) are run as they are, their bodies
not configurable.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from extract.xla.collection.hlo_names import NodeName
from extract.xla.collection.roles import Roles, parameter_roles, roles_of

Perm = Tuple[int, ...]
Config = Dict[str, Perm]  # candidate id → major-to-minor order; absent: XLA chooses
HLO_OPCODES = {"dot_general": "dot", "conv_general_dilated": "convolution",
               "reshape": "reshape", "transpose": "transpose"}
_INLINED = {"pjit", "jit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
            "custom_vjp_call_jaxpr", "remat", "checkpoint", "custom_lin"}
_SUB_JAXPRS = ("jaxpr", "call_jaxpr", "fun_jaxpr")
SCOPE = "tpsim_"
FEATURE_WIDTH = 6  # per layout in node_config_feat: minor-to-major, -1 padded


@dataclass
class Candidate:
    """A result whose layout a configuration may set."""

    id: str                      # "p<i>" for argument i, "n<j>" for the j-th result
    kind: str                    # "parameter" or the primitive's name
    shape: Tuple[int, ...]
    operands: Tuple[str, ...] = ()  # the first two operands' candidate ids ("": not one)
    node: int = -1               # node index in the graph (pre-fusion HLO)
    default: Perm = ()           # XLA's major-to-minor in the unconstrained program
    # what each dimension of its output and operands is to the operation (roles.py); traced,
    # not saved in plans: a program's re-trace gives them again
    roles: Roles = ()

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def nbytes_key(self) -> int:
        return int(np.prod(self.shape))

    def as_dict(self) -> Dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "shape": list(self.shape),
                "operands": list(self.operands), "node": self.node, "default": list(self.default)}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Candidate":
        return cls(d["id"], d["kind"], tuple(d["shape"]), tuple(d["operands"]), d["node"],
                   tuple(d["default"]))


def configurable_shape(shape: Sequence[int]) -> bool:
    return sum(1 for d in shape if d > 1) >= 2


def row_major(rank: int) -> Perm:
    return tuple(range(rank))


class Constrained:
    """`fn` re-run from its jaxpr with the layouts of a `Config` pinned (module docstring)."""

    def __init__(self, fn: Callable, args: Sequence[np.ndarray]) -> None:
        import jax

        self.closed = jax.make_jaxpr(fn)(*args)
        self.avals = [(tuple(a.shape), a.dtype) for a in args]
        self.candidates: Dict[str, Candidate] = {}
        for i, (shape, _) in enumerate(self.avals):
            if configurable_shape(shape):
                self.candidates[f"p{i}"] = Candidate(f"p{i}", "parameter", shape,
                                                     roles=parameter_roles(len(shape)))
        self.config: Config = {}
        self._count = 0
        self._operand_of: Dict[Any, str] = {}
        # One abstract run finds the candidate results.
        jax.eval_shape(self.function({}), *[jax.ShapeDtypeStruct(s, d) for s, d in self.avals])

    def function(self, config: Config) -> Callable:
        """A function of the program's arguments with `config`'s result layouts pinned."""
        def run(*args: Any) -> Any:
            self.config, self._count = config, 0
            self._operand_of = {}
            for i, v in enumerate(self.closed.jaxpr.invars):
                if f"p{i}" in self.candidates:
                    self._operand_of[v] = f"p{i}"
            outs = self._eval(self.closed.jaxpr, self.closed.consts, args)
            return outs[0] if len(outs) == 1 else tuple(outs)

        run.__name__ = "program"
        return run

    # ---------------------------------------------------------------- interpreter
    def _eval(self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> List[Any]:
        from jax.extend.core import Literal

        env: Dict[Any, Any] = {}
        read = lambda v: v.val if isinstance(v, Literal) else env[v]  # noqa: E731
        for v, x in zip(jaxpr.constvars, consts):
            env[v] = x
        for v, x in zip(jaxpr.invars, args):
            env[v] = x
        for eqn in jaxpr.eqns:
            outs = self._eqn(eqn, [read(v) for v in eqn.invars])
            for v, x in zip(eqn.outvars, outs):
                env[v] = x
        return [read(v) for v in jaxpr.outvars]

    def _eqn(self, eqn: Any, invals: List[Any]) -> List[Any]:
        name = eqn.primitive.name
        sub = next((eqn.params[k] for k in _SUB_JAXPRS if k in eqn.params), None)
        if name in _INLINED and sub is not None:
            jaxpr, consts = (sub.jaxpr, sub.consts) if hasattr(sub, "consts") else (sub, ())
            return self._eval(jaxpr, consts, invals)
        if name not in HLO_OPCODES or not configurable_shape(eqn.outvars[0].aval.shape):
            return self._bind(eqn, invals)
        node_id = f"n{self._count}"
        self._count += 1
        import jax
        from jax.experimental.layout import Layout, with_layout_constraint
        from jax.extend.core import Literal

        if node_id not in self.candidates:
            operands = tuple("" if isinstance(v, Literal) else self._operand_of.get(v, "")
                             for v in eqn.invars[:2])
            self.candidates[node_id] = Candidate(node_id, name, tuple(eqn.outvars[0].aval.shape),
                                                 operands, roles=roles_of(eqn))
        self._operand_of[eqn.outvars[0]] = node_id
        with jax.named_scope(SCOPE + node_id):
            out = self._bind(eqn, invals)[0]
        if node_id in self.config:
            out = with_layout_constraint(out, Layout(major_to_minor=tuple(self.config[node_id])))
        return [out]

    @staticmethod
    def _bind(eqn: Any, invals: List[Any]) -> List[Any]:
        with eqn.ctx.manager:
            out = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(eqn.params))
        return list(out) if eqn.primitive.multiple_results else [out]


def locate(candidates: Dict[str, Candidate], pre_fusion: Sequence[NodeName],
           compiled: Sequence[NodeName]) -> List[str]:
    """Set each candidate's node index (pre-fusion HLO) and default layout (compiled
    HLO); the ids of the candidates whose instruction was not found (dropped)."""
    dropped = []
    for cid, cand in list(candidates.items()):
        node = _find(cand, pre_fusion)
        if node is None:
            dropped.append(cid)
            del candidates[cid]
            continue
        cand.node = node.index
        chosen = _find(cand, compiled)
        m2m = chosen.minor_to_major if chosen is not None and len(chosen.minor_to_major) == cand.rank else ()
        cand.default = tuple(reversed(m2m)) if m2m else row_major(cand.rank)
    return dropped


def _find(cand: Candidate, nodes: Sequence[NodeName]) -> Optional[NodeName]:
    if cand.kind == "parameter":
        number = int(cand.id[1:])
        return next((n for n in nodes if n.entry and n.opcode == "parameter"
                     and n.parameter_number == number), None)
    scope, opcode = f"{SCOPE}{cand.id}/", HLO_OPCODES[cand.kind]
    found = [n for n in nodes if n.opcode == opcode and ("/" + n.op_name).find("/" + scope) >= 0]
    return found[-1] if found else None


# ---------------------------------------------------------------- configurations
@dataclass(frozen=True)
class Space:
    """The configurable nodes of a program (in node order) and their layouts."""

    nodes: Tuple[Candidate, ...]

    def permutations(self, cand: Candidate) -> List[Perm]:
        return list(itertools.permutations(range(cand.rank)))

    def random_config(self, rng: np.random.Generator) -> Config:
        """Every node a uniformly random layout (TpuGraphs' `random` search)."""
        out = {}
        for cand in self.nodes:
            perms = self.permutations(cand)
            out[cand.id] = perms[int(rng.integers(len(perms)))]
        return out

    def near_default(self, rng: np.random.Generator, max_changes: int = 3) -> Config:
        """XLA's assignment with 1..max_changes nodes moved to another layout
        (TpuGraphs' `default` search)."""
        changes = int(rng.integers(1, min(max_changes, len(self.nodes)) + 1))
        out = {}
        for i in rng.choice(len(self.nodes), changes, replace=False):
            cand = self.nodes[int(i)]
            others = [p for p in self.permutations(cand) if p != cand.default]
            out[cand.id] = others[int(rng.integers(len(others)))]
        return out

    def features(self, config: Config) -> np.ndarray:
        """node_config_feat of one config, (nodes, 18): output, input (first operand)
        and kernel (second operand) minor-to-major, -1 padded; an unconstrained node
        has XLA's layout."""
        index = {c.id: c for c in self.nodes}
        out = np.full((len(self.nodes), 3 * FEATURE_WIDTH), -1.0, np.float32)
        for row, cand in enumerate(self.nodes):
            layouts = [cand.id] + list(cand.operands[:2])
            for slot, cid in enumerate(layouts):
                if cid in index:
                    m2m = tuple(reversed(config.get(cid, index[cid].default)))[:FEATURE_WIDTH]
                    out[row, slot * FEATURE_WIDTH:slot * FEATURE_WIDTH + len(m2m)] = m2m
        return out

    def context(self) -> Dict[str, np.ndarray]:
        """The npz's `node_config_roles` and `node_config_default` (extract/xla/npz_format.py):
        each node's roles per slot (-1 past its rank or for a slot it lacks) and XLA's own
        layouts. A ValueError if a node was not traced (no roles)."""
        roles = np.full((len(self.nodes), 3 * FEATURE_WIDTH), -1, np.int8)
        for row, cand in enumerate(self.nodes):
            if not cand.roles:
                raise ValueError(f"candidate {cand.id} ({cand.kind} {list(cand.shape)}) has no roles: "
                                 f"it comes from a plan, not from tracing the program")
            for slot, dims in enumerate(cand.roles[:3]):
                dims = dims[:FEATURE_WIDTH]
                roles[row, slot * FEATURE_WIDTH:slot * FEATURE_WIDTH + len(dims)] = dims
        return {"node_config_roles": roles, "node_config_default": self.features({})}


def config_key(config: Config) -> str:
    """A config's canonical text (its identity in logs)."""
    return ";".join(f"{k}={','.join(map(str, v))}" for k, v in sorted(config.items()))


def parse_config_key(key: str) -> Config:
    if not key:
        return {}
    return {k: tuple(int(x) for x in v.split(",")) for k, v in
            (item.split("=") for item in key.split(";"))}


def sample_configs(space: Space, count: int, search: str, seed: int) -> List[Config]:
    """`count` distinct configs of one search ("random" or "default"), XLA's own
    assignment (the empty config) first; fewer when the space holds fewer."""
    rng = np.random.default_rng(seed)
    configs, seen = [{}], {""}
    draw = space.random_config if search == "random" else space.near_default
    attempts = 0
    while len(configs) < count and attempts < 20 * count and space.nodes:
        attempts += 1
        config = draw(rng)
        key = config_key(config)
        if key not in seen:
            seen.add(key)
            configs.append(config)
    return configs
