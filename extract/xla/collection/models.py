"""Real models in JAX, small enough to compile and run in ≤ ~50 ms on one CPU core.

Each model follows the structure of its paper with random weights: `init(seed)` gives the
parameters (a dict of NumPy arrays), `apply(params, x)` the outputs, `batch(seed)` an
example input and target. `extract.xla.collection.programs` turns each into an inference step and a
training step (value_and_grad + an Adam update). Images are NHWC, sequences (batch,
time, features); sizes are chosen for run time on one core, not accuracy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

Params = Dict[str, Any]
DIMS = ("NHWC", "HWIO", "NHWC")


@dataclass(frozen=True)
class Model:
    """A model: its family (paper), parameters, forward pass, example batch and loss."""

    name: str
    family: str
    init: Callable[[int], Params]
    apply: Callable[[Params, Any], Any]
    batch: Callable[[int], Tuple[Any, Any]]
    loss: str = "softmax"  # "softmax" (integer labels) or "mse"


# ---------------------------------------------------------------- building blocks

class _Keys:
    """Seeded standard-normal weights (NumPy: building the example arguments compiles
    nothing)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def normal(self, shape: Tuple[int, ...]) -> np.ndarray:
        return self.rng.standard_normal(shape, dtype=np.float32)


def _dense(keys: _Keys, fan_in: int, fan_out: int) -> Params:
    scale = 1.0 / math.sqrt(fan_in)
    return {"w": keys.normal((fan_in, fan_out)) * scale, "b": np.zeros(fan_out, np.float32)}


def _conv(keys: _Keys, kh: int, kw: int, cin: int, cout: int) -> Params:
    scale = 1.0 / math.sqrt(kh * kw * cin)
    return {"w": keys.normal((kh, kw, cin, cout)) * scale}


def _norm(channels: int) -> Params:
    return {"scale": np.ones(channels, np.float32), "shift": np.zeros(channels, np.float32)}


def dense(p: Params, x: Any) -> Any:
    return x @ p["w"] + p["b"]


def conv(p: Params, x: Any, stride: int = 1, groups: int = 1, dilation: int = 1,
         padding: Any = "SAME") -> Any:
    return lax.conv_general_dilated(x, p["w"], (stride, stride), padding,
                                    rhs_dilation=(dilation, dilation), dimension_numbers=DIMS,
                                    feature_group_count=groups)


def batch_norm(p: Params, x: Any, eps: float = 1e-5) -> Any:
    """Batch statistics over every axis but the last (training-mode batch norm)."""
    axes = tuple(range(x.ndim - 1))
    mean = x.mean(axes)
    var = ((x - mean) ** 2).mean(axes)
    return (x - mean) * lax.rsqrt(var + eps) * p["scale"] + p["shift"]


def layer_norm(p: Params, x: Any, eps: float = 1e-5) -> Any:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * p["scale"] + p["shift"]


def _images(batch: int, size: int, channels: int, classes: int):
    def make(seed: int) -> Tuple[Any, Any]:
        rng = np.random.default_rng(seed)
        return (rng.standard_normal((batch, size, size, channels), dtype=np.float32),
                rng.integers(0, classes, batch).astype(np.int32))
    return make


def _vectors(batch: int, width: int, classes: int):
    def make(seed: int) -> Tuple[Any, Any]:
        rng = np.random.default_rng(seed)
        return (rng.standard_normal((batch, width), dtype=np.float32),
                rng.integers(0, classes, batch).astype(np.int32))
    return make


def _tokens(batch: int, length: int, width: int, classes: int):
    def make(seed: int) -> Tuple[Any, Any]:
        rng = np.random.default_rng(seed)
        return (rng.standard_normal((batch, length, width), dtype=np.float32),
                rng.integers(0, classes, batch).astype(np.int32))
    return make


# ---------------------------------------------------------------- ResNet (He et al. 2016)

