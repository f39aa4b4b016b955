"""One cost-model interface, in the manner of TVM MetaSchedule's `CostModel`.

    model = build_cost_model(config, info)       # by --model name
    model.set_normalization(train.normalization(model.batch_spec, seed))
    model.fit(train, val, run)                    # train (run: checkpoint, resume)
    model.update(new_samples, steps=8)            # continue on newly measured items
    model.predict(samples)                        # log runtimes, one per config row
    model.save(path); CostModel.load(path)

`predict` and `update` take a `Source` or a plain list of `GraphSample`s (what
MetaSchedule's candidates become); a list is prepared on the fly, with no other setup
per call. What a batch needs (the graph or a vector, one graph copy per config for an
early join) is asked of the model: `model.batch_spec`.

Implementations register by name (`register_cost_model`), each in its own module, listed
once in the registration list of `simulator/__init__.py`; this module imports none of
them. Every propagation layer (`gcn`, `sage`, `gat`, `cheb`, `mlp`, and any layer
registered later) is a `GraphCostModel` without registering anything.
"""
from __future__ import annotations

import abc
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from extract.sample import GraphSample

from simulator.checkpoint import load_checkpoint, save_checkpoint
from simulator.config import ModelInfo, Normalization, TrainConfig
from simulator.data.batching import Batch, BatchSpec
from simulator.data.features import DEFAULT_FEATURES, MODEL_FEATURES
from simulator.data.in_memory import SampleSource
from simulator.data.sources import Source
from simulator.distributed import Cluster
from simulator.registry import Registry, SimulatorError, UnknownNameError
from simulator.sgd import RunContext, fit_sgd, update_sgd
from .layers import PROPAGATIONS
from .model import GraphModel, VectorMLP

COST_MODELS: Registry = Registry("model")


def register_cost_model(name: str):
    """A class decorator: the `CostModel` class is `--model name` (its `FEATURES`, the
    feature set it reads by default, recorded with it: `simulator.data.features.feature_set`)."""
    def add(cls: type) -> type:
        COST_MODELS.register(name)(cls)
        MODEL_FEATURES[name] = cls.FEATURES
        return cls
    return add


UPDATE_STEPS = 8
Items = Union[Source, Sequence[GraphSample]]


class CostModel(abc.ABC):
    """A learned cost model: predicts the log runtime (natural log of seconds) of each
    config row of a program graph. `config`: the run's; `info`: the data's shapes.
    `FEATURES`: the node-feature columns it reads unless `--features` says otherwise
    (`simulator.data.features`); `ENSEMBLES`: whether it takes `--members` above 1."""

    FEATURES = DEFAULT_FEATURES
    ENSEMBLES = False  # whether it builds `--members` networks (simulator.models.ensemble)

    def __init__(self, config: TrainConfig, info: ModelInfo):
        self.config, self.info = config, info
        self.normalization: Optional[Normalization] = None
        if config.model.members != 1 and not self.ENSEMBLES:
            able = [name for name in COST_MODELS.names() if COST_MODELS.get(name).ENSEMBLES]
            raise SimulatorError(f"--members {config.model.members}: {config.model.model} trains one network "
                                 f"(ensembles: {', '.join(able) or 'none'})")

    @property
    @abc.abstractmethod
    def batch_spec(self) -> BatchSpec:
        """What this model needs in a batch."""

    def set_normalization(self, stats: Normalization) -> None:
        """Install the training set's statistics (standardisation of inputs and target)."""
        self.normalization = stats

    def place(self, cluster: Cluster) -> None:
        """Train and score where `cluster` says (device; one of several torchrun processes).
        This model trains in one CPU process only; torch models override."""
        if cluster.distributed or cluster.device != "cpu":
            raise SimulatorError(f"--model {self.config.model.model} trains in one CPU process: run it "
                                 f"without torchrun and without --device {cluster.device}")

    @abc.abstractmethod
    def fit(self, train: Source, val: Optional[Source] = None, run: Optional[RunContext] = None) -> Dict[str, Any]:
        """Train on `train` (early stopping on `val`), checkpointing through `run` and
        continuing from its checkpoint; returns the run summary for metrics.json."""

    @abc.abstractmethod
    def update(self, items: Items, steps: int = UPDATE_STEPS) -> None:
        """Continue training on newly measured items (a few steps; cold: statistics first)."""

    @abc.abstractmethod
    def predict_batch(self, batch: Batch) -> np.ndarray:
        """Predicted log runtimes (float64), one per config row of `batch`."""

    def predict(self, items: Items, batch_size: Optional[int] = None) -> np.ndarray:
        """Predicted log runtimes, one per config row, in item order."""
        if isinstance(items, (list, tuple)) and not items:
            return np.zeros(0)
        source = self.source_of(items)
        parts = [p for _, p in source.score(self, batch_size or self.config.fit.eval_batch_size)]
        return np.concatenate(parts) if parts else np.zeros(0)

    def source_of(self, items: Items) -> Source:
        """`items` as a source: a list of samples is prepared for this model's vocabulary."""
        if isinstance(items, (list, tuple)):
            return SampleSource(items, self.info, self.config.data.feature_transform)
        return items

    @abc.abstractmethod
    def weights(self) -> Dict[str, Any]:
        """The trained parameters as checkpoint entries (plain data and tensors)."""

    @abc.abstractmethod
    def load_weights(self, state: Dict[str, Any], which: str = "best_model") -> None:
        """Take the parameters from checkpoint entries (`which`: best or last weights)."""

    def checkpoint(self) -> Dict[str, Any]:
        """Config, info, normalisation and weights: what `load` needs."""
        return dict(config=self.config.to_dict(), info=self.info.to_dict(),
                    normalization=self.normalization.to_dict() if self.normalization else {},
                    finished=True, **self.weights())

    def save(self, path: str) -> None:
        save_checkpoint(path, self.checkpoint())

    @classmethod
    def load(cls, path: str, which: str = "best_model") -> "CostModel":
        """The model saved at `path` (a checkpoint, or a run folder holding one)."""
        return load_trained(path, which)[0]


