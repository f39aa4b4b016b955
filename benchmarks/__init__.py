"""Benchmarks: figures measured in one run, reported as medians and ratios (never timed tests)."""
