"""One GPT-2 (small) decoder block (Radford et al., "Language Models are Unsupervised
Multitask Learners", 2019, Section 2.3 and Table 2: d_model 768, 12 layers; the block is
GPT's (Radford et al., 2018, Section 4.1: 12 heads, FFN 3072, GELU) with the LayerNorm
moved to each sub-block's input). Causal self-attention over 256 tokens (a prompt being
processed), fused Q/K/V projection (768 → 2304), GELU in its tanh approximation and
LayerNorm eps 1e-5, as the released model computes them.

One block is enough: the twelve blocks are identical and give the same tuning tasks.
"""
from __future__ import annotations

from torch import nn

from .transformer import TransformerLayer

INPUT_SHAPE = (1, 256, 768)
CONTEXT = 1024   # GPT-2's longest sequence (Section 2.3)


def Gpt2Block() -> TransformerLayer:  # noqa: N802 - a constructor, named like the class it builds
    return TransformerLayer(hidden=768, heads=12, ffn=3072, pre_norm=True, eps=1e-5, causal_context=CONTEXT,
                            fused_qkv=True, activation=lambda: nn.GELU(approximate="tanh"))
