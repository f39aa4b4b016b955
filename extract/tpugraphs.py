"""`python -m extract.tpugraphs`: raw TpuGraphs protobufs → npz files, and what an npz file
holds (the code: extract/xla/convert_tpugraphs.py)."""
import sys

from extract.xla.convert_tpugraphs import main

if __name__ == "__main__":
    sys.exit(main())
