"""docs/RELIABILITY.md, class 7, XLA side: a protobuf cut short (or damaged) never reads as a
smaller module. The wire format has no end marker, so a file cut exactly between two
top-level fields parses; what the message declares is cross-checked instead
(extract/xla/hlo_graph.py `module_problem`, extract/xla/convert_tuning.py): operands, control
predecessors, called computations, the entry computation, parameter counts, config
slots vs `config_index_to_node`. Every cut and every byte flip either raises a one-line
ValueError naming the file or gives exactly the full file's graphs."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from extract.xla import convert_hlo as hlo, hlo_graph, proto, npz_format
from extract.xla.convert_tuning import read_tuning_file

from tpugraphs_raw import LAYOUT_PB, TILE_PB, needs_raw

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------- helpers

def small_module() -> object:
    """A complete little XLA module, as XLA writes one: callees first, the entry last,
    program shapes, a control dependency, a fusion and a reduce calling computations."""
    module = proto.HloModuleProto(name="small", entry_computation_name="main", id=7,
                                  entry_computation_id=3)
    add = module.computations.add(name="add", id=1, root_id=12)
    for number, inst_id in enumerate((10, 11)):
        add.instructions.add(name=f"a{number}", opcode="parameter", id=inst_id,
                             parameter_number=number).shape.element_type = 11
        add.program_shape.parameters.add(element_type=11)
    add.instructions.add(name="sum", opcode="add", id=12, operand_ids=[10, 11]).shape.element_type = 11
    add.program_shape.result.element_type = 11
    fused = module.computations.add(name="fused", id=2, root_id=21)
    fp = fused.instructions.add(name="fp", opcode="parameter", id=20)
    fp.shape.element_type = 11
    fp.shape.dimensions.extend([4, 8])
    neg = fused.instructions.add(name="neg", opcode="negate", id=21, operand_ids=[20])
    neg.shape.CopyFrom(fp.shape)
    fused.program_shape.parameters.add().CopyFrom(fp.shape)
    main = module.computations.add(name="main", id=3, root_id=35)
    p0 = main.instructions.add(name="p0", opcode="parameter", id=30)
    p0.shape.CopyFrom(fp.shape)
    main.instructions.add(name="p1", opcode="parameter", id=31, parameter_number=1).shape.element_type = 11
    main.instructions.add(name="fusion", opcode="fusion", id=32, operand_ids=[30],
                          called_computation_ids=[2]).shape.CopyFrom(fp.shape)
    main.instructions.add(name="zero", opcode="constant", id=33,
                          control_predecessor_ids=[31]).shape.element_type = 11
    reduce = main.instructions.add(name="reduce", opcode="reduce", id=34, operand_ids=[32, 33],
                                   called_computation_ids=[1], dimensions=[1])
    reduce.shape.element_type = 11
    reduce.shape.dimensions.append(4)
    main.instructions.add(name="root", opcode="tuple", id=35, operand_ids=[34, 31]).shape.element_type = 13
    for shape in (p0.shape, main.instructions[1].shape):
        main.program_shape.parameters.add().CopyFrom(shape)
        module.host_program_shape.parameters.add().CopyFrom(shape)
    return module


def field_ends(data: bytes, depth: int = 1, base: int = 0) -> List[int]:
    """Offsets where a field ends, at the top level and `depth - 1` levels further into
    length-delimited fields (where a cut leaves whole fields behind)."""
    def varint(pos: int):
        value = shift = 0
        while True:
            byte = data[pos]
            value |= (byte & 0x7F) << shift
            pos, shift = pos + 1, shift + 7
            if byte < 0x80:
                return value, pos
    ends, pos = [], 0
    while pos < len(data):
        tag, pos = varint(pos)
        wire = tag & 7
        if wire == 0:
            _, pos = varint(pos)
        elif wire == 2:
            size, start = varint(pos)
            if depth > 1:  # (a string or packed field is no message: keep what fits)
                try:
                    inner = field_ends(data[start:start + size], depth - 1, base + start)
                except IndexError:
                    inner = []
                ends += [end for end in inner if end <= base + start + size]
            pos = start + size
        else:
            pos += 8 if wire == 1 else 4
        ends.append(base + pos)
    return ends


def same_graphs(got: List[npz_format.NpzGraph], full: Dict[str, npz_format.NpzGraph]) -> None:
    """Each graph read is the full file's graph of that name, array for array."""
    assert got
    for graph in got:
        whole = full[graph.name]
        assert sorted(graph.arrays) == sorted(whole.arrays), graph.name
        for key, values in whole.arrays.items():
            assert graph.arrays[key].dtype == values.dtype, (graph.name, key)
            assert np.array_equal(graph.arrays[key], values), (graph.name, key)


