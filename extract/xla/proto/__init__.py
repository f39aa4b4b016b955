"""Message classes for the raw XLA HLO and TpuGraphs tuning protos, built at import time.

Only the fields the featurizer reads are declared: `xla_hlo_minimal.proto` (package
`xla`, a subset of XLA's hlo.proto / xla_data.proto) and `tpugraphs_tuning_minimal.proto`
(package `tpu_graphs`, a subset of TpuGraphs' tuning.proto). Field names and numbers are
the originals, so real messages parse; undeclared fields are kept as unknown fields and
ignored.

Why no `_pb2.py`: protoc-generated code is tied to the protobuf runtime that generated
it (protobuf 7 rejects old gencode, and old runtimes reject new gencode). Descriptors
are wire-format data that every runtime accepts, so this module writes the two
`FileDescriptorProto`s itself (the `_XLA_*` and `_TUNING_MESSAGES` tables below mirror
the .proto files field for field) and asks the installed runtime for classes. The .proto files stay the readable
reference; a test compiles them with `protoc` when it is installed and checks the
descriptors here are identical.

Use `parse(HloModuleProto, path)` etc.: a damaged or truncated file raises ValueError
naming the file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence, Tuple, Type, Union

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

PROTO_DIR = Path(__file__).resolve().parent

_FDP = descriptor_pb2.FieldDescriptorProto
_SCALAR_TYPES = {
    "int32": _FDP.TYPE_INT32, "int64": _FDP.TYPE_INT64, "uint64": _FDP.TYPE_UINT64,
    "bool": _FDP.TYPE_BOOL, "string": _FDP.TYPE_STRING, "bytes": _FDP.TYPE_BYTES,
}

# A field is (label, type, name, number[, oneof name]); a type that is not a scalar is
# the full name of a message or enum declared here. A message is (name, fields,
# nested messages); an enum is (name, [(value name, number), ...]).
FieldSpec = Tuple
MessageSpec = Tuple[str, Sequence[FieldSpec], Sequence["MessageSpec"]]

_XLA_ENUMS = [
    ("PrimitiveType", [
        ("PRIMITIVE_TYPE_INVALID", 0), ("PRED", 1), ("S8", 2), ("S16", 3), ("S32", 4),
        ("S64", 5), ("U8", 6), ("U16", 7), ("U32", 8), ("U64", 9), ("F16", 10),
        ("F32", 11), ("F64", 12), ("TUPLE", 13), ("OPAQUE_TYPE", 14), ("C64", 15),
        ("BF16", 16), ("TOKEN", 17), ("C128", 18)]),
]

_XLA_MESSAGES: List[MessageSpec] = [
    ("LayoutProto", [("repeated", "int64", "minor_to_major", 1)], []),
    ("ShapeProto", [
        ("optional", ".xla.PrimitiveType", "element_type", 2),
        ("repeated", "int64", "dimensions", 3),
        ("repeated", ".xla.ShapeProto", "tuple_shapes", 4),
        ("optional", ".xla.LayoutProto", "layout", 5),
        ("repeated", "bool", "is_dynamic_dimension", 6)], []),
    ("ProgramShapeProto", [
        ("repeated", ".xla.ShapeProto", "parameters", 1),
        ("optional", ".xla.ShapeProto", "result", 2),
        ("repeated", "string", "parameter_names", 3)], []),
    ("WindowDimension", [
        ("optional", "int64", "size", 1), ("optional", "int64", "stride", 2),
        ("optional", "int64", "padding_low", 3), ("optional", "int64", "padding_high", 4),
        ("optional", "int64", "window_dilation", 5), ("optional", "int64", "base_dilation", 6),
        ("optional", "bool", "window_reversal", 7)], []),
    ("Window", [("repeated", ".xla.WindowDimension", "dimensions", 1)], []),
    ("ConvolutionDimensionNumbers", [
        ("optional", "int64", "input_batch_dimension", 7),
        ("optional", "int64", "input_feature_dimension", 8),
        ("repeated", "int64", "input_spatial_dimensions", 11),
        ("optional", "int64", "kernel_input_feature_dimension", 3),
        ("optional", "int64", "kernel_output_feature_dimension", 4),
        ("repeated", "int64", "kernel_spatial_dimensions", 6),
        ("optional", "int64", "output_batch_dimension", 9),
        ("optional", "int64", "output_feature_dimension", 10),
        ("repeated", "int64", "output_spatial_dimensions", 12)], []),
    ("PaddingConfig", [
        ("repeated", ".xla.PaddingConfig.PaddingConfigDimension", "dimensions", 1)], [
        ("PaddingConfigDimension", [
            ("optional", "int64", "edge_padding_low", 1),
            ("optional", "int64", "edge_padding_high", 2),
            ("optional", "int64", "interior_padding", 3)], [])]),
    ("ExecutionProfile", [("optional", "int64", "compute_time_ns", 4)], []),
    ("HloInstructionProto", [
        ("optional", "string", "name", 1),
        ("optional", "string", "opcode", 2),
        ("optional", ".xla.ShapeProto", "shape", 3),
        ("optional", "int64", "parameter_number", 9),
        ("optional", "string", "fusion_kind", 11),
        ("repeated", "int64", "dimensions", 14),
        ("optional", ".xla.Window", "window", 15),
        ("optional", ".xla.ConvolutionDimensionNumbers", "convolution_dimension_numbers", 16),
        ("repeated", ".xla.HloInstructionProto.SliceDimensions", "slice_dimensions", 17),
        ("repeated", "int64", "dynamic_slice_sizes", 20),
        ("optional", ".xla.PaddingConfig", "padding_config", 21),
        ("optional", "int64", "id", 35),
        ("repeated", "int64", "operand_ids", 36),
        ("repeated", "int64", "control_predecessor_ids", 37),
        ("repeated", "int64", "called_computation_ids", 38),
        ("optional", "int64", "feature_group_count", 50),
        ("optional", "int64", "batch_group_count", 58),
        ("optional", "bool", "is_stable", 60)], [
        ("SliceDimensions", [
            ("optional", "int64", "start", 1), ("optional", "int64", "limit", 2),
            ("optional", "int64", "stride", 3)], [])]),
    ("HloComputationProto", [
        ("optional", "string", "name", 1),
        ("repeated", ".xla.HloInstructionProto", "instructions", 2),
        ("optional", ".xla.ProgramShapeProto", "program_shape", 4),
        ("optional", "int64", "id", 5),
        ("optional", "int64", "root_id", 6)], []),
    ("HloModuleProto", [
        ("optional", "string", "name", 1),
        ("optional", "string", "entry_computation_name", 2),
        ("repeated", ".xla.HloComputationProto", "computations", 3),
        ("optional", ".xla.ProgramShapeProto", "host_program_shape", 4),
        ("optional", "int64", "id", 5),
        ("optional", "int64", "entry_computation_id", 6)], []),
    ("HloProto", [("optional", ".xla.HloModuleProto", "hlo_module", 1)], []),
]

_TUNING_MESSAGES: List[MessageSpec] = [
    ("TuningData", [("repeated", ".tpu_graphs.ModuleTuningData", "modules", 1)], []),
    ("ModuleTuningData", [
        ("optional", ".xla.HloModuleProto", "module", 1),
        ("optional", "uint64", "fingerprint", 2),
        ("repeated", ".tpu_graphs.ConfigProfile", "runs", 3),
        ("repeated", "uint64", "config_index_to_node", 4)], []),
    ("ConfigProfile", [
        ("optional", ".tpu_graphs.HloOpConfig", "op_config", 1, "config"),
        ("optional", ".tpu_graphs.HloModuleConfig", "module_config", 2, "config"),
        ("optional", "bool", "error", 3),
        ("optional", ".xla.ExecutionProfile", "profile", 4),
        ("optional", "bool", "is_default", 5)], []),
    ("HloOpConfig", [("optional", ".tpu_graphs.TileSizeConfig", "tile_size_config", 1)], []),
    ("TileSizeConfig", [
        ("repeated", "int64", "kernel_bounds", 1), ("repeated", "int64", "output_bounds", 2),
        ("repeated", "int64", "input_bounds", 3), ("repeated", "int64", "iteration_bounds", 4)],
     []),
    ("HloModuleConfig", [("optional", ".tpu_graphs.LayoutConfig", "layout_config", 1)], []),
    ("LayoutConfig", [
        ("repeated", ".tpu_graphs.LayoutConfig.NodeLayoutConfig", "nodes", 1)], [
        ("NodeLayoutConfig", [
            ("repeated", ".tpu_graphs.LayoutConfig.NodeLayoutConfig.TensorLayoutConfig",
             "tensors", 1)], [
            ("TensorLayoutConfig", [("repeated", "int32", "dims", 1)], [])])]),
]

_ENUM_NAMES = {".xla." + name for name, _ in _XLA_ENUMS}


def _message_descriptor(spec: MessageSpec) -> descriptor_pb2.DescriptorProto:
    name, fields, nested = spec
    out = descriptor_pb2.DescriptorProto(name=name)
    oneofs: Dict[str, int] = {}
    for label, type_name, field_name, number, *oneof in fields:
        field = out.field.add(name=field_name, number=number, label=(
            _FDP.LABEL_REPEATED if label == "repeated" else _FDP.LABEL_OPTIONAL))
        if type_name in _SCALAR_TYPES:
            field.type = _SCALAR_TYPES[type_name]
        else:
            field.type = _FDP.TYPE_ENUM if type_name in _ENUM_NAMES else _FDP.TYPE_MESSAGE
            field.type_name = type_name
        if oneof:
            if oneof[0] not in oneofs:
                oneofs[oneof[0]] = len(out.oneof_decl)
                out.oneof_decl.add(name=oneof[0])
            field.oneof_index = oneofs[oneof[0]]
    out.nested_type.extend(_message_descriptor(n) for n in nested)
    return out


def _file_descriptor(name: str, package: str, messages: Sequence[MessageSpec],
                     enums: Sequence = (), dependencies: Sequence[str] = ()
                     ) -> descriptor_pb2.FileDescriptorProto:
    out = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3",
                                             dependency=list(dependencies))
    for enum_name, values in enums:
        enum = out.enum_type.add(name=enum_name)
        enum.value.extend(descriptor_pb2.EnumValueDescriptorProto(name=v, number=n)
                          for v, n in values)
    out.message_type.extend(_message_descriptor(m) for m in messages)
    return out


def file_descriptors() -> List[descriptor_pb2.FileDescriptorProto]:
    """The two files' descriptors, dependencies first (what protoc would emit)."""
    return [
        _file_descriptor("xla_hlo_minimal.proto", "xla", _XLA_MESSAGES, _XLA_ENUMS),
        _file_descriptor("tpugraphs_tuning_minimal.proto", "tpu_graphs", _TUNING_MESSAGES,
                         dependencies=["xla_hlo_minimal.proto"]),
    ]


