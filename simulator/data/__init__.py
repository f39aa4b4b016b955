"""Data: loading collections, the `Source` protocol and its data kinds, batching, splits,
feature sets, normalisation statistics."""