def one_line_error_naming(call, label: str) -> bool:
    """True when `call` raises a one-line ValueError naming `label`; False when it returns."""
    try:
        call()
    except ValueError as e:
        assert str(e).startswith(f"{label}: ") and "\n" not in str(e), str(e)
        return True
    return False


# ---------------------------------------------------------------------------- HLO modules

@functools.lru_cache(maxsize=None)
def hlo_protos() -> Dict[str, bytes]:
    """Serialized modules made here: the small module, and JAX's (pre-fusion and
    compiled) when JAX is installed."""
    out = {"small.pb": small_module().SerializeToString()}
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return out

    def f(x, w):
        def body(carry):
            i, v = carry
            return i + 1, jnp.tanh(v @ w)
        return jax.lax.while_loop(lambda c: c[0] < 2, body, (0, x))[1].sum(axis=0)

    lowered = jax.jit(f).lower(jnp.ones((4, 8)), jnp.ones((8, 8)))
    out["jax.pb"] = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
    out["jax_compiled.pb"] = (lowered.compile().runtime_executable().hlo_modules()[0]
                              .as_serialized_hlo_module_proto())
    return out


def test_the_small_module_is_complete():
    module = small_module()
    assert hlo_graph.module_problem(module) is None
    graphs = hlo.module_graphs(module, source="small.pb")
    assert [g.kind for g in graphs] == ["layout", "tile", "tile"]
    assert graphs[0].num_nodes == 11


@pytest.mark.parametrize("name", ["small.pb", "jax.pb", "jax_compiled.pb"])
def test_hlo_modules_cut_at_every_byte(name):
    protos = hlo_protos()
    if name not in protos:
        pytest.skip("jax not installed")
    data = protos[name]
    full_module = hlo_graph.read_hlo_module(data)
    full = {g.name: g for g in hlo.module_graphs(full_module, source=name)}
    wrapped = proto.HloProto(hlo_module=full_module).SerializeToString()
    complete = 0
    for source in (data, wrapped):
        for cut in range(len(source)):
            def read():
                module = hlo_graph.read_hlo_module(source[:cut], name=name)
                return hlo_graph.featurize_module(module, source=name), module
            try:
                graph, module = read()
            except ValueError as e:
                assert str(e).startswith(f"{name}: ") and "\n" not in str(e), str(e)
                continue
            # Parsed: only where nothing the graph depends on was cut off.
            assert graph.num_nodes == full[full_module.name].num_nodes, cut
            same_graphs(hlo.module_graphs(module, source=name), full)
            complete += 1
    assert complete >= 1  # (the cuts after the last field the graph reads)


HLO_DAMAGE = st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)),
                      min_size=1, max_size=4)


@settings(max_examples=150, **SETTINGS)
@given(name=st.sampled_from(["small.pb", "jax.pb", "jax_compiled.pb"]), damage=HLO_DAMAGE,
       wrap=st.booleans())
def test_damaged_hlo_modules_give_a_clear_error_or_a_valid_graph(name, damage, wrap):
    protos = hlo_protos()
    data = protos.get(name, protos["small.pb"])
    if wrap:
        data = proto.HloProto(hlo_module=hlo_graph.read_hlo_module(data)).SerializeToString()
    data = bytearray(data)
    for where, value in damage:
        data[int(where * len(data))] = value
    graphs = []
    if not one_line_error_naming(lambda: graphs.extend(hlo.module_graphs(
            hlo_graph.read_hlo_module(bytes(data), name=name), source=name)), name):
        for graph in graphs:  # a valid graph, every value checked
            npz_format.check_arrays(graph.arrays, name)


