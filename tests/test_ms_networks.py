"""The networks of the MetaSchedule dataset (extract.metaschedule.networks): layer structure as in their
papers, consistent registry, and one network imported into Relax end to end."""
import pytest
import torch
from torch import nn

from extract.metaschedule.networks import NETWORKS, SERVED_BATCH, NetworkSpec, get_network

OUTPUT_SHAPES = {  # batch-1 output of every network
    "resnet50": (1, 1000), "mobilenet_v2": (1, 1000), "bert": (1, 128, 768), "vit": (1, 197, 768),
    "resnet18": (1, 1000), "resnet101": (1, 1000), "resnext50": (1, 1000), "mobilenet_v3": (1, 1000),
    "efficientnet_b0": (1, 1000), "densenet121": (1, 1000), "inception_v3": (1, 1000),
    "convnext_t": (1, 1000), "swin_t": (1, 1000), "bert_large": (1, 384, 1024), "gpt2": (1, 256, 768),
    "unet": (1, 2, 256, 256), "unet_bilinear": (1, 2, 256, 256), "dlrm": (1, 1), "mixer": (1, 196, 512),
}
PARAMETERS = {  # millions, as the papers and the reference implementations count them
    "resnet18": 11.69, "resnet50": 25.56, "resnet101": 44.55, "resnext50": 25.03, "mobilenet_v2": 3.50,
    "mobilenet_v3": 5.48, "efficientnet_b0": 5.29, "densenet121": 7.98,
    "inception_v3": 23.83,  # 27.16 with the auxiliary classifier, which inference does not run
    "convnext_t": 28.59, "swin_t": 28.29, "unet": 31.03,
}
UNBATCHED = {"unet", "unet_bilinear"}  # one large image at a time


def _count(model: nn.Module, kind, **where) -> int:
    return sum(isinstance(m, kind) and all(getattr(m, k) == v for k, v in where.items())
               for m in model.modules())


def _forward(spec: NetworkSpec, *inputs: torch.Tensor) -> torch.Tensor:
    torch.manual_seed(0)
    model = spec.build().eval()
    with torch.no_grad():
        return model(*(inputs or spec.example_inputs()))


@pytest.mark.parametrize("name", sorted(OUTPUT_SHAPES))
def test_forward_shapes(name):
    out = _forward(get_network(name))
    assert tuple(out.shape) == OUTPUT_SHAPES[name] and torch.isfinite(out).all()


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_parameter_counts(name):
    model = get_network(name).build()
    assert sum(p.numel() for p in model.parameters()) / 1e6 == pytest.approx(PARAMETERS[name], abs=0.006)


def test_mixer_layer_mixes_tokens_then_channels():
    """Mixer-S/16 (Table 1): token MLP 196 → 256 → 196, channel MLP 512 → 2048 → 512, two
    LayerNorms; a token's output depends on the other tokens (token mixing)."""
    model = get_network("mixer").build().eval()
    assert sum(p.numel() for p in model.parameters()) == (196 * 256 + 256 + 256 * 196 + 196) + \
        (512 * 2048 + 2048 + 2048 * 512 + 512) + 2 * 2 * 512
    torch.manual_seed(0)
    x = torch.randn(1, 196, 512)
    y = x.clone()
    y[0, 5] = torch.randn(512)   # not a uniform shift: the LayerNorm before token mixing removes one
    with torch.no_grad():
        out_x, out_y = model(x), model(y)
    assert (out_x[0, 0] - out_y[0, 0]).abs().max() > 1e-3     # token 0 sees token 5


def test_registry_names_and_batches():
    batch_one = [n for n, s in NETWORKS.items() if s.batch == 1]
    assert batch_one == list(OUTPUT_SHAPES)  # the first four keep their names, order and meaning
    assert {n for n, s in NETWORKS.items() if s.batch != 1} == {f"{n}_b{SERVED_BATCH}" for n in
                                                                set(OUTPUT_SHAPES) - UNBATCHED}
    for name, spec in NETWORKS.items():
        assert spec.name == name and all(shape[0] == spec.batch for shape in spec.input_shapes)
        if spec.batch != 1:
            base = get_network(name[: -len(f"_b{SERVED_BATCH}")])
            assert spec.build is base.build and spec.source == base.source
            assert spec.input_shapes == tuple((SERVED_BATCH, *s[1:]) for s in base.input_shapes)
    assert get_network("resnet50").input_shapes == ((1, 3, 224, 224),)
    assert get_network("bert").input_shapes == ((1, 128, 768),)
    assert get_network("inception_v3").input_shapes == ((1, 3, 299, 299),)
    with pytest.raises(KeyError, match="known: resnet50"):
        get_network("alexnet")
    with pytest.raises(ValueError, match="lead with its batch 8"):
        NetworkSpec("bad", nn.Identity, ((1, 3),), "none", batch=8)


