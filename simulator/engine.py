"""What train, evaluate and predict share: determinism, model info, prediction, reloading."""
from __future__ import annotations

import json
import os
import random
import sys
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
import torch

from extract.sample import GraphSample

from .batching import Prepared, make_batch, prepare
from .checkpoint import load_checkpoint
from .data import extractor_info
from .metrics import evaluate
from .model import build_model, vector_name_of
from .registry import SimulatorError


def setup_determinism(seed: int, threads: int) -> None:
    """Same seed and thread count → same numbers."""
    from .dgl_compat import dgl
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    dgl.seed(seed)
    torch.set_num_threads(threads)
    dgl.utils.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)


def model_info(samples: Sequence[GraphSample], config: Dict[str, Any]) -> Dict[str, Any]:
    """What the model's shape depends on, recorded in the checkpoint."""
    info = extractor_info()
    versions = {s.meta.get("extractor") for s in samples}
    if len(versions) == 1 and None not in versions:  # what made these samples, if they say
        info["extractor_version"] = str(versions.pop())
    vocab = info["vocabulary"]
    max_type = max(int(s.node_types.max()) for s in samples if s.num_nodes)
    info["num_types"] = len(vocab) if vocab else max_type + 1
    info["feature_dim"] = int(samples[0].node_features.shape[1])
    info["vector_dims"] = {name: int(np.asarray(v).reshape(samples[0].num_configs, -1).shape[1])
                           for name, v in samples[0].vectors.items()}
    vector_name = vector_name_of(config["model"])
    if vector_name is not None and vector_name not in info["vector_dims"]:
        raise SimulatorError(f"--model {config['model']} reads sample.vectors[{vector_name!r}], which the "
                             f"data lacks (has: {', '.join(info['vector_dims']) or 'none'})")
    return info


def prepare_samples(samples: Sequence[GraphSample], config: Dict[str, Any], info: Dict[str, Any],
                    group_index: Dict[str, int]) -> List[Prepared]:
    vector_name = vector_name_of(config["model"])
    return prepare(samples, group_index, info["num_types"], vector_name,
                   feature_dim=info["feature_dim"] if vector_name is None else None,
                   transform=config.get("feature_transform", "none"))


def predict_log(model, items: Sequence[Prepared], batch_size: int = 256) -> np.ndarray:
    """Predicted log runtimes (natural log of seconds), one per config row, in item order."""
    if not items:
        return np.zeros(0)
    if not isinstance(model, torch.nn.Module):  # xgb
        return model.predict(torch.cat([it.vector for it in items]).numpy())
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(items), batch_size):
            batch = make_batch(items[start:start + batch_size], with_graph=model.uses_graph,
                               with_vector=model.vector_name is not None and not model.uses_graph,
                               expand=bool(getattr(model, "expands", False)))
            out.append(model(batch).double().numpy())
    return np.concatenate(out)


def evaluate_items(model, items: Sequence[Prepared], samples: Sequence[GraphSample],
                   batch_size: int = 256) -> Dict[str, Dict]:
    """Metrics of `model` on measured samples, per workload (sample.group) and mean.
    A lazy source (`simulator.tpugraphs.TpuGraphsSource`) evaluates itself, per graph."""
    if hasattr(items, "evaluate"):
        return items.evaluate(model, batch_size)
    pred = predict_log(model, items, batch_size)
    true = np.concatenate([it.y.double().numpy() for it in items])
    groups = [s.group for s in samples for _ in range(s.num_configs)]
    return evaluate(pred, true, groups)


def load_trained(path: str, which: str = "best_model") -> Tuple[Any, Dict[str, Any]]:
    """(model with trained weights, checkpoint state) from a run folder or checkpoint file;
    the state has the run's "config" and the model's "info"."""
    state = load_checkpoint(path)
    config, info = state["config"], state["info"]
    model = build_model(config, info)
    try:
        if isinstance(model, torch.nn.Module):
            weights = state.get(which) or state.get("model")
            if weights is None:
                raise SimulatorError(f"{path}: checkpoint holds no model weights")
            model.load_state_dict(weights)
        else:
            if not state.get("xgb"):
                raise SimulatorError(f"{path}: checkpoint holds no trained XGBoost model")
            model.load_json(state["xgb"])
    except (RuntimeError, KeyError, ValueError) as e:
        raise SimulatorError(f"{path}: checkpoint weights do not fit its model "
                             f"({str(e).strip().splitlines()[0][:200]})") from None
    return model, state


def check_extractor(info: Dict[str, Any], where: str) -> None:
    """Warn when the current extractor differs from the one the model was trained on."""
    now = extractor_info()["extractor_version"]
    then = info.get("extractor_version")
    if now is not None and then is not None and now != then:
        print(f"warning: {where} was trained on extractor version {then}, the installed extractor "
              f"is {now}; node features may differ", file=sys.stderr)


def write_json(path: str, obj: Any) -> None:
    """Atomically, with sorted keys, NaN as null."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(_finite(obj), f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def _finite(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    if isinstance(obj, np.generic):
        return _finite(obj.item())
    return obj