def _resnet_init(seed: int, widths=(16, 32, 64), classes: int = 10) -> Params:
    keys = _Keys(seed)
    p: Params = {"stem": _conv(keys, 3, 3, 3, widths[0]), "stem_bn": _norm(widths[0])}
    cin = widths[0]
    for i, w in enumerate(widths):
        p[f"b{i}"] = {"c1": _conv(keys, 3, 3, cin, w), "n1": _norm(w),
                      "c2": _conv(keys, 3, 3, w, w), "n2": _norm(w)}
        if cin != w:
            p[f"b{i}"]["proj"] = _conv(keys, 1, 1, cin, w)
        cin = w
    p["head"] = _dense(keys, cin, classes)
    return p


def _resnet_apply(p: Params, x: Any) -> Any:
    x = jax.nn.relu(batch_norm(p["stem_bn"], conv(p["stem"], x)))
    for i in range(3):
        b, stride = p[f"b{i}"], 1 if i == 0 else 2
        y = jax.nn.relu(batch_norm(b["n1"], conv(b["c1"], x, stride)))
        y = batch_norm(b["n2"], conv(b["c2"], y))
        x = jax.nn.relu(y + (conv(b["proj"], x, stride) if "proj" in b else x))
    return dense(p["head"], x.mean((1, 2)))


# ------------------------------------------------------- MobileNetV2 (Sandler et al. 2018)

def _mobilenet_init(seed: int, blocks=((16, 24, 2), (24, 32, 2), (32, 32, 1)),
                    expand: int = 4, classes: int = 10) -> Params:
    keys = _Keys(seed)
    p: Params = {"stem": _conv(keys, 3, 3, 3, 16), "stem_bn": _norm(16)}
    for i, (cin, cout, _) in enumerate(blocks):
        hidden = cin * expand
        p[f"b{i}"] = {"expand": _conv(keys, 1, 1, cin, hidden), "n1": _norm(hidden),
                      "depthwise": _conv(keys, 3, 3, 1, hidden), "n2": _norm(hidden),
                      "project": _conv(keys, 1, 1, hidden, cout), "n3": _norm(cout)}
    p["head"] = _dense(keys, blocks[-1][1], classes)
    return p


def _inverted_residual(b: Params, x: Any, stride: int, act: Callable = jax.nn.relu6) -> Any:
    hidden = b["expand"]["w"].shape[-1]
    y = act(batch_norm(b["n1"], conv(b["expand"], x)))
    y = act(batch_norm(b["n2"], conv(b["depthwise"], y, stride, groups=hidden)))
    if "se" in b:  # squeeze-and-excitation (EfficientNet)
        s = jax.nn.sigmoid(dense(b["se"]["up"], jax.nn.silu(dense(b["se"]["down"], y.mean((1, 2))))))
        y = y * s[:, None, None, :]
    y = batch_norm(b["n3"], conv(b["project"], y))
    return y + x if stride == 1 and x.shape == y.shape else y


def _mobilenet_apply(p: Params, x: Any, strides=(2, 2, 1), act: Callable = jax.nn.relu6) -> Any:
    x = act(batch_norm(p["stem_bn"], conv(p["stem"], x)))
    for i, stride in enumerate(strides):
        x = _inverted_residual(p[f"b{i}"], x, stride, act)
    return dense(p["head"], x.mean((1, 2)))


# ------------------------------------------------------- EfficientNet (Tan & Le 2019)

