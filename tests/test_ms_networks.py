"""The networks of issue 12's dataset: layer structure as in their papers (torch only)."""
import pytest
import torch
from torch import nn

from extract.networks import NETWORKS, get_network


def _count(model: nn.Module, kind, **where) -> int:
    return sum(isinstance(m, kind) and all(getattr(m, k) == v for k, v in where.items())
               for m in model.modules())


@pytest.mark.parametrize("name, out_shape", [("resnet50", (1, 1000)), ("mobilenet_v2", (1, 1000)),
                                             ("bert", (1, 128, 768)), ("vit", (1, 197, 768))])
def test_forward_shapes(name, out_shape):
    spec = get_network(name)
    torch.manual_seed(0)
    with torch.no_grad():
        out = spec.build().eval()(torch.randn(*spec.input_shape))
    assert tuple(out.shape) == out_shape


def test_resnet50_layers():
    model = get_network("resnet50").build()
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 53  # 1 stem + 16 bottlenecks × 3 + 4 projections
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(25.56e6, rel=0.01)


def test_mobilenet_v2_layers():
    model = get_network("mobilenet_v2").build()
    depthwise = [m for m in model.modules() if isinstance(m, nn.Conv2d) and m.groups > 1]
    assert len(depthwise) == 17 and all(m.groups == m.in_channels == m.out_channels for m in depthwise)
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(3.50e6, rel=0.01)


@pytest.mark.parametrize("name, pre_norm, eps", [("bert", False, 1e-12), ("vit", True, 1e-6)])
def test_encoder_layers(name, pre_norm, eps):
    layer = get_network(name).build()
    assert layer.pre_norm is pre_norm and layer.norm1.eps == eps
    assert layer.attention.heads == 12 and layer.attention.head_dim == 64
    assert _count(layer, nn.Linear, in_features=768, out_features=3072) == 1
    assert _count(layer, nn.Linear, in_features=768, out_features=768) == 4


def test_registry_names():
    assert list(NETWORKS) == ["resnet50", "mobilenet_v2", "bert", "vit"]
    with pytest.raises(KeyError, match="known: resnet50"):
        get_network("alexnet")
