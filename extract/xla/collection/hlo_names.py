"""What the featurizer's minimal HLO proto leaves out and the collection needs: each
instruction's `metadata.op_name` (the JAX name stack) and result layout, by node.

A second, even smaller view of `HloModuleProto` (field names and numbers as XLA's
hlo.proto: computations 3 → instructions 2 → name 1, opcode 2, shape 3 → layout 5 →
minor_to_major 1, metadata 7 → op_name 2) is parsed from the same bytes; its nodes come in
the featurizer's order (every instruction of every computation, in the proto's order),
so index i here is node i of the graph (extract/hlo_graph.py).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import List, Tuple

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_FIELD = descriptor_pb2.FieldDescriptorProto
# (message, [(field name, number, type or message name, repeated)])
_VIEW = [
    ("OpMetadata", [("op_name", 2, _FIELD.TYPE_STRING, False)]),
    ("Layout", [("minor_to_major", 1, _FIELD.TYPE_INT64, True)]),
    ("Shape", [("dimensions", 3, _FIELD.TYPE_INT64, True), ("layout", 5, "Layout", False)]),
    ("Instruction", [("name", 1, _FIELD.TYPE_STRING, False), ("opcode", 2, _FIELD.TYPE_STRING, False),
                     ("shape", 3, "Shape", False), ("metadata", 7, "OpMetadata", False),
                     ("parameter_number", 9, _FIELD.TYPE_INT64, False)]),
    ("Computation", [("name", 1, _FIELD.TYPE_STRING, False),
                     ("instructions", 2, "Instruction", True)]),
    ("Module", [("computations", 3, "Computation", True),
                ("entry_computation_name", 2, _FIELD.TYPE_STRING, False)]),
]
_PACKAGE = "tpsim.hlo_names"


@functools.lru_cache(maxsize=1)
def _module_class():
    file = descriptor_pb2.FileDescriptorProto(name="tpsim_hlo_names.proto", package=_PACKAGE,
                                              syntax="proto3")
    for name, fields in _VIEW:
        message = file.message_type.add(name=name)
        for field_name, number, kind, repeated in fields:
            field = message.field.add(name=field_name, number=number,
                                      label=_FIELD.LABEL_REPEATED if repeated else _FIELD.LABEL_OPTIONAL)
            if isinstance(kind, str):
                field.type, field.type_name = _FIELD.TYPE_MESSAGE, f".{_PACKAGE}.{kind}"
            else:
                field.type = kind
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.Module"))


@dataclass(frozen=True)
class NodeName:
    """One instruction: node index, computation, name, opcode, JAX op name, layout."""

    index: int
    computation: str
    name: str
    opcode: str
    op_name: str
    minor_to_major: Tuple[int, ...]
    parameter_number: int
    entry: bool


def node_names(serialized: bytes) -> List[NodeName]:
    """Every instruction of a serialized HloModuleProto, in node order."""
    module = _module_class().FromString(serialized)
    nodes: List[NodeName] = []
    for computation in module.computations:
        entry = computation.name == module.entry_computation_name
        for inst in computation.instructions:
            nodes.append(NodeName(len(nodes), computation.name, inst.name, inst.opcode,
                                  inst.metadata.op_name, tuple(inst.shape.layout.minor_to_major),
                                  int(inst.parameter_number), entry))
    return nodes