def _efficientnet_init(seed: int) -> Params:
    p = _mobilenet_init(seed, blocks=((16, 24, 2), (24, 40, 2), (40, 40, 1)), expand=4)
    keys = _Keys(seed + 1)
    for i, hidden in enumerate((64, 96, 160)):
        p[f"b{i}"]["se"] = {"down": _dense(keys, hidden, hidden // 4),
                            "up": _dense(keys, hidden // 4, hidden)}
    return p


def _efficientnet_apply(p: Params, x: Any) -> Any:
    return _mobilenet_apply(p, x, act=jax.nn.silu)


# ------------------------------------------------ Transformer layers (Vaswani; BERT; GPT-2)

def _attention_init(keys: _Keys, width: int, ffn: int) -> Params:
    return {"qkv": _dense(keys, width, 3 * width), "out": _dense(keys, width, width),
            "ln1": _norm(width), "ln2": _norm(width),
            "up": _dense(keys, width, ffn), "down": _dense(keys, ffn, width)}


def _self_attention(p: Params, x: Any, heads: int, causal: bool) -> Any:
    b, t, d = x.shape
    q, k, v = jnp.split(dense(p["qkv"], x), 3, axis=-1)
    split = lambda a: a.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(q), split(k), split(v)
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d // heads)
    if causal:
        scores = jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, -1e9)
    y = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, -1), v)
    return dense(p["out"], y.transpose(0, 2, 1, 3).reshape(b, t, d))


def _post_ln_layer(p: Params, x: Any, heads: int = 4) -> Any:
    """BERT: post-norm, GELU feed-forward."""
    x = layer_norm(p["ln1"], x + _self_attention(p, x, heads, causal=False))
    return layer_norm(p["ln2"], x + dense(p["down"], jax.nn.gelu(dense(p["up"], x))))


def _pre_ln_layer(p: Params, x: Any, heads: int = 4, causal: bool = True) -> Any:
    """GPT-2 / ViT: pre-norm."""
    x = x + _self_attention(p, layer_norm(p["ln1"], x), heads, causal)
    return x + dense(p["down"], jax.nn.gelu(dense(p["up"], layer_norm(p["ln2"], x))))


def _encoder_init(seed: int, width: int = 128, ffn: int = 512, classes: int = 10) -> Params:
    keys = _Keys(seed)
    return {"layer": _attention_init(keys, width, ffn), "head": _dense(keys, width, classes)}


def _bert_apply(p: Params, x: Any) -> Any:
    return dense(p["head"], _post_ln_layer(p["layer"], x)[:, 0])


def _gpt2_apply(p: Params, x: Any) -> Any:
    return dense(p["head"], _pre_ln_layer(p["layer"], x)[:, -1])


# ------------------------------------------------------- ViT (Dosovitskiy et al. 2021)

def _vit_init(seed: int, patch: int = 4, width: int = 128, classes: int = 10) -> Params:
    keys = _Keys(seed)
    return {"embed": _conv(keys, patch, patch, 3, width), "pos": np.zeros((64, width), np.float32),
            "layer": _attention_init(keys, width, 2 * width), "ln": _norm(width),
            "head": _dense(keys, width, classes)}


def _vit_apply(p: Params, x: Any) -> Any:
    patches = conv(p["embed"], x, stride=4, padding="VALID")  # 32×32 → 8×8 patches
    b, h, w, d = patches.shape
    tokens = patches.reshape(b, h * w, d) + p["pos"]
    y = _pre_ln_layer(p["layer"], tokens, causal=False)
    return dense(p["head"], layer_norm(p["ln"], y).mean(1))


# --------------------------------------------------- MLP-Mixer (Tolstikhin et al. 2021)

def _mixer_init(seed: int, tokens: int = 64, width: int = 128, classes: int = 10) -> Params:
    keys = _Keys(seed)
    p: Params = {"embed": _conv(keys, 4, 4, 3, width), "head": _dense(keys, width, classes)}
    for i in range(2):
        p[f"m{i}"] = {"ln1": _norm(width), "tok1": _dense(keys, tokens, 2 * tokens),
                      "tok2": _dense(keys, 2 * tokens, tokens), "ln2": _norm(width),
                      "ch1": _dense(keys, width, 2 * width), "ch2": _dense(keys, 2 * width, width)}
    return p


