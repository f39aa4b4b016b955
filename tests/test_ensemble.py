"""`--members` (simulator/models/ensemble.py) and `--keep-weights`: networks trained side by
side, each on its own loss, their mean predicted; a run that ends with its last weights."""
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from simulator import train
from simulator.config import ModelInfo, TrainConfig
from simulator.losses import build_loss
from simulator.models.costmodel import build_cost_model
from simulator.models.ensemble import Ensemble, ensemble_of
from simulator.registry import SimulatorError
from simulator.sgd import batch_loss


class Linear(nn.Module):
    """A member: ŷ = w·v + b on `batch.vector`."""

    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(3, 1)
        self.scale = 1.0

    def reset_parameters(self):
        self.layer.reset_parameters()

    def set_normalization(self, stats):
        self.scale = stats

    def forward(self, batch):
        return self.layer(batch.vector).squeeze(1) * self.scale


def _batch(rows=6):
    gen = torch.Generator().manual_seed(0)
    return SimpleNamespace(vector=torch.randn(rows, 3, generator=gen), y=torch.randn(rows, generator=gen),
                           group=torch.zeros(rows, dtype=torch.long))


def test_members_start_apart_predict_their_mean_and_each_learns_from_its_own_loss():
    torch.manual_seed(0)
    net, batch = Ensemble(Linear, 3), _batch()
    weights = [m.layer.weight.detach().clone() for m in net.members]
    assert not torch.equal(weights[0], weights[1]) and not torch.equal(weights[1], weights[2])
    net.train()
    each = net(batch)
    assert each.shape == (6, 3)
    assert torch.allclose(each[:, 1], net.members[1](batch))
    net.eval()
    assert torch.allclose(net(batch), each.mean(dim=1))
    net.set_normalization(2.0)   # reaches every member
    assert all(m.scale == 2.0 for m in net.members)

    loss_fn = build_loss("pairwise-hinge")
    net.train()
    loss = batch_loss(loss_fn, net(batch), batch)
    assert torch.isclose(loss, sum(loss_fn(net.members[k](batch), batch.y, batch.group) for k in range(3)) / 3)
    loss.backward()
    alone = Linear()
    alone.load_state_dict(net.members[2].state_dict())
    alone.set_normalization(2.0)
    (loss_fn(alone(batch), batch.y, batch.group) / 3).backward()
    assert torch.allclose(net.members[2].layer.weight.grad, alone.layer.weight.grad)  # nothing from the others


def test_one_member_is_the_network_itself_and_odd_members_are_refused():
    assert isinstance(ensemble_of(Linear, 1), Linear)   # no wrapper: the weights keep their names
    assert isinstance(ensemble_of(Linear, 2), Ensemble)
    with pytest.raises(SimulatorError, match="--members 0: a model has at least one member"):
        ensemble_of(Linear, 0)
    with pytest.raises(SimulatorError, match="Identity has no set_normalization"):
        Ensemble(nn.Identity, 2)


def test_members_on_a_model_that_trains_one_network_are_refused():
    config = TrainConfig.from_dict({**TrainConfig().to_dict(), "model": "config-mlp", "members": 3})
    with pytest.raises(SimulatorError, match=r"--members 3: config-mlp trains one network \(ensembles: .*layout-sum"):
        build_cost_model(config, ModelInfo(num_types=5, feature_dim=140, node_config_dim=18))
    config = TrainConfig.from_dict({**TrainConfig().to_dict(), "model": "layout-sum", "members": 3})
    model = build_cost_model(config, ModelInfo(num_types=5, feature_dim=140, node_config_dim=18))
    assert len(model.net.members) == 3


@pytest.mark.parametrize("keep", ["best", "last"])
def test_a_run_ends_with_its_best_or_its_last_weights(tmp_path, keep, capsys):
    """An ensemble of 2 layout-sums, 4 epochs: `last` keeps the 4th epoch's weights and reports
    its validation score; `best` the best epoch's (the checkpoint keeps both)."""
    from simulator.checkpoint import load_checkpoint
    from simulator.data.synthetic import write_tpugraphs_collection
    from simulator.models.costmodel import load_trained
    write_tpugraphs_collection(str(tmp_path / "root"), "layout:xla:random", graphs=(6, 2, 1), configs=(12, 16),
                               config_nodes=3, seed=0)
    out = tmp_path / "run"
    assert train.main(["--data", "tpugraphs:layout:xla:random", "--data-root", str(tmp_path / "root"),
                       "--members", "2", "--keep-weights", keep, "--patience", "1", "--epochs", "4",
                       "--out", str(out), "--device", "cpu", "--threads", "1"]) == 0
    note = "note: --patience 1 is not used: --keep-weights last trains every epoch"
    assert (note in capsys.readouterr().err) == (keep == "last")
    state = load_checkpoint(str(out))
    history = [h["val_kendall_tau"] for h in state["history"]]
    assert len(history) == 4 or keep == "best"   # patience 1 may stop `best` early, never `last`
    best = int(np.argmax(history)) + 1
    assert state["best_epoch"] == (4 if keep == "last" else best)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["config"]["members"] == 2
    assert metrics["val"]["kendall_tau"]["mean"] == pytest.approx(history[state["best_epoch"] - 1])
    same = all(torch.equal(state["best_model"][k], state["model"][k]) for k in state["model"])
    assert same if keep == "last" else same == (best == len(history))
    model, _ = load_trained(str(out))
    assert len(model.net.members) == 2