@pytest.mark.parametrize("name", ["swin_t", "dlrm", "gpt2"])
def test_batch_rows_are_independent(name):
    """A batch of two gives each row what that row alone gives (the shifted-window mask is
    repeated per image in the order the windows are laid out)."""
    spec = get_network(name).batched(2)
    inputs = spec.example_inputs()
    together = _forward(spec, *inputs)
    for row in range(2):
        alone = _forward(spec, *(x[row:row + 1] for x in inputs))
        torch.testing.assert_close(together[row:row + 1], alone, rtol=1e-4, atol=1e-4)


def test_resnet_layers():
    convs = lambda name: [m for m in get_network(name).build().modules() if isinstance(m, nn.Conv2d)]  # noqa: E731
    assert len(convs("resnet50")) == 53     # 1 stem + 16 bottlenecks × 3 + 4 projections
    assert len(convs("resnet18")) == 20     # 1 stem + 8 basic blocks × 2 + 3 projections
    assert len(convs("resnet101")) == 104   # 1 stem + 33 bottlenecks × 3 + 4 projections
    grouped = [m for m in convs("resnext50") if m.groups > 1]
    assert len(grouped) == 16 and all(m.groups == 32 and m.in_channels // 32 in (4, 8, 16, 32) for m in grouped)


def test_mobile_networks_layers():
    depthwise = lambda model: [m for m in model.modules()  # noqa: E731
                               if isinstance(m, nn.Conv2d) and m.groups > 1 and m.groups == m.in_channels]
    v2, v3, b0 = (get_network(n).build() for n in ("mobilenet_v2", "mobilenet_v3", "efficientnet_b0"))
    assert len(depthwise(v2)) == 17
    assert sorted({m.kernel_size[0] for m in depthwise(v3)}) == [3, 5] and len(depthwise(v3)) == 15
    assert _count(v3, nn.Hardswish) > 0 and _count(v3, nn.Hardsigmoid) == 8   # eight SE blocks
    assert len(depthwise(b0)) == 16 and _count(b0, nn.Sigmoid) == 16 and _count(b0, nn.ReLU) == 0


def test_inception_and_densenet_layers():
    inception = get_network("inception_v3").build()
    assert _count(inception, nn.Conv2d, kernel_size=(1, 7)) == 4 * 3 + 1   # Figure 6 × 4, reduction
    assert _count(inception, nn.Conv2d, kernel_size=(3, 1)) == 2 * 2       # Figure 7 × 2
    assert all(m.eps == 1e-3 for m in inception.modules() if isinstance(m, nn.BatchNorm2d))
    densenet = get_network("densenet121").build()
    assert _count(densenet, nn.Conv2d, kernel_size=(3, 3)) == 6 + 12 + 24 + 16
    assert densenet.classifier.in_features == 1024


def test_gpt2_is_causal():
    """Changing the last token changes no earlier token's output; BERT's layer is not causal."""
    for name, causal in (("gpt2", True), ("bert", False)):
        x = get_network(name).example_inputs()[0]
        y = x.clone()
        y[:, -1] = torch.randn(y.shape[0], y.shape[-1])   # not a uniform shift, which a LayerNorm removes
        moved = (_forward(get_network(name), x)[:, :-1] - _forward(get_network(name), y)[:, :-1]).abs().max()
        assert (moved < 1e-5) if causal else (moved > 1e-3)


@pytest.mark.parametrize("name, pre_norm, eps, hidden, heads", [
    ("bert", False, 1e-12, 768, 12), ("vit", True, 1e-6, 768, 12), ("bert_large", False, 1e-12, 1024, 16),
    ("gpt2", True, 1e-5, 768, 12)])
def test_transformer_layers(name, pre_norm, eps, hidden, heads):
    layer = get_network(name).build()
    assert layer.pre_norm is pre_norm and layer.norm1.eps == eps
    assert layer.attention.heads == heads and layer.attention.head_dim == 64
    assert _count(layer, nn.Linear, in_features=hidden, out_features=4 * hidden) == 1
    fused = name == "gpt2"   # one hidden → 3·hidden Q/K/V projection instead of three
    assert _count(layer, nn.Linear, in_features=hidden, out_features=3 * hidden) == int(fused)
    assert _count(layer, nn.Linear, in_features=hidden, out_features=hidden) == (1 if fused else 4)


def test_unet_upsampling_choices():
    from extract.metaschedule.networks.unet import UNet

    assert _count(UNet("transposed"), nn.ConvTranspose2d) == 4
    assert _count(UNet("bilinear"), nn.Upsample) == 4 and _count(UNet("bilinear"), nn.ConvTranspose2d) == 0
    with pytest.raises(ValueError, match="known: transposed, bilinear"):
        UNet("nearest")


def _run_relax(mod, inputs):
    """Compile `mod` untuned for this CPU and call it on torch `inputs`; its one output."""
    import tvm
    from tvm import relax

    from extract.metaschedule.runner import host_target

    vm = relax.VirtualMachine(tvm.compile(mod, target=host_target()), tvm.cpu())
    (out,) = vm["main"](*(tvm.runtime.tensor(x.numpy()) for x in inputs))
    return out.numpy()


def test_batch_norm_imports_with_its_statistics_and_eps():
    """Batch norm after a convolution (folded into it) and before one (kept as a
    scale-and-shift) compute what torch computes, eps included."""
    from extract.metaschedule.runner import host_target
    from extract.metaschedule.tasks import import_module

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 8, 3, bias=False), nn.BatchNorm2d(8, eps=1e-3), nn.ReLU(),
                          nn.BatchNorm2d(8), nn.Conv2d(8, 8, 1)).eval()
    for norm in (model[1], model[3]):
        norm.running_mean.uniform_(-1, 1), norm.running_var.uniform_(0.01, 0.2)
        norm.weight.data.uniform_(0.5, 2), norm.bias.data.uniform_(-1, 1)
    x = torch.randn(1, 4, 10, 10)
    with torch.no_grad():
        expected = model(x)
    with host_target():
        mod = import_module(model, (x,))
    torch.testing.assert_close(torch.from_numpy(_run_relax(mod, (x,))), expected, rtol=1e-4, atol=1e-4)


