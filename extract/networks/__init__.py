"""The networks whose MetaSchedule tasks make tpsim's cross-operator dataset (issue 12).

Each network is a torch `nn.Module` written from its paper (one file each, random weights,
nothing downloaded), batch 1, float32. `NETWORKS` maps the name used on command lines and
in the task table to how to build it and its input shape; `extract.ms_tasks` imports them
into Relax and extracts the tuning tasks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Tuple

from torch import nn


@dataclass(frozen=True)
class NetworkSpec:
    """How to build one network: `build()` gives the module in eval mode's layout (the
    caller calls `.eval()`), `input_shape` its one float32 input."""

    name: str
    build: Callable[[], nn.Module]
    input_shape: Tuple[int, ...]
    source: str


def _registry() -> Dict[str, NetworkSpec]:
    from . import bert, mobilenet_v2, resnet50, vit

    specs = [
        NetworkSpec("resnet50", resnet50.ResNet50, resnet50.INPUT_SHAPE, "He et al. 2015, Table 1"),
        NetworkSpec("mobilenet_v2", mobilenet_v2.MobileNetV2, mobilenet_v2.INPUT_SHAPE,
                    "Sandler et al. 2018, Table 2"),
        NetworkSpec("bert", bert.BertLayer, bert.INPUT_SHAPE, "Devlin et al. 2019, BERT-base, one layer"),
        NetworkSpec("vit", vit.VitBlock, vit.INPUT_SHAPE, "Dosovitskiy et al. 2021, ViT-B/16, one block"),
    ]
    return {spec.name: spec for spec in specs}


NETWORKS: Dict[str, NetworkSpec] = _registry()


def get_network(name: str) -> NetworkSpec:
    """The spec of `name`; a clear error listing the known names otherwise."""
    if name not in NETWORKS:
        raise KeyError(f"unknown network {name!r}; known: {', '.join(NETWORKS)}")
    return NETWORKS[name]