# ---------------------------------------------------------------------- torch models
class TorchCostModel(CostModel):
    """A cost model whose network (`net`, a torch module) is trained by `simulator.sgd`."""

    net: torch.nn.Module

    def __init__(self, config: TrainConfig, info: ModelInfo):
        super().__init__(config, info)
        self._optimizer: Optional[torch.optim.Optimizer] = None  # online updates' (kept: its moments)
        self._rng = np.random.default_rng([config.seed, 5])

    def set_normalization(self, stats: Normalization) -> None:
        super().set_normalization(stats)
        self.net.set_normalization(stats)

    def place(self, cluster: Cluster) -> None:
        self.net.to(cluster.torch_device)

    @property
    def device(self) -> torch.device:
        return next(self.net.parameters()).device

    def fit(self, train: Source, val: Optional[Source] = None, run: Optional[RunContext] = None) -> Dict[str, Any]:
        n_params = sum(p.numel() for p in self.net.parameters())
        print(f"model: {self.config.model.model}, {n_params} parameters; loss {self.config.fit.loss}",
              file=sys.stderr)
        return fit_sgd(self, train, val, run)

    def update(self, items: Items, steps: int = UPDATE_STEPS) -> None:
        source = self.source_of(items)
        if self.normalization is None:
            self.set_normalization(source.normalization(self.batch_spec, self.config.seed))
        if self._optimizer is None:
            fit = self.config.fit
            self._optimizer = torch.optim.AdamW(self.net.parameters(), lr=fit.lr, weight_decay=fit.weight_decay)
        update_sgd(self, source, steps, self._optimizer, self._rng)

    def predict_batch(self, batch: Batch) -> np.ndarray:
        self.net.eval()
        with torch.no_grad():
            return self.net(batch.to(self.device)).double().cpu().numpy()

    def weights(self) -> Dict[str, Any]:
        state = self.net.state_dict()
        return {"model": state, "best_model": state}

    def load_weights(self, state: Dict[str, Any], which: str = "best_model") -> None:
        weights = state.get(which) or state.get("model")
        if weights is None:
            raise SimulatorError("checkpoint holds no model weights")
        try:
            self.net.load_state_dict(weights)
        except RuntimeError as e:  # a checkpoint of another version of this model
            detail = next((line.strip() for line in str(e).splitlines()[1:] if line.strip()), str(e))
            raise SimulatorError(f"checkpoint's weights do not fit this version's {self.config.model.model} "
                                 f"({detail[:200]}); train it again") from None