def test_dlrm_tasks_end_to_end():
    """DLRM imports into Relax with nothing left unlowered, computes what torch computes
    when compiled untuned, and splits into its tasks with the per-inference weights."""
    import tvm
    from tvm import relax

    from extract.metaschedule.runner import host_target
    from extract.metaschedule.tasks import import_network, network_tasks

    target = host_target()
    with target:
        mod = import_network("dlrm")
    ops = []
    relax.analysis.post_order_visit(mod["main"], lambda e: ops.append(e.op.name) if isinstance(
        e, relax.Call) and isinstance(e.op, tvm.ir.Op) else None)
    assert set(ops) == {"relax.call_tir"} and len(ops) == 14

    spec = get_network("dlrm")
    torch.manual_seed(0)  # as import_network builds it
    model, inputs = spec.build().eval(), spec.example_inputs()
    with torch.no_grad():
        expected = model(*inputs)
    torch.testing.assert_close(torch.from_numpy(_run_relax(mod, inputs)), expected, rtol=1e-5, atol=1e-6)

    tasks = network_tasks("dlrm", target)
    kinds = sorted(t.kind for t in tasks)
    assert kinds == ["dense"] * 8 + ["elementwise"] * 5
    assert sum(t.networks["dlrm"] for t in tasks) == 14 and all(set(t.networks) == {"dlrm"} for t in tasks)
    assert len({t.key for t in tasks}) == len(tasks)
    shapes = {tuple(map(tuple, t.shapes)) for t in tasks if t.kind == "dense"}
    assert ((1, 479), (479, 1024), (1024,), (1, 1024)) in shapes   # the top MLP's first layer