def _mixer_apply(p: Params, x: Any) -> Any:
    x = conv(p["embed"], x, stride=4, padding="VALID")
    b, h, w, d = x.shape
    x = x.reshape(b, h * w, d)
    for i in range(2):
        m = p[f"m{i}"]
        y = layer_norm(m["ln1"], x).transpose(0, 2, 1)
        x = x + dense(m["tok2"], jax.nn.gelu(dense(m["tok1"], y))).transpose(0, 2, 1)
        x = x + dense(m["ch2"], jax.nn.gelu(dense(m["ch1"], layer_norm(m["ln2"], x))))
    return dense(p["head"], x.mean(1))


# ------------------------------------------------------ UNet (Ronneberger et al. 2015)

def _unet_init(seed: int, c: int = 16) -> Params:
    keys = _Keys(seed)
    return {"d1": _conv(keys, 3, 3, 3, c), "d2": _conv(keys, 3, 3, c, 2 * c),
            "mid": _conv(keys, 3, 3, 2 * c, 2 * c), "up": _conv(keys, 2, 2, 2 * c, c),
            "u1": _conv(keys, 3, 3, 2 * c, c), "out": _conv(keys, 1, 1, c, 1)}


def _unet_apply(p: Params, x: Any) -> Any:
    skip = jax.nn.relu(conv(p["d1"], x))
    y = lax.reduce_window(skip, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    y = jax.nn.relu(conv(p["mid"], jax.nn.relu(conv(p["d2"], y))))
    y = lax.conv_transpose(y, p["up"]["w"], (2, 2), "SAME", dimension_numbers=DIMS)
    y = jax.nn.relu(conv(p["u1"], jnp.concatenate([y, skip], -1)))
    return conv(p["out"], y)[..., 0]


def _unet_batch(seed: int) -> Tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((2, 32, 32, 3), dtype=np.float32),
            rng.standard_normal((2, 32, 32), dtype=np.float32))


# --------------------------------------------------- LSTM (Hochreiter & Schmidhuber 1997)

def _lstm_init(seed: int, inputs: int = 64, hidden: int = 128, classes: int = 10) -> Params:
    keys = _Keys(seed)
    return {"x": _dense(keys, inputs, 4 * hidden), "h": _dense(keys, hidden, 4 * hidden),
            "head": _dense(keys, hidden, classes)}


