"""TLP's cost model (`tlp`) and the trace tokens it reads (`extract.metaschedule.trace_tokens`,
`vectors["trace_tokens"]`)."""
import collections
import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import kendalltau

from extract.metaschedule.trace_tokens import (HEADER, INSTRUCTION_KINDS, OTHER_KIND, TOKEN_WIDTH, TRACE_LENGTH,
                                               VALUE_SLOTS, trace_tokens, unpack_tokens)
from extract.sample import GraphSample
from simulator.data.in_memory import SampleSource
from simulator.models.costmodel import build_cost_model
from simulator.models.tlp import TraceAttention
from simulator.registry import SimulatorError
from simulator.train import build_parser, config_from_flags, validate

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "datasets" / "networks_rocketlake" / "pass1" / "random" / "database_tuning_record.json.gz"
TINY = Path(__file__).resolve().parent / "data" / "networks_tiny"
COLUMN = {name: i for i, name in enumerate(HEADER)}


def _records():
    """(workload index, trace JSON, mean run seconds) of the shipped random-pass records."""
    with gzip.open(RECORDS, "rt") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [(index, body[0], float(np.mean(body[1]))) for index, body in rows if max(body[1]) < 1e9]


@pytest.fixture(scope="module")
def records():
    return _records()


def _log2_1p(v):
    return math.copysign(math.log2(1 + abs(v)), v)


def test_tokens_of_a_shipped_trace_follow_its_instructions(records):
    trace = next(t for _, t, _ in records if any(inst[0] == "ComputeAt" for inst in t[0]))
    insts, decisions = trace
    tokens = unpack_tokens(trace_tokens(trace).vector[None])[0]
    assert tokens.shape == (TRACE_LENGTH, TOKEN_WIDTH) and not tokens[len(insts):].any()   # padding
    assert [INSTRUCTION_KINDS[int(k) - 1] for k in tokens[:len(insts), 0]] == [inst[0] for inst in insts]
    decided = dict((i, d) for i, d in decisions)
    marker = next(i for i, inst in enumerate(insts) if inst[0] == "EnterPostproc")
    assert not tokens[:marker + 1, COLUMN["postproc"]].any() and tokens[marker + 1:len(insts), COLUMN["postproc"]].all()
    for i, (kind, inputs, attrs, outputs) in enumerate(insts):
        token = tokens[i]
        assert token[COLUMN["outputs"]] == len(outputs)
        if kind == "SamplePerfectTile":     # its attributes (n, max innermost factor), then its decision
            values = attrs + decided[i]
            np.testing.assert_allclose(token[len(HEADER):len(HEADER) + len(values)], [_log2_1p(v) for v in values])
        if kind == "Split":                 # the factors sampled for it, resolved from its inputs
            tile = next(j for j in range(i - 1, -1, -1) if insts[j][3] == inputs[1:])
            np.testing.assert_allclose(token[len(HEADER):len(HEADER) + len(inputs) - 1],
                                       [_log2_1p(v) for v in decided[tile]])
            loops = next(inst for inst in insts[:i] if inst[0] == "GetLoops" and inputs[0] in inst[3])
            assert token[COLUMN["axis"]] == loops[3].index(inputs[0]) + 1 and token[COLUMN["part"]] == 0
        if kind == "ComputeAt":             # the location chosen, then preserve_unit_loops and index
            location = next(d for j, d in decisions if insts[j][3] == [inputs[1]])
            np.testing.assert_allclose(token[len(HEADER):len(HEADER) + 3], [_log2_1p(v) for v in [location, *attrs]])
    blocks = [inst[2][0] for inst in insts if inst[0] == "GetSBlock"]
    first_block_use = next(i for i, inst in enumerate(insts) if inst[0] == "ComputeInline")
    name = next(inst[2][0] for inst in insts if inst[0] == "GetSBlock" and inst[3] == insts[first_block_use][1][:1])
    assert tokens[first_block_use, COLUMN["stage"]] == list(dict.fromkeys(blocks)).index(name) + 1


def test_every_shipped_trace_fits_without_cuts(records):
    counts = [trace_tokens(t) for _, t, _ in records[::7]]
    assert all(c.cut == 0 and c.unknown == 0 for c in counts)
    values = np.concatenate([unpack_tokens(c.vector[None])[0][:, len(HEADER):] for c in counts])
    assert (values != 0).sum(1).max() <= VALUE_SLOTS


def test_the_kinds_are_tvms_and_what_is_cut_is_counted():
    from tvm.s_tir.schedule import InstructionKind

    for kind in INSTRUCTION_KINDS:
        InstructionKind.get(kind)           # raises for a name TVM does not register
    long = [["GetSBlock", [], [f"s{i}", "main"], [f"b{i}"]] for i in range(TRACE_LENGTH + 3)]
    long.append(["FutureInstruction", ["b0", 1, 2, 3, 4, 5, 6, 7, 8, 9], [], []])
    tokens = trace_tokens([long, []])
    assert (tokens.cut, tokens.unknown) == (4, 1)
    assert unpack_tokens(tokens.vector[None])[0, :, COLUMN["stage"]].tolist() == list(range(1, TRACE_LENGTH + 1))
    short = trace_tokens([[["FutureInstruction", ["b0", *range(VALUE_SLOTS + 1)], [], []]], []])
    assert (short.cut, short.unknown) == (1, 1) and unpack_tokens(short.vector[None])[0, 0, 0] == OTHER_KIND


