"""`python -m extract.hlo`: XLA HLO modules → TpuGraphs npz files; `from_jax(f, *args)` from
Python (the code: extract/xla/convert_hlo.py)."""
import sys

from extract.xla.convert_hlo import from_jax, main  # noqa: F401  (from_jax: the Python entry point)

if __name__ == "__main__":
    sys.exit(main())
