"""One ViT-B/16 encoder block (Dosovitskiy et al., 2021): 197 tokens (14×14 patches of a
224² image plus the class token), hidden 768, 12 heads, MLP 3072, GELU, LayerNorm before
each sublayer (pre-norm, eps 1e-6).

Same operators as BERT's layer but pre-norm and an odd token count (197), which gives
matmul/batch_matmul shapes that do not divide evenly by vector widths.
"""
from __future__ import annotations

from .transformer import TransformerLayer

INPUT_SHAPE = (1, 197, 768)


def VitBlock() -> TransformerLayer:  # noqa: N802 - a constructor, named like the class it builds
    return TransformerLayer(hidden=768, heads=12, ffn=3072, pre_norm=True, eps=1e-6)
