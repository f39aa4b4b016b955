"""Extractors: tensor programs and tuning logs → graph samples (A, F, G, y)."""
