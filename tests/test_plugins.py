"""A plug-in is one file plus one line in its kind's registration list (simulator/__init__.py),
and no interface imports an implementation.

The cost-model test does what docs/ARCHITECTURE.md tells a user to do, on a copy of the
`simulator` package: a toy cost model in a file of its own, registered by one line in the
cost-model list, then trained end to end by `python -m simulator.train`.
"""
import ast
import json
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIMULATOR = os.path.join(ROOT, "simulator")

TOY_MODEL = '''"""`toy-linear`: ŷ = w·ṽ + b on the standardised curve vector ṽ, in log runtime units."""
import torch
from torch import nn

from simulator.data.batching import BatchSpec
from simulator.models.costmodel import TorchCostModel, register_cost_model, require_vector


class LinearNet(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.linear = nn.Linear(dim, 1)
        self.register_buffer("vector_mean", torch.zeros(dim))
        self.register_buffer("vector_std", torch.ones(dim))
        self.register_buffer("target", torch.tensor([0.0, 1.0]))  # mean, std of the log runtime

    def forward(self, batch):
        x = (batch.vector - self.vector_mean) / self.vector_std
        return self.linear(x).squeeze(-1) * self.target[1] + self.target[0]

    @torch.no_grad()
    def set_normalization(self, stats):
        self.vector_mean.copy_(torch.tensor(stats.vector_mean))
        self.vector_std.copy_(torch.tensor(stats.vector_std))
        self.target.copy_(torch.tensor([stats.target_mean, stats.target_std]))


@register_cost_model("toy-linear")
class ToyLinearCostModel(TorchCostModel):
    def __init__(self, config, info):
        super().__init__(config, info)
        self.net = LinearNet(require_vector(config, info, "curve"))

    @property
    def batch_spec(self):
        return BatchSpec(graph=False, vector="curve")
'''
REGISTRATION = "from .models import toy_linear  # noqa: F401\n"


def _train(package_root, dataset_path, out):
    """`python -m simulator.train` of toy-linear with `package_root`'s simulator package
    (the project's extract and datasets)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root, ROOT]), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "simulator.train", "--data", dataset_path, "--model", "toy-linear",
                           "--epochs", "4", "--batch-size", "16", "--lr", "0.01", "--threads", "1",
                           "--out", str(out)], cwd=package_root, env=env, capture_output=True, text=True,
                          timeout=600)


def test_a_toy_cost_model_is_one_file_and_one_line(tmp_path, dataset_path):
    package_root = tmp_path / "copy"
    package = package_root / "simulator"
    shutil.copytree(SIMULATOR, package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "models" / "toy_linear.py").write_text(TOY_MODEL, encoding="utf-8")

    # the file alone registers nothing: nothing imports it
    alone = _train(str(package_root), dataset_path, tmp_path / "alone")
    assert alone.returncode == 2, alone.stderr[-2000:]
    assert "unknown model 'toy-linear'" in alone.stderr

    # one line in the cost-model list of the registration lists
    init = (package / "__init__.py").read_text(encoding="utf-8")
    anchor = "from .models import invariant  # noqa: F401\n"
    assert init.count(anchor) == 1
    (package / "__init__.py").write_text(init.replace(anchor, anchor + REGISTRATION), encoding="utf-8")
    run = _train(str(package_root), dataset_path, tmp_path / "run")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "model: toy-linear" in run.stderr

    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["config"]["model"] == "toy-linear"
    assert metrics["run"]["epochs_run"] == 4
    assert np.isfinite(metrics["test"]["kendall_tau"]["mean"])
    from simulator.checkpoint import load_checkpoint
    state = load_checkpoint(str(tmp_path / "run" / "checkpoint.pt"))
    assert set(state["model"]) == {"linear.weight", "linear.bias", "vector_mean", "vector_std", "target"}
    losses = [epoch["train_loss"] for epoch in state["history"]]
    assert losses[-1] < losses[0]  # it trained


# ---------------------------------------------------------------- interfaces and lists
# each interface module and the modules of its registered implementations (layers, losses,
# metrics and splits hold their built-in ones themselves)
IMPLEMENTATIONS_OF = {"models.costmodel": ("models.curve_mlp", "models.xgb", "models.autotvm_xgb", "models.invariant"),
                      "data.sources": ("data.in_memory", "data.tpugraphs")}
IMPLEMENTATIONS = tuple(m for modules in IMPLEMENTATIONS_OF.values() for m in modules)


def _imported_modules(path):
    """The simulator modules a file imports (relative or absolute), anywhere in it, as
    dotted names inside `simulator` ("models.costmodel")."""
    package = os.path.relpath(os.path.dirname(path), SIMULATOR).replace(os.sep, ".")
    package = [] if package == "." else package.split(".")
    names = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            elif (node.module or "").startswith("simulator"):
                base = node.module.split(".")[1:]
            else:
                continue
            names.add(".".join(base))
            names.update(".".join(base + [a.name]) for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".", 1)[1] for a in node.names if a.name.startswith("simulator."))
    return names


def test_interfaces_import_no_implementation():
    for interface, implementations in IMPLEMENTATIONS_OF.items():
        imported = _imported_modules(os.path.join(SIMULATOR, *interface.split(".")) + ".py")
        assert not imported & set(implementations), (interface, imported & set(implementations))


def test_the_registration_lists_register_every_implementation():
    """Every implementation module is in the lists, and what they register is what the
    CLIs offer: `--model` names every registered cost model, `--data` the data kinds."""
    listed = _imported_modules(os.path.join(SIMULATOR, "__init__.py"))
    assert set(IMPLEMENTATIONS) <= listed
    from simulator.models.costmodel import COST_MODELS, model_names
    from simulator.data.sources import DATA_KINDS
    assert {"curve-mlp", "xgb", "knob-xgb", "itervar-xgb", "gcn-inv", "mlp-inv"} <= set(COST_MODELS.names())
    assert set(COST_MODELS.names()) <= set(model_names())
    assert set(DATA_KINDS.names()) == {"samples", "tpugraphs"}