# A private pool: another library (jaxlib, tensorflow) may register the real, full
# xla.* messages in the default pool, and the names would clash.
_POOL = descriptor_pool.DescriptorPool()
for _file in file_descriptors():
    _POOL.AddSerializedFile(_file.SerializeToString())


def _message_class(full_name: str) -> Type[message.Message]:
    descriptor = _POOL.FindMessageTypeByName(full_name)
    if hasattr(message_factory, "GetMessageClass"):  # protobuf ≥ 4.21
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(_POOL).GetPrototype(descriptor)


PrimitiveType = _POOL.FindEnumTypeByName("xla.PrimitiveType")
HloModuleProto = _message_class("xla.HloModuleProto")
HloComputationProto = _message_class("xla.HloComputationProto")
HloInstructionProto = _message_class("xla.HloInstructionProto")
HloProto = _message_class("xla.HloProto")
ShapeProto = _message_class("xla.ShapeProto")
TuningData = _message_class("tpu_graphs.TuningData")
ModuleTuningData = _message_class("tpu_graphs.ModuleTuningData")
ConfigProfile = _message_class("tpu_graphs.ConfigProfile")
TileSizeConfig = _message_class("tpu_graphs.TileSizeConfig")


def read_source(source: Union[str, Path, bytes], name: str = "") -> Tuple[bytes, str]:
    """The bytes of a file path or of bytes given directly, and a label for messages."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), name or "<bytes>"
    label = name or str(source)
    try:
        return Path(source).read_bytes(), label
    except OSError as e:
        raise ValueError(f"{label}: cannot read ({e.strerror or e})") from None


def parse(message_class: Type[message.Message], source: Union[str, Path, bytes],
          name: str = "") -> message.Message:
    """Parse a serialized message from a file path or bytes; errors name the source.

    The wire format has no end marker, so a file cut exactly between two top-level
    fields parses as a shorter message; callers validate what they read (counts, ids).
    """
    data, label = read_source(source, name)
    if not data:
        raise ValueError(f"{label}: empty file, expected a serialized "
                         f"{message_class.DESCRIPTOR.full_name}")
    try:
        return message_class.FromString(data)
    except message.DecodeError as e:
        raise ValueError(f"{label}: not a valid {message_class.DESCRIPTOR.full_name} "
                         f"(truncated or corrupted: {e})") from None
