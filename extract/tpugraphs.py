"""`python -m extract.tpugraphs`: raw TpuGraphs protobufs → npz files, and what an npz file
holds (the code: extract/xla/tpugraphs_cli.py)."""
import sys

from extract.xla.tpugraphs_cli import main

if __name__ == "__main__":
    sys.exit(main())