class GraphCostModel(TorchCostModel):
    """A `GraphModel` with the propagation layer named `config.model.model` (a subclass
    registered under another name: `PROPAGATION`)."""

    PROPAGATION: Optional[str] = None

    def __init__(self, config: TrainConfig, info: ModelInfo):
        super().__init__(config, info)
        m = config.model
        self.net = GraphModel(self.PROPAGATION or m.model, info.feature_dim, info.num_types, width=m.width, depth=m.depth,
                              type_dim=m.type_dim, dropout=m.dropout, residual=m.residual, norm=m.norm,
                              pooling=m.pooling, layer_options=m.layer_options, config_dim=info.config_dim,
                              node_config_dim=info.node_config_dim, join=m.join)

    @property
    def batch_spec(self) -> BatchSpec:
        return BatchSpec(graph=True, expand=self.net.expands)


def require_vector(config: TrainConfig, info: ModelInfo, vector: str) -> int:
    """The width of `vectors[vector]` in the data, or a clear error."""
    if vector not in info.vector_dims:
        raise SimulatorError(f"--model {config.model.model} reads sample.vectors[{vector!r}], which the data "
                             f"lacks (has: {', '.join(info.vector_dims) or 'none'}); a graph model "
                             f"({', '.join(PROPAGATIONS.names())}) reads the graph itself")
    return info.vector_dims[vector]


def require_packed(config: TrainConfig, info: ModelInfo, vector: str, item_width: int, items: str) -> int:
    """How many `item_width`-wide items (`items`: what they are) `vectors[vector]` packs, or a clear error."""
    width = require_vector(config, info, vector)
    if width % item_width:
        raise SimulatorError(f"vectors[{vector!r}] is {width} wide, not a whole number of {item_width}-wide "
                             f"{items} (another extractor version?)")
    return width // item_width


class VectorCostModel(TorchCostModel):
    """ŷ = MLP(v) on one fixed-width vector per config (`VECTOR`, a `sample.vectors` entry)."""

    VECTOR = ""

    def __init__(self, config: TrainConfig, info: ModelInfo):
        super().__init__(config, info)
        m = config.model
        self.net = VectorMLP(require_vector(config, info, self.VECTOR), width=m.width, depth=m.depth,
                             dropout=m.dropout)

    @property
    def batch_spec(self) -> BatchSpec:
        return BatchSpec(graph=False, vector=self.VECTOR)


# ---------------------------------------------------------------------- by name
def model_names() -> List[str]:
    return PROPAGATIONS.names() + COST_MODELS.names()


def reads_graphs(name: str) -> bool:
    """Whether model `name`'s batches carry DGL graphs (a vector model's, `VECTOR`, do not)."""
    return not getattr(cost_model_class(name), "VECTOR", None)


def cost_model_class(name: str) -> type:
    """The cost model class `--model name` builds: a registered one, or a GNN with the
    propagation layer of that name."""
    if name in COST_MODELS:
        return COST_MODELS.get(name)
    if name in PROPAGATIONS:
        return GraphCostModel
    raise UnknownNameError(f"unknown model {name!r} (known: {', '.join(model_names())})")


def build_cost_model(config: TrainConfig, info: ModelInfo) -> CostModel:
    """The cost model named `config.model.model`, shaped by `info`."""
    return cost_model_class(config.model.model)(config, info)


def load_trained(path: str, which: str = "best_model") -> Tuple[CostModel, Dict[str, Any]]:
    """(the trained model, its checkpoint) from a run folder or checkpoint file; `which`:
    "best_model" or "model" (the last weights)."""
    state = load_checkpoint(path)
    model = build_cost_model(TrainConfig.from_dict(state["config"]), ModelInfo.from_dict(state["info"]))
    try:
        model.load_weights(state, which)
    except SimulatorError as e:
        raise SimulatorError(f"{path}: {e}") from None
    except (RuntimeError, KeyError, ValueError) as e:
        raise SimulatorError(f"{path}: checkpoint weights do not fit its model "
                             f"({str(e).strip().splitlines()[0][:200]})") from None
    if state.get("normalization"):
        model.normalization = Normalization.from_dict(state["normalization"])
    return model, state