def _lstm_apply(p: Params, x: Any) -> Any:
    hidden = p["h"]["w"].shape[0]
    gates_x = dense(p["x"], x).transpose(1, 0, 2)  # time-major for the scan

    def step(carry, gx):
        h, c = carry
        i, f, g, o = jnp.split(gx + h @ p["h"]["w"], 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    zeros = jnp.zeros((x.shape[0], hidden))
    (h, _), _ = lax.scan(step, (zeros, zeros), gates_x)
    return dense(p["head"], h)


# ----------------------------------------------------- DLRM (Naumov et al. 2019)

def _dlrm_init(seed: int, tables: int = 4, rows: int = 1000, dim: int = 32) -> Params:
    keys = _Keys(seed)
    return {"tables": keys.normal((tables, rows, dim)) * 0.01,
            "bot1": _dense(keys, 16, 64), "bot2": _dense(keys, 64, dim),
            "top1": _dense(keys, dim + (tables + 1) * tables // 2, 128),
            "top2": _dense(keys, 128, 2)}


def _dlrm_apply(p: Params, x: Any) -> Any:
    dense_x, ids = x[:, :16], x[:, 16:].astype(jnp.int32)
    bottom = dense(p["bot2"], jax.nn.relu(dense(p["bot1"], dense_x)))
    tables = p["tables"].shape[0]
    embedded = jnp.stack([p["tables"][t][ids[:, t]] for t in range(tables)], 1)
    features = jnp.concatenate([bottom[:, None], embedded], 1)
    interactions = jnp.einsum("bid,bjd->bij", features, features)
    upper = jnp.triu_indices(tables + 1, 1)
    z = jnp.concatenate([bottom, interactions[:, upper[0], upper[1]]], -1)
    return dense(p["top2"], jax.nn.relu(dense(p["top1"], z)))


def _dlrm_batch(seed: int, batch: int = 128) -> Tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 1000, (batch, 4)).astype(np.float32)
    return (np.concatenate([rng.standard_normal((batch, 16), dtype=np.float32), ids], -1),
            rng.integers(0, 2, batch).astype(np.int32))


# ----------------------------------------------------------------- MLP

def _mlp_init(seed: int, sizes=(1024, 512, 256, 10)) -> Params:
    keys = _Keys(seed)
    return {f"l{i}": _dense(keys, a, b) for i, (a, b) in enumerate(zip(sizes, sizes[1:]))}


def _mlp_apply(p: Params, x: Any) -> Any:
    for i in range(len(p)):
        x = dense(p[f"l{i}"], x)
        x = jnp.tanh(x) if i < len(p) - 1 else x
    return x


# ---------------------------------------------------- WaveNet (van den Oord et al. 2016)

def _wavenet_init(seed: int, channels: int = 32, layers: int = 4) -> Params:
    keys = _Keys(seed)
    p: Params = {"in": _conv(keys, 1, 1, 1, channels), "out": _dense(keys, channels, 10)}
    for i in range(layers):
        p[f"l{i}"] = {"filter": _conv(keys, 1, 2, channels, channels),
                      "gate": _conv(keys, 1, 2, channels, channels),
                      "res": _conv(keys, 1, 1, channels, channels)}
    return p


def _wavenet_apply(p: Params, x: Any) -> Any:
    """Dilated causal 1-D convolutions (as 1×k 2-D ones) with gated activations."""
    y = conv(p["in"], x[:, None, :, None])
    for i in range(len(p) - 2):
        layer, dilation = p[f"l{i}"], 2 ** i
        padded = jnp.pad(y, ((0, 0), (0, 0), (dilation, 0), (0, 0)))
        z = (jnp.tanh(conv(layer["filter"], padded, dilation=dilation, padding="VALID"))
             * jax.nn.sigmoid(conv(layer["gate"], padded, dilation=dilation, padding="VALID")))
        y = y + conv(layer["res"], z)
    return dense(p["out"], y.mean((1, 2)))


def _wave_batch(seed: int) -> Tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((8, 1024), dtype=np.float32),
            rng.integers(0, 10, 8).astype(np.int32))


MODELS: Dict[str, Model] = {m.name: m for m in (
    Model("resnet", "resnet", _resnet_init, _resnet_apply, _images(4, 32, 3, 10)),
    Model("mobilenet_v2", "mobilenet", _mobilenet_init, _mobilenet_apply, _images(4, 32, 3, 10)),
    Model("efficientnet", "efficientnet", _efficientnet_init, _efficientnet_apply,
          _images(4, 32, 3, 10)),
    Model("bert_layer", "bert", _encoder_init, _bert_apply, _tokens(4, 64, 128, 10)),
    Model("gpt2_layer", "gpt2", _encoder_init, _gpt2_apply, _tokens(4, 64, 128, 10)),
    Model("vit_block", "vit", _vit_init, _vit_apply, _images(4, 32, 3, 10)),
    Model("mlp_mixer", "mixer", _mixer_init, _mixer_apply, _images(4, 32, 3, 10)),
    Model("unet_block", "unet", _unet_init, _unet_apply, _unet_batch, loss="mse"),
    Model("lstm", "lstm", _lstm_init, _lstm_apply, _tokens(8, 32, 64, 10)),
    Model("dlrm", "dlrm", _dlrm_init, _dlrm_apply, _dlrm_batch),
    Model("mlp", "mlp", _mlp_init, _mlp_apply, _vectors(256, 1024, 10)),
    Model("wavenet", "wavenet", _wavenet_init, _wavenet_apply, _wave_batch),
)}