@st.composite
def random_modules(draw):
    """A consistent random module as XLA would write it (unique ids, operands earlier in
    the same computation, callees earlier, parameters 0..k-1, the entry last), and
    `mutations` (0 to 3) of it drawn at random: (module, mutated)."""
    module = proto.HloModuleProto(name="g")
    next_id = draw(st.integers(0, 3))
    computations = draw(st.integers(1, 4))
    for c in range(computations):
        computation = module.computations.add(name=f"c{c}", id=100 + c)
        ids: List[int] = []
        parameters = 0
        for _ in range(draw(st.integers(1, 5))):
            next_id += 1
            if draw(st.booleans()) and not ids or draw(st.integers(0, 4)) == 0:
                inst = computation.instructions.add(name=f"p{next_id}", opcode="parameter",
                                                    id=next_id, parameter_number=parameters)
                parameters += 1
            else:
                opcode = draw(st.sampled_from(["add", "fusion", "reduce", "tuple", "erf"]))
                inst = computation.instructions.add(name=f"i{next_id}", opcode=opcode, id=next_id)
                inst.operand_ids.extend(draw(st.lists(st.sampled_from(ids), max_size=3))
                                        if ids else [])
                callees = [100 + k for k in range(c)]
                if callees and opcode in ("fusion", "reduce"):
                    inst.called_computation_ids.append(draw(st.sampled_from(callees)))
                if ids and draw(st.integers(0, 5)) == 0:
                    inst.control_predecessor_ids.append(draw(st.sampled_from(ids)))
            inst.shape.dimensions.extend(draw(st.lists(st.integers(0, 64), max_size=3)))
            ids.append(next_id)
        computation.root_id = ids[-1]
        if draw(st.booleans()):
            for _ in range(parameters):
                computation.program_shape.parameters.add()
    entry = module.computations[-1]
    if draw(st.booleans()):
        module.entry_computation_name = entry.name
    if draw(st.booleans()):
        module.entry_computation_id = entry.id
    mutations = draw(st.lists(st.tuples(st.sampled_from(MUTATIONS), st.integers(0, 10**6)),
                              max_size=3))
    for mutation, seed in mutations:
        _mutate(module, mutation, seed)
    return module, bool(mutations)


MUTATIONS = ["operand", "callee", "control", "root", "entry name", "entry id", "parameter",
             "duplicate id", "drop computation", "swap computations", "program shape",
             "no opcode", "drop instruction"]


def _mutate(module, mutation: str, seed: int) -> None:
    computation = module.computations[seed % len(module.computations)]
    instructions = computation.instructions
    inst = instructions[seed % len(instructions)] if len(instructions) else None
    if mutation == "operand" and inst is not None:
        inst.operand_ids.append(seed % 40)
    elif mutation == "callee" and inst is not None:
        inst.called_computation_ids.append(100 + seed % 6)
    elif mutation == "control" and inst is not None:
        inst.control_predecessor_ids.append(seed % 40)
    elif mutation == "root":
        computation.root_id = seed % 40
    elif mutation == "entry name":
        module.entry_computation_name = f"c{seed % 6}"
    elif mutation == "entry id":
        module.entry_computation_id = 100 + seed % 6
    elif mutation == "parameter" and inst is not None:
        inst.opcode, inst.parameter_number = "parameter", seed % 4
    elif mutation == "duplicate id" and inst is not None:
        inst.id = 1 + seed % 20
    elif mutation == "drop computation" and len(module.computations) > 1:
        del module.computations[seed % len(module.computations)]
    elif mutation == "swap computations" and len(module.computations) > 1:
        first, second = module.computations[0], module.computations[-1]
        a, b = proto.HloComputationProto(), proto.HloComputationProto()
        a.CopyFrom(first)
        b.CopyFrom(second)
        first.CopyFrom(b)
        second.CopyFrom(a)
    elif mutation == "program shape":
        computation.program_shape.parameters.add()
    elif mutation == "no opcode" and inst is not None:
        inst.opcode = ""
    elif mutation == "drop instruction" and len(instructions) > 1:
        del instructions[seed % len(instructions)]


