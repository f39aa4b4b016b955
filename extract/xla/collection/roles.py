"""What each dimension of a configurable node's arrays is to its operation (`LAYOUT_ROLES`).

A layout row names dimension indices ("dimension 2 is minor"); whether that dimension is the
one a dot contracts over or a free one is what makes a layout fast or slow, and it is the
same across programs where the indices are not. From the jaxpr equation of the node:

* `dot_general`: per operand, each dimension is batch, contracted, or free — left-free
  on the first operand, right-free on the second; the output is batch dimensions, then the
  first operand's free ones, then the second's (jax.lax.dot_general's order);
* `conv_general_dilated`, read as a matmul: the input's batch dimension and the output's
  batch are left-free, the kernel's output feature and the output's feature right-free,
  the input's feature and the kernel's input feature contracted, every spatial dimension
  spatial;
* any other operation (reshape, transpose) and a program's parameters: "none".

Roles are per slot (output, first operand, second operand), one entry per dimension of the
slot's array; the npz carries them as `node_config_roles` (extract/xla/npz_format.py).
"""
from __future__ import annotations

from typing import Any, Sequence, Tuple

from extract.xla.npz_format import LAYOUT_ROLES

Roles = Tuple[Tuple[int, ...], ...]  # per slot: the role id of each dimension
NONE, BATCH, CONTRACTED, LEFT_FREE, RIGHT_FREE, SPATIAL = (
    LAYOUT_ROLES.index(r) for r in ("none", "batch", "contracted", "left-free", "right-free", "spatial"))


def roles_of(eqn: Any) -> Roles:
    """The roles of an equation's output and first two operands' dimensions."""
    name = eqn.primitive.name
    if name == "dot_general":
        return _dot(eqn)
    if name == "conv_general_dilated":
        return _conv(eqn.params["dimension_numbers"])
    ranks = [len(eqn.outvars[0].aval.shape)] + [len(getattr(v.aval, "shape", ())) for v in eqn.invars[:2]]
    return tuple((NONE,) * rank for rank in ranks)


def parameter_roles(rank: int) -> Roles:
    return ((NONE,) * rank,)


def _dot(eqn: Any) -> Roles:
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
    lhs_rank, rhs_rank = (len(v.aval.shape) for v in eqn.invars[:2])

    def operand(rank: int, contract: Sequence[int], batch: Sequence[int], free: int) -> Tuple[int, ...]:
        return tuple(BATCH if d in batch else CONTRACTED if d in contract else free for d in range(rank))

    lhs = operand(lhs_rank, lhs_contract, lhs_batch, LEFT_FREE)
    rhs = operand(rhs_rank, rhs_contract, rhs_batch, RIGHT_FREE)
    out = ((BATCH,) * len(lhs_batch) + (LEFT_FREE,) * (lhs_rank - len(lhs_contract) - len(lhs_batch))
           + (RIGHT_FREE,) * (rhs_rank - len(rhs_contract) - len(rhs_batch)))
    return out, lhs, rhs


def _conv(numbers: Any) -> Roles:
    """`numbers`: ConvDimensionNumbers (lhs_spec, rhs_spec, out_spec), each spec the batch or
    output-feature dimension, then the feature dimension, then the spatial ones."""
    def spec(dims: Sequence[int], first: int, second: int) -> Tuple[int, ...]:
        roles = [SPATIAL] * len(dims)
        roles[dims[0]], roles[dims[1]] = first, second
        return tuple(roles)

    return (spec(numbers.out_spec, LEFT_FREE, RIGHT_FREE), spec(numbers.lhs_spec, LEFT_FREE, CONTRACTED),
            spec(numbers.rhs_spec, RIGHT_FREE, CONTRACTED))
