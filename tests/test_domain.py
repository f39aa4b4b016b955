"""Domain-adversarial training, `--domain-adapt dann` (simulator.domain, issue 13)."""
import copy
import json
import math

import numpy as np
import pytest
import torch

from simulator import sgd, train
from simulator.costmodel import CostModel, build_cost_model
from simulator.domain import DomainClassifier, domain_loss, grad_reverse, schedule, target_part
from simulator.registry import SimulatorError
from simulator.samples_source import SampleSource
from simulator.train import build_parser, config_from_flags, validate

TINY = dict(width=16, depth=2, batch_size=16, epochs=3, threads=1)
TRAIN, TARGET = ("C1", "C2", "C3"), ("C4", "C5", "C6")


def config_of(*argv, **overrides):
    return validate(config_from_flags(dict(vars(build_parser().parse_args(list(argv))), **overrides)))


def parts_of(samples, nan_target=False):
    """Training samples (C1-C3, measured) and target samples (C4-C6; runtimes NaN if asked)."""
    train_samples = [s for s in samples if s.group in TRAIN]
    target = [s for s in samples if s.group in TARGET]
    if nan_target:
        target = [copy.copy(s) for s in target]
        for s in target:
            s.runtimes = np.full_like(np.asarray(s.runtimes, np.float64), np.nan)
    return train_samples, target


def fit(samples, config, nan_target=False, target=True):
    """A model of `config` fitted on C1-C3 (no validation), adapting to C4-C6 when `target`."""
    train_samples, target_samples = parts_of(samples, nan_target)
    source = SampleSource(train_samples, features=config.model.features)
    torch.manual_seed(0)
    model = build_cost_model(config, source.info)
    model.set_normalization(source.normalization(model.batch_spec, 0))
    unlabeled = SampleSource(target_samples, source.info) if target else None
    summary = model.fit(source, None, None, unlabeled)
    return model, source, summary


# ---------------------------------------------------------------- the pieces
def test_gradient_reversal_is_identity_forward_and_minus_lambda_backward():
    x = torch.tensor([[1.0, -2.0], [3.0, 0.5]], requires_grad=True)
    g = torch.tensor([[0.5, 1.0], [-2.0, 4.0]])
    y = grad_reverse(x, 0.3)
    assert torch.equal(y, x)
    (y * g).sum().backward()
    assert torch.allclose(x.grad, -0.3 * g)
    x.grad = None
    grad_reverse(x, 0.0).mul(g).sum().backward()
    assert torch.equal(x.grad, torch.zeros_like(g))


def test_schedule_ramps_from_zero_to_the_weight():
    assert schedule(0.0, 0.5) == 0.0
    assert schedule(1.0, 0.5) == pytest.approx(0.5 * (2 / (1 + math.exp(-10)) - 1))
    assert schedule(0.1, 1.0) == pytest.approx(2 / (1 + math.exp(-1)) - 1)
    values = [schedule(p / 10, 0.2) for p in range(11)]
    assert values == sorted(values) and values[-1] < 0.2


def test_domain_classifier_learns_but_the_encoder_is_pushed_the_other_way():
    """Through R_λ the classifier's own gradient descends the BCE, z's ascends it (times λ)."""
    torch.manual_seed(0)
    head = DomainClassifier(4, hidden=8)
    z_s = torch.randn(5, 4, requires_grad=True)
    z_t = torch.randn(6, 4, requires_grad=True)
    domain_loss(head, z_s, z_t, 0.5).backward()
    plain_s = z_s.detach().clone().requires_grad_(True)
    plain_t = z_t.detach().clone().requires_grad_(True)
    labels = torch.cat([torch.zeros(5), torch.ones(6)])
    torch.nn.functional.binary_cross_entropy_with_logits(head(torch.cat([plain_s, plain_t])), labels).backward()
    assert torch.allclose(z_s.grad, -0.5 * plain_s.grad) and torch.allclose(z_t.grad, -0.5 * plain_t.grad)
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in head.parameters())
    before = [p.detach().clone() for p in head.parameters()]
    head.reset_parameters()
    assert any(not torch.equal(a, b) for a, b in zip(before, head.parameters()))


# ---------------------------------------------------------------- options
def test_option_is_validated_and_off_by_default():
    assert config_of().fit.domain_adapt == "none" and config_of().fit.adapt_weight == 0.1
    c = config_of("--model", "gcn", "--domain-adapt", "dann", "--adapt-weight", "0.5")
    assert c.fit.domain_adapt == "dann" and c.fit.adapt_weight == 0.5
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--domain-adapt", "coral"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--adapt-weight", "-1"])
    with pytest.raises(SimulatorError, match="unknown --domain-adapt 'coral'"):
        config_of(domain_adapt="coral")  # a config not from the command line
    for model in ("xgb", "curve-mlp", "knob-xgb"):
        with pytest.raises(SimulatorError, match="pooled graph embedding"):
            config_of("--model", model, "--domain-adapt", "dann")