@settings(max_examples=300, **SETTINGS)
@given(drawn=random_modules(), wrap=st.booleans())
def test_random_modules_read_when_consistent_and_are_refused_or_consistent_when_garbled(
        drawn, wrap):
    """A consistent module is always read (no false alarm); a garbled one is refused
    with a one-line error naming the file, or — where the change left it consistent —
    read into a graph that holds together."""
    module, mutated = drawn
    data = (proto.HloProto(hlo_module=module) if wrap else module).SerializeToString()
    graphs: List[npz_format.NpzGraph] = []
    if one_line_error_naming(lambda: graphs.extend(hlo.module_graphs(
            hlo_graph.read_hlo_module(data, name="g.pb"), source="g.pb")), "g.pb"):
        assert mutated, "a consistent module was refused"
        event("refused")
        return
    event("read, mutated" if mutated else "read")
    assert hlo_graph.module_problem(module) is None
    layout = graphs[0]
    assert layout.num_nodes == sum(len(c.instructions) for c in module.computations)
    for graph in graphs:
        npz_format.check_arrays(graph.arrays, graph.name)


def bad_module(change: str) -> object:
    """small_module() with one thing wrong."""
    module = small_module()
    add, fused, main = module.computations
    if change == "operand missing":
        main.instructions[5].operand_ids.append(99)
    elif change == "operand later":
        main.instructions[2].operand_ids[0] = 34
    elif change == "operand elsewhere":
        main.instructions[2].operand_ids[0] = 21
    elif change == "control predecessor":
        main.instructions[3].control_predecessor_ids[0] = 77
    elif change == "callee missing":
        main.instructions[2].called_computation_ids[0] = 42
    elif change == "callee after caller":
        module.computations[0].instructions[2].called_computation_ids.append(2)
    elif change == "entry name":  # (a name only: XLA writes the id after the computations)
        module.entry_computation_name = "main.2"
        module.ClearField("entry_computation_id")
    elif change == "entry id":
        module.entry_computation_id = 9
    elif change == "entry disagree":
        module.entry_computation_id = 2
    elif change == "root":
        main.root_id = 99
    elif change == "parameter numbers":
        main.instructions[1].parameter_number = 2
    elif change == "program shape":
        fused.program_shape.parameters.add(element_type=11)
    elif change == "host program shape":
        module.host_program_shape.parameters.add(element_type=11)
    elif change == "cut after two computations":
        del module.computations[2]
        module.ClearField("entry_computation_id")
        module.ClearField("host_program_shape")
    elif change == "called but empty":
        del fused.instructions[:]
        fused.ClearField("program_shape")
    return module


CROSS_CHECKS = {
    "operand missing": "instruction root (id 35) in 'main' has operand id 99, which the module does not contain",
    "operand later": "instruction fusion (id 32) in 'main' has operand id 34, which comes after it",
    "operand elsewhere": "instruction fusion (id 32) in 'main' has operand id 21, which is in another computation",
    "control predecessor": "instruction zero (id 33) in 'main' has control predecessor id 77, which is none of 'main''s instructions",
    "callee missing": "instruction fusion (id 32) in 'main' calls computation id 42, which the module does not contain",
    "callee after caller": "instruction sum (id 12) in 'add' calls computation id 2, which does not come before its caller",
    "entry name": "its entry computation 'main.2' is none of its 3 computations (a file cut short?)",
    "entry id": "its entry computation id 9 is none of its 3 computations (a file cut short?)",
    "entry disagree": "its entry computation id 2 names 'fused', its entry_computation_name 'main'",
    "root": "computation 'main' has root id 99, which is none of its instructions",
    "parameter numbers": "computation 'main' has parameters numbered [0, 2], not 0..1",
    "program shape": "computation 'fused' declares 2 parameters in its program shape but has 1 parameter instructions",
    "host program shape": "its program shape declares 3 parameters, its entry computation 'main' has 2",
    "cut after two computations": "its entry computation 'main' is none of its 2 computations (a file cut short?)",
    "called but empty": "computation 'fused' (id 2) is called but has no instructions",
}


