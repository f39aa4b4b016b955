"""BERT encoder layers (Devlin et al., "BERT: Pre-training of Deep Bidirectional
Transformers for Language Understanding", 2019, Section 3): GELU feed-forward of 4× the
hidden width, LayerNorm after each residual (post-norm, eps 1e-12).

* BERT-base: hidden 768, 12 heads, FFN 3072, sequence length 128.
* BERT-large: hidden 1024, 16 heads, FFN 4096, sequence length 384 (the SQuAD setting of
  the paper's Section 4.2).

One layer is enough: a BERT's layers are identical, so they give the same tuning tasks,
L times the weight (the task weights here are per layer).
"""
from __future__ import annotations

from .transformer import TransformerLayer

INPUT_SHAPE = (1, 128, 768)
LARGE_INPUT_SHAPE = (1, 384, 1024)


def BertLayer() -> TransformerLayer:  # noqa: N802 - a constructor, named like the class it builds
    return TransformerLayer(hidden=768, heads=12, ffn=3072, pre_norm=False, eps=1e-12)


def BertLargeLayer() -> TransformerLayer:  # noqa: N802 - a constructor, named like the class it builds
    return TransformerLayer(hidden=1024, heads=16, ffn=4096, pre_norm=False, eps=1e-12)
