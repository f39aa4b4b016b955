"""Every model variant and loss runs forward and backward; training lowers the loss."""
import math

import numpy as np
import pytest
import torch

from simulator.data.batching import batch_indices, make_batch
from simulator.data.in_memory import SampleSource
from simulator.losses import LOSSES, build_loss
from simulator.models.costmodel import build_cost_model
from simulator.models.layers import POOLINGS, PROPAGATIONS
from simulator.registry import UnknownNameError
from simulator.train import build_parser, config_from_flags, validate

GRAPH_MODELS = ["gcn", "sage", "gat", "cheb", "mlp"]


def setup(samples, **overrides):
    """(config, cost model with the samples' statistics, prepared items, source)."""
    config = validate(config_from_flags(dict(vars(build_parser().parse_args([])), **overrides)))
    source = SampleSource(samples)
    torch.manual_seed(0)
    model = build_cost_model(config, source.info)
    model.set_normalization(source.normalization(model.batch_spec, config.seed))
    return config, model, source.items(model.batch_spec), source


def test_registries_hold_the_documented_names():
    assert set(GRAPH_MODELS) <= set(PROPAGATIONS.names())
    assert set(POOLINGS.names()) == {"mean", "sum", "max"}
    assert set(LOSSES.names()) == {"huber", "l1", "mse", "listmle", "pairwise-hinge", "group-huber",
                                   "lambdarank"}
    with pytest.raises(UnknownNameError, match="unknown loss 'nope'"):
        LOSSES.get("nope")


@pytest.mark.parametrize("name", GRAPH_MODELS + ["curve-mlp"])
@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_model_forward_backward(synthetic_samples, name, pooling):
    if name == "curve-mlp" and pooling == "max":
        pytest.skip("vector model has no pooling")
    config, model, items, _ = setup(synthetic_samples[:24], model=name, pooling=pooling, width=16, depth=2)
    batch = model.batch_spec.make(items[:8])
    pred = model.net(batch)
    assert pred.shape == (8,) and torch.isfinite(pred).all()
    build_loss("huber")(pred, batch.y, batch.group).backward()
    grads = [p.grad for p in model.net.parameters() if p.requires_grad]
    assert all(g is not None for g in grads) and any(float(g.abs().sum()) > 0 for g in grads)


def test_sum_pooling_and_no_residual(synthetic_samples):
    config, model, items, _ = setup(synthetic_samples[:8], pooling="sum", residual=False, norm="none", width=8)
    assert model.net(make_batch(items)).shape == (8,)


@pytest.mark.parametrize("loss", ["huber", "l1", "mse", "listmle", "pairwise-hinge", "group-huber", "lambdarank"])
def test_loss_forward_backward(synthetic_samples, loss):
    config, model, items, _ = setup(synthetic_samples[:32], width=16, depth=1)
    batch = make_batch(items[:12] + items[16:28])   # two workloads, 12 configs each
    value = build_loss(loss, delta=0.5, temperature=0.5)(model.net(batch), batch.y, batch.group)
    assert value.ndim == 0 and torch.isfinite(value) and value.item() > 0
    value.backward()


def test_ranking_losses_by_hand():
    y = torch.tensor([0.0, 1.0, 2.0])
    group = torch.tensor([0, 0, 0])
    right = torch.tensor([0.0, 5.0, 10.0])   # predicted in the right order, with margin
    wrong = torch.tensor([10.0, 5.0, 0.0])
    hinge = build_loss("pairwise-hinge")
    assert float(hinge(right, y, group)) == 0.0
    assert float(hinge(wrong, y, group)) == pytest.approx((6 + 6 + 11) / 3)
    listmle = build_loss("listmle")
    assert float(listmle(right, y, group)) < float(listmle(wrong, y, group))
    # ListMLE of two items by hand: s = −ŷ; −log softmax(s)[fastest] + 0, averaged over 2 positions
    s = -torch.tensor([1.0, 0.0])
    expected = (torch.logsumexp(s, 0) - s[0]) / 2
    assert float(listmle(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]), torch.tensor([0, 0]))) == \
        pytest.approx(float(expected))
    # configs of different groups are never compared
    assert float(hinge(wrong, y, torch.tensor([0, 1, 2]))) == 0.0