@pytest.mark.parametrize("change", list(CROSS_CHECKS))
def test_modules_whose_declarations_do_not_resolve_are_refused(tmp_path, change):
    module = bad_module(change)
    expected = CROSS_CHECKS[change]
    assert hlo_graph.module_problem(module).startswith(expected)
    path = tmp_path / "bad.pb"
    path.write_bytes(module.SerializeToString())
    with pytest.raises(ValueError) as info:
        hlo_graph.read_hlo_module(path)
    assert str(info.value).startswith(f"{path}: not a serialized HloModuleProto or HloProto")
    assert expected in str(info.value)
    for call in (lambda: hlo_graph.featurize_module(module, source=str(path)),
                 lambda: hlo_graph.kernel_modules(module, source=str(path)),
                 lambda: hlo.module_graphs(module, kind="tile", source=str(path))):
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value).startswith(f"{path}: {expected}")


def test_kernels_cut_from_a_module_with_control_dependencies_are_complete():
    module = small_module()
    module.computations[2].instructions[4].control_predecessor_ids.append(33)  # reduce after zero
    kernels = hlo_graph.kernel_modules(module)
    assert [k.name for k in kernels] == ["fusion", "reduce"]
    for kernel in kernels:
        assert hlo_graph.module_problem(kernel) is None


# ---------------------------------------------------------------------------- raw samples

@functools.lru_cache(maxsize=None)
def raw_full(path: Path) -> Dict[str, npz_format.NpzGraph]:
    return {g.name: g for g in read_tuning_file(path)}


def read_cut(folder: Path, path: Path, data: bytes) -> bool:
    """Cut `data` of raw file `path` → a file of the same name; it reads as a clear error
    (True) or as graphs each identical to the full file's (False)."""
    folder.mkdir(parents=True, exist_ok=True)
    cut_path = folder / path.name
    cut_path.write_bytes(data)
    graphs: List[npz_format.NpzGraph] = []
    if one_line_error_naming(lambda: graphs.extend(read_tuning_file(cut_path)), str(cut_path)):
        return True
    same_graphs(graphs, raw_full(path))
    return False


@needs_raw
@pytest.mark.parametrize("raw", ["tile", "layout"])
def test_raw_samples_cut_at_every_field_boundary(tmp_path, raw):
    """Every end of a top-level field and of the fields one level in (the cuts that
    parse, and their neighbours inside the records). A layout record cut anywhere is refused; a TuningData cut between two
    kernel records gives those records' graphs, each complete and exact (TuningData
    holds no count of its records, so such a file is a smaller valid file: the command
    line prints how many kernels it read)."""
    path = TILE_PB if raw == "tile" else LAYOUT_PB
    data = path.read_bytes()
    cuts = sorted(set(field_ends(data, depth=2)) - {len(data)})
    assert len(cuts) > (700 if raw == "tile" else 400)
    refused = [read_cut(tmp_path / "cut", path, data[:cut]) for cut in cuts]
    if raw == "layout":  # no cut of a layout record reads at all
        assert all(refused)
    else:  # only the cuts between two kernel records read
        assert sum(not r for r in refused) == len(field_ends(data, depth=1)) - 1


@needs_raw
@settings(max_examples=40, **SETTINGS)
@given(raw=st.sampled_from(["tile", "layout"]), where=st.floats(0, 1, exclude_max=True))
def test_raw_samples_cut_anywhere(tmp_path_factory, raw, where):
    path = TILE_PB if raw == "tile" else LAYOUT_PB
    data = path.read_bytes()
    read_cut(tmp_path_factory.getbasetemp() / "anywhere", path, data[:int(where * len(data))])