def test_target_part_is_the_test_part_and_must_not_be_empty(synthetic_samples):
    source = SampleSource(synthetic_samples[:40])
    parts = {"train": source.subset(range(20)), "val": source.subset(range(20, 30)),
             "test": source.subset(range(30, 40))}
    assert target_part(config_of(), parts) is None
    assert target_part(config_of("--domain-adapt", "dann"), parts) is parts["test"]
    with pytest.raises(SimulatorError, match="test part is empty"):
        target_part(config_of("--domain-adapt", "dann"), dict(parts, test=source.subset([])))


def test_dann_without_target_configs_and_targets_without_dann_are_refused(synthetic_samples):
    with pytest.raises(SimulatorError, match="no target configs"):
        fit(synthetic_samples, config_of("--model", "gcn", "--domain-adapt", "dann", **TINY), target=False)
    with pytest.raises(SimulatorError, match="not adapting"):
        fit(synthetic_samples, config_of("--model", "gcn", **TINY), target=True)
    with pytest.raises(SimulatorError, match="does not adapt"):
        fit(synthetic_samples, config_of("--model", "xgb", "--xgb-rounds", "5"), target=True)


# ---------------------------------------------------------------- training
def test_default_builds_no_domain_classifier_and_never_takes_an_adversarial_step(synthetic_samples, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("adversarial step without --domain-adapt dann")
    monkeypatch.setattr(sgd, "adversarial_step", refuse)
    model, _, _ = fit(synthetic_samples, config_of("--model", "gcn", **TINY), target=False)
    assert model.net.domain is None
    assert not any(k.startswith("domain") for k in model.net.state_dict())


def test_dann_adds_the_domain_loss_every_step_and_trains_the_classifier(synthetic_samples, monkeypatch):
    calls = []
    real = sgd.adversarial_step

    def counting(net, batch, target, *args):
        calls.append((len(batch.y), len(target.y), bool(torch.isnan(target.y).all())))
        return real(net, batch, target, *args)
    monkeypatch.setattr(sgd, "adversarial_step", counting)
    config = config_of("--model", "gcn", "--domain-adapt", "dann", "--adapt-weight", "1", **TINY)
    train_samples, _ = parts_of(synthetic_samples)
    source = SampleSource(train_samples, features=config.model.features)
    torch.manual_seed(0)
    model = build_cost_model(config, source.info)
    initial = {k: v.clone() for k, v in model.net.domain.state_dict().items()}
    model, _, _ = fit(synthetic_samples, config)
    steps_per_epoch = math.ceil(len(train_samples) / TINY["batch_size"])
    assert len(calls) == TINY["epochs"] * steps_per_epoch
    assert all(n_source == n_target and nan for n_source, n_target, nan in calls)  # NaN target runtimes
    trained = model.net.domain.state_dict()
    assert any(not torch.equal(initial[k], trained[k]) for k in initial)


def test_target_runtimes_are_never_read(synthetic_samples):
    """Target configs with NaN runtimes train to the very same model as with their runtimes."""
    config = config_of("--model", "gcn", "--domain-adapt", "dann", "--adapt-weight", "1", **TINY)
    measured, source, _ = fit(synthetic_samples, config)
    unmeasured, _, _ = fit(synthetic_samples, config, nan_target=True)
    a, b = measured.predict(source), unmeasured.predict(source)
    assert np.isfinite(a).all() and np.array_equal(a, b)
    plain, _, _ = fit(synthetic_samples, config_of("--model", "gcn", **TINY), target=False)
    assert not np.array_equal(plain.predict(source), a)  # the adaptation did change the model


def test_predict_path_never_calls_the_domain_classifier_and_round_trips(synthetic_samples, tmp_path):
    config = config_of("--model", "gcn", "--domain-adapt", "dann", **TINY)
    model, source, _ = fit(synthetic_samples, config)
    pred = model.predict(source)
    model.save(str(tmp_path / "m.pt"))
    loaded = CostModel.load(str(tmp_path / "m.pt"))
    assert loaded.net.domain is not None and np.array_equal(loaded.predict(source), pred)

    class Refuse(torch.nn.Module):
        def forward(self, z):
            raise AssertionError("predict called the domain classifier")
    model.net.domain = Refuse()
    assert np.array_equal(model.predict(source), pred)


def test_train_cli_adapts_to_the_test_part_and_records_the_domain_loss(tmp_path, dataset_path):
    out = tmp_path / "run"
    argv = ["--data", dataset_path, "--out", str(out), "--threads", "1", "--epochs", "2", "--width", "16",
            "--depth", "2", "--batch-size", "16", "--model", "gcn", "--domain-adapt", "dann"]
    assert train.main(argv) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["config"]["domain_adapt"] == "dann" and metrics["config"]["adapt_weight"] == 0.1
    from simulator.checkpoint import CHECKPOINT_NAME, load_checkpoint
    history = load_checkpoint(str(out / CHECKPOINT_NAME))["history"]
    assert len(history) == 2 and all(0 < row["domain_loss"] < 5 for row in history)
    assert math.isfinite(metrics["test"]["kendall_tau"]["mean"])