def test_lambdarank_by_hand():
    loss = build_loss("lambdarank")
    assert loss.ranking
    # two configs, the second twice as slow: relevance (1, ½); predicted in the right order
    y, group = torch.log(torch.tensor([1.0, 2.0])), torch.tensor([0, 0])
    pred = torch.tensor([0.0, 0.5])                 # s = (0, −0.5)
    d2 = math.log2(3.0)
    max_dcg = 1.0 + (2 ** 0.5 - 1) / d2
    weight = (1 - 1 / d2) * (1 - (2 ** 0.5 - 1)) / max_dcg
    expected = -weight * math.log2(1 / (1 + math.exp(-0.5)))
    assert float(loss(pred, y, group)) == pytest.approx(expected, rel=1e-5)
    # a per-group shift of the predictions or of the log runtimes changes nothing
    assert float(loss(pred + 3, y - 2, group)) == pytest.approx(expected, rel=1e-5)
    # the wrong order costs more; the gradient pushes the faster config's prediction down
    wrong = torch.tensor([0.5, 0.0], requires_grad=True)
    value = loss(wrong, y, group)
    assert value.item() > expected
    value.backward()
    assert wrong.grad[0] > 0 > wrong.grad[1]
    # configs of different groups are never compared; a group of one config has no loss
    assert float(loss(wrong.detach(), y, torch.tensor([0, 1]))) == 0.0
    assert loss.terms(torch.zeros(5), torch.tensor([0, 0, 0, 1, 2])) == 1
    # equal runtimes: no pair to order
    assert float(loss(pred, torch.zeros(2), group)) == 0.0


def test_group_huber_fits_only_differences_within_a_group():
    loss = build_loss("group-huber", delta=1.0)
    assert loss.ranking  # trained on grouped batches
    y = torch.tensor([0.0, 1.0, 3.0, 10.0, 10.5])
    group = torch.tensor([0, 0, 0, 1, 1])
    # a per-group shift of the predictions costs nothing: only the task's scale differs
    shifted = y + torch.tensor([7.0, 7.0, 7.0, -3.0, -3.0])
    assert float(loss(shifted, y, group)) == pytest.approx(0.0, abs=1e-6)
    # by hand: centred y = (−4/3, −1/3, 5/3 | −¼, ¼); all-equal predictions centre to 0
    centred = torch.tensor([-4 / 3, -1 / 3, 5 / 3, -0.25, 0.25])
    expected = torch.nn.functional.huber_loss(torch.zeros(5), centred, delta=1.0)
    assert float(loss(torch.zeros(5), y, group)) == pytest.approx(float(expected))
    # a group of one config has nothing to compare: left out (and counted out of terms)
    assert loss.terms(y, torch.tensor([0, 0, 0, 1, 2])) == 3
    assert float(loss(torch.zeros(5), y, torch.tensor([0, 0, 0, 1, 2]))) == pytest.approx(
        float(torch.nn.functional.huber_loss(torch.zeros(3), centred[:3], delta=1.0)))
    assert float(loss(torch.zeros(3), y[:3], torch.tensor([0, 1, 2]))) == 0.0
    # the wrong order within a group costs more than the right one
    assert float(loss(-y, y, group)) > float(loss(y + 1, y, group))


def test_grouped_batches_keep_workloads_together():
    groups = np.repeat(np.arange(3), 10)
    batches = list(batch_indices(30, 10, np.random.default_rng(0), groups, group_size=5))
    assert sorted(np.concatenate(batches).tolist()) == list(range(30))
    for b in batches:
        runs = [groups[b[i:i + 5]] for i in range(0, len(b), 5)]
        assert all(len(set(r.tolist())) == 1 for r in runs)


@pytest.mark.parametrize("loss", ["huber", "listmle", "group-huber", "lambdarank"])
def test_loss_goes_down_on_a_tiny_dataset(synthetic_samples, loss):
    config, model, items, _ = setup(synthetic_samples[:48], width=32, depth=2)
    loss_fn = build_loss(loss)
    opt = torch.optim.Adam(model.net.parameters(), lr=3e-3)
    batch = make_batch(items)
    losses = []
    for _ in range(60):
        value = loss_fn(model.net(batch), batch.y, batch.group)
        opt.zero_grad()
        value.backward()
        opt.step()
        losses.append(value.item())
    assert losses[-1] < 0.5 * losses[0], losses[::10]


@pytest.mark.parametrize("objective", ["reg", "rank"])
def test_xgb_fits_and_ranks(synthetic_samples, objective):
    config, model, items, source = setup(synthetic_samples, model="xgb", xgb_objective=objective, xgb_rounds=30,
                                         threads=1)
    model.fit(source.subset(range(150)), source.subset(range(150, len(source))))
    pred = model.predict(source)
    assert pred.shape == (len(items),) and np.isfinite(pred).all()
    # the booster round-trips through the checkpoint's JSON text
    again = build_cost_model(config, source.info)
    again.load_weights(model.weights())
    assert np.allclose(again.predict(source), pred)