@needs_raw
@settings(max_examples=40, **SETTINGS)
@given(raw=st.sampled_from(["tile", "tile", "tile", "layout"]), damage=HLO_DAMAGE)
def test_damaged_raw_samples_give_a_clear_error_or_valid_graphs(tmp_path_factory, raw, damage):
    path = TILE_PB if raw == "tile" else LAYOUT_PB
    data = bytearray(path.read_bytes())
    for where, value in damage:
        data[int(where * len(data))] = value
    folder = tmp_path_factory.getbasetemp() / "damaged"
    folder.mkdir(exist_ok=True)
    damaged = folder / path.name
    damaged.write_bytes(bytes(data))
    graphs: List[npz_format.NpzGraph] = []
    if not one_line_error_naming(lambda: graphs.extend(read_tuning_file(damaged)), str(damaged)):
        for graph in graphs:
            npz_format.check_arrays(graph.arrays, graph.name)


# ---------------------------------------------------------------------------- npz files

@functools.lru_cache(maxsize=None)
def npz_bytes(kind: str, compressed: bool) -> bytes:
    import io
    rng = np.random.default_rng(0)
    arrays = {"node_feat": rng.normal(size=(6, 140)).astype(np.float32),
              "node_opcode": rng.integers(0, 121, 6).astype(np.uint8),
              "edge_index": np.array([[i + 1, i] for i in range(5)], np.int64),
              "config_runtime": rng.integers(10**6, 10**9, 20).astype(np.int64)}
    if kind == "tile":
        arrays.update(config_feat=rng.integers(0, 9, (20, 24)).astype(np.float32),
                      config_runtime_normalizers=np.full(20, 10**6, np.int64))
    else:
        arrays.update(node_config_ids=np.array([1, 4], np.int64),
                      node_config_feat=rng.integers(-1, 5, (20, 2, 18)).astype(np.float32))
    buffer = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buffer, **arrays)
    return buffer.getvalue()


@functools.lru_cache(maxsize=None)
def npz_structure(kind: str, compressed: bool) -> List[int]:
    """Byte offsets of the zip's bookkeeping: each member's local header and npy header,
    the central directory and its end record (where damage is rarest but worst)."""
    import io
    import zipfile
    data = npz_bytes(kind, compressed)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
    offsets = [i for info in infos for i in range(info.header_offset,
                                                   info.header_offset + 30 + len(info.filename) + 128)]
    directory = min(len(data) - 22 - 46 * len(infos) - sum(len(i.filename) for i in infos),
                    len(data) - 22)
    return sorted(set(o for o in offsets + list(range(max(0, directory - 64), len(data)))
                      if o < len(data)))


@settings(max_examples=250, **SETTINGS)
@given(kind=st.sampled_from(["tile", "layout"]), compressed=st.booleans(), damage=HLO_DAMAGE,
       structure=st.booleans())
def test_damaged_npz_files_give_a_clear_error_or_valid_arrays(tmp_path_factory, kind,
                                                              compressed, damage, structure):
    """Every read path the simulator uses, on an npz with bytes overwritten (anywhere, or
    in the zip's and npy's headers): a one-line ValueError naming the file (never a
    zipfile/numpy traceback), or checked arrays."""
    data = bytearray(npz_bytes(kind, compressed))
    places = npz_structure(kind, compressed) if structure else range(len(data))
    for where, value in damage:
        data[places[int(where * len(places))]] = value
    path = tmp_path_factory.getbasetemp() / "damaged.npz"
    path.write_bytes(bytes(data))

    def read_everything():
        file = npz_format.TpuGraphsFile(path)
        file.validate(chunk=3)
        npz_format.check_arrays({**file.graph_arrays(), **file.config_arrays()}, str(path))
        file.runtimes(file.config_arrays(file.measured_configs()))
        list(file.iter_config_chunks(7))
        file.sample([19, 0])

    one_line_error_naming(read_everything, str(path))
    npz_format.is_tpugraphs_npz(path)  # never raises
