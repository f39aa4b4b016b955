"""One BERT-base encoder layer (Devlin et al., 2019): hidden 768, 12 heads, FFN 3072, GELU,
LayerNorm after each residual (post-norm, eps 1e-12), sequence length 128, batch 1.

One layer is enough: BERT-base's twelve layers are identical, so they give the same tuning
tasks, twelve times the weight (the task weights here are per layer).
"""
from __future__ import annotations

from .transformer import EncoderLayer

INPUT_SHAPE = (1, 128, 768)


def BertLayer() -> EncoderLayer:  # noqa: N802 - a constructor, named like the class it builds
    return EncoderLayer(hidden=768, heads=12, ffn=3072, pre_norm=False, eps=1e-12)