def _batch_tokens(traces):
    return torch.from_numpy(np.stack([unpack_tokens(trace_tokens(t).vector[None])[0] for t in traces]))


def test_attention_reads_present_tokens_in_order(records):
    torch.manual_seed(0)
    layer = TraceAttention(TRACE_LENGTH, 16, 2, heads=4).eval()
    tokens = _batch_tokens([t for _, t, _ in records[:3]])
    with torch.no_grad():
        out = layer(tokens)
        assert out.shape == (3, 16)
        padded = tokens.clone()
        padded[:, -1, 2:] = 5.0             # values in a padding slot (kind 0) are not read
        np.testing.assert_allclose(layer(padded), out, atol=1e-5)
        n = int((tokens[0, :, 0] > 0).sum())
        swapped = tokens.clone()
        swapped[0, [0, n - 1]] = tokens[0, [n - 1, 0]]
        assert not torch.allclose(layer(swapped)[0], out[0], atol=1e-4)    # position matters
    with pytest.raises(SimulatorError, match="multiple of its 4 heads"):
        TraceAttention(TRACE_LENGTH, 18, 2)
    with pytest.raises(SimulatorError, match="pooling"):
        TraceAttention(TRACE_LENGTH, 16, 2, pooling="max")


def _config(**flags):
    args = dict(vars(build_parser().parse_args([])), model="tlp", width=32, depth=2, lr=5e-3, loss="lambdarank",
                epochs=12, batch_size=16)
    args.update(flags)
    return validate(config_from_flags(args))


def _samples(records, tasks=4, per_task=40):
    """Samples of the shipped records of the `tasks` largest tasks: their trace tokens and
    runtimes (a one-node graph: tlp reads the tokens only)."""
    by_task = collections.defaultdict(list)
    for index, trace, secs in records:
        by_task[index].append((trace, secs))
    chosen = sorted(by_task, key=lambda k: (-len(by_task[k]), k))[:tasks]
    return [GraphSample(edges=np.zeros((0, 2)), node_features=np.zeros((1, 2)), node_types=[0], runtimes=[secs],
                        group=f"task{k}", name=f"task{k}/{i}", vectors={"trace_tokens": trace_tokens(t).vector[None]})
            for k in chosen for i, (t, secs) in enumerate(by_task[k][:per_task])]


def test_it_learns_to_rank_shipped_schedules_and_survives_a_round_trip(records, tmp_path):
    samples = _samples(records)
    source = SampleSource(samples)
    config = _config()
    torch.manual_seed(0)
    model = build_cost_model(config, source.info)
    model.set_normalization(source.normalization(model.batch_spec, config.seed))
    assert float(model.net.encoder.value_scale.max()) > 1.0          # set from the training tokens
    model.fit(source)
    pred = model.predict(samples)
    y = np.log([s.runtimes[0] for s in samples])
    groups = np.array([s.group for s in samples])
    taus = [kendalltau(pred[groups == g], y[groups == g])[0] for g in dict.fromkeys(groups)]
    assert np.mean(taus) > 0.3 and min(taus) > 0.15, taus           # random ranking: τ ≈ 0 ± 0.11 a task
    model.save(str(tmp_path / "tlp.pt"))
    again = type(model).load(str(tmp_path / "tlp.pt"))
    np.testing.assert_allclose(again.predict(samples), pred, rtol=1e-5, atol=1e-5)


def test_data_without_tokens_or_with_a_transform_is_a_clear_error(records, synthetic_samples):
    with pytest.raises(SimulatorError, match="trace_tokens"):
        build_cost_model(_config(), SampleSource(synthetic_samples[:4]).info)
    source = SampleSource(_samples(records, tasks=1, per_task=4))
    with pytest.raises(SimulatorError, match="feature-transform"):
        build_cost_model(_config(feature_transform="log1p"), source.info)


def test_extraction_gives_the_records_tokens(tmp_path):
    from datasets import load_collection

    tiny = load_collection([str(TINY)], progress=False, cache=str(tmp_path))
    with gzip.open(TINY / "pass1" / "random" / "database_tuning_record.json.gz", "rt") as f:
        traces = {n: json.loads(line)[1][0] for n, line in enumerate(f, 1) if line.strip()}
    read = [s for s in tiny.samples if s.meta.database.endswith("random")]
    assert len(read) > 5 and all("trace_cut" not in s.meta.extra for s in tiny.samples)
    for s in read:
        np.testing.assert_array_equal(s.vectors["trace_tokens"][0], trace_tokens(traces[s.meta.line]).vector)


def test_the_benchmark_trains_tlp_with_lambdarank():
    import argparse

    from benchmarks import networks as bench

    ap = argparse.ArgumentParser()
    bench.add_arguments(ap)
    ap.add_argument("--runs", default="runs")
    args = ap.parse_args(["--networks-models", "gcn", "tlp", "--held-networks", "bert", "--held-kinds",
                          "--combined-models", "--networks-epochs", "10", "--networks-seeds", "0"])
    gcn, tlp = (j["argv"] for j in bench.jobs(args, {"tasks": [{"kind": "dense", "valid": 30}]}))
    assert bench.objective_of(gcn) == "pairwise-hinge" and bench.objective_of(tlp) == "lambdarank"
    assert tlp[tlp.index("--model") + 1] == "tlp"
