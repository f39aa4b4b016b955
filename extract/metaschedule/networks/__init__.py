"""The networks whose MetaSchedule tasks make tpsim's cross-operator dataset.

Each network is a torch `nn.Module` written from its paper (one file per family, random
weights, nothing downloaded), float32. `NETWORKS` maps the name used on command lines and
in the task table to how to build it and its inputs; `extract.metaschedule.tasks` imports them into
Relax and extracts the tuning tasks.

    name                       paper                                        file
    resnet18/50/101            He et al. 2015                               resnet.py
    resnext50                  Xie et al. 2017 (32 groups × 4)              resnet.py
    mobilenet_v2               Sandler et al. 2018                          mobilenet_v2.py
    mobilenet_v3               Howard et al. 2019 (Large)                   mobilenet_v3.py
    efficientnet_b0            Tan & Le 2019                                efficientnet.py
    densenet121                Huang et al. 2017                            densenet.py
    inception_v3               Szegedy et al. 2016 (299×299)                inception_v3.py
    convnext_t                 Liu et al. 2022                              convnext.py
    swin_t                     Liu et al. 2021                              swin.py
    bert, bert_large           Devlin et al. 2019 (one layer, seq 128/384)  bert.py
    vit                        Dosovitskiy et al. 2021 (one ViT-B/16 block) vit.py
    gpt2                       Radford et al. 2019 (one block, seq 256)     gpt2.py
    unet, unet_bilinear        Ronneberger et al. 2015 (256×256)            unet.py
    dlrm                       Naumov et al. 2019 (MLPs + interaction)      dlrm.py
    mixer                      Tolstikhin et al. 2021 (one Mixer-S/16 layer) mixer.py
                               (in no dataset: `NOT_IN_DATASETS`)

The plain names are batch 1. The networks usually served batched (the image classifiers,
the transformer layers and DLRM) also come at batch 8, named `<name>_b8`; U-Net, a
segmentation network run on one large image at a time, does not.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

import torch
from torch import nn

SERVED_BATCH = 8


@dataclass(frozen=True)
class NetworkSpec:
    """How to build one network: `build()` gives the module (the caller calls `.eval()`),
    `input_shapes` its float32 inputs, each led by the batch dimension `batch`."""

    name: str
    build: Callable[[], nn.Module]
    input_shapes: Tuple[Tuple[int, ...], ...]
    source: str
    batch: int = 1

    def __post_init__(self):
        if not self.input_shapes or any(shape[0] != self.batch for shape in self.input_shapes):
            raise ValueError(f"network {self.name}: input shapes {self.input_shapes} do not all "
                             f"lead with its batch {self.batch}")

    def example_inputs(self) -> Tuple[torch.Tensor, ...]:
        """Random inputs of the network's shapes (from torch's current random state)."""
        return tuple(torch.randn(*shape) for shape in self.input_shapes)

    def batched(self, batch: int) -> "NetworkSpec":
        """The same network at another batch size, named `<name>_b<batch>`."""
        return dataclasses.replace(self, name=f"{self.name}_b{batch}", batch=batch,
                                   input_shapes=tuple((batch, *s[1:]) for s in self.input_shapes))


def _batch_one() -> Tuple[Tuple[NetworkSpec, bool], ...]:
    """Every network at batch 1, with whether it is also served batched."""
    from . import (
        bert, convnext, densenet, dlrm, efficientnet, gpt2, inception_v3, mixer, mobilenet_v2, mobilenet_v3, resnet,
        swin, unet, vit,
    )

    image = (resnet.INPUT_SHAPE,)
    return (
        (NetworkSpec("resnet50", resnet.resnet50, image, "He et al. 2015, Table 1"), True),
        (NetworkSpec("mobilenet_v2", mobilenet_v2.MobileNetV2, (mobilenet_v2.INPUT_SHAPE,),
                     "Sandler et al. 2018, Table 2"), True),
        (NetworkSpec("bert", bert.BertLayer, (bert.INPUT_SHAPE,), "Devlin et al. 2019, BERT-base, one layer"), True),
        (NetworkSpec("vit", vit.VitBlock, (vit.INPUT_SHAPE,), "Dosovitskiy et al. 2021, ViT-B/16, one block"), True),
        (NetworkSpec("resnet18", resnet.resnet18, image, "He et al. 2015, Table 1"), True),
        (NetworkSpec("resnet101", resnet.resnet101, image, "He et al. 2015, Table 1"), True),
        (NetworkSpec("resnext50", resnet.resnext50_32x4d, image, "Xie et al. 2017, Table 1, 32×4d"), True),
        (NetworkSpec("mobilenet_v3", mobilenet_v3.MobileNetV3Large, (mobilenet_v3.INPUT_SHAPE,),
                     "Howard et al. 2019, Table 1, Large"), True),
        (NetworkSpec("efficientnet_b0", efficientnet.EfficientNetB0, (efficientnet.INPUT_SHAPE,),
                     "Tan & Le 2019, Table 1"), True),
        (NetworkSpec("densenet121", densenet.DenseNet121, (densenet.INPUT_SHAPE,), "Huang et al. 2017, Table 1"), True),
        (NetworkSpec("inception_v3", inception_v3.InceptionV3, (inception_v3.INPUT_SHAPE,),
                     "Szegedy et al. 2016, Table 1, Figures 5-7 and 10"), True),
        (NetworkSpec("convnext_t", convnext.ConvNeXtT, (convnext.INPUT_SHAPE,), "Liu et al. 2022, Table 9"), True),
        (NetworkSpec("swin_t", swin.SwinT, (swin.INPUT_SHAPE,), "Liu et al. 2021, Table 7"), True),
        (NetworkSpec("bert_large", bert.BertLargeLayer, (bert.LARGE_INPUT_SHAPE,),
                     "Devlin et al. 2019, BERT-large, one layer, seq 384"), True),
        (NetworkSpec("gpt2", gpt2.Gpt2Block, (gpt2.INPUT_SHAPE,), "Radford et al. 2019, GPT-2 small, one block"), True),
        (NetworkSpec("unet", unet.UNet, (unet.INPUT_SHAPE,), "Ronneberger et al. 2015, Figure 1"), False),
        (NetworkSpec("unet_bilinear", lambda: unet.UNet("bilinear"), (unet.INPUT_SHAPE,),
                     "Ronneberger et al. 2015, Figure 1, bilinear up-sampling"), False),
        (NetworkSpec("dlrm", dlrm.DLRM, dlrm.INPUT_SHAPES, "Naumov et al. 2019, MLPerf sizes"), True),
        (NetworkSpec("mixer", mixer.MixerLayer, (mixer.INPUT_SHAPE,),
                     "Tolstikhin et al. 2021, Mixer-S/16, one layer"), True),
    )


def _registry() -> Dict[str, NetworkSpec]:
    specs = []
    for spec, served_batched in _batch_one():
        specs += [spec, spec.batched(SERVED_BATCH)] if served_batched else [spec]
    return {spec.name: spec for spec in specs}


NETWORKS: Dict[str, NetworkSpec] = _registry()


def family(name: str) -> str:
    """The network a batch variant belongs to: `resnet50_b8` → `resnet50` (other names as they are)."""
    base, _, batch = name.rpartition("_b")
    return base if base and batch.isdigit() else name


# written for the whole-network tuning benchmark as networks no dataset holds: never measured
# into a dataset (`--networks all` leaves them out), so a model trained on a dataset has not seen them
NOT_IN_DATASETS = ("mixer",)
DATASET_NETWORKS: List[str] = [name for name in NETWORKS if family(name) not in NOT_IN_DATASETS]


def get_network(name: str) -> NetworkSpec:
    """The spec of `name`; a clear error listing the known names otherwise."""
    if name not in NETWORKS:
        raise KeyError(f"unknown network {name!r}; known: {', '.join(NETWORKS)}")
    return NETWORKS[name]
