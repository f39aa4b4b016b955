"""`python -m extract.measure`: build and time AutoTVM template configs on this CPU or through TVM's
RPC tracker (the code: extract/autotvm/measure.py)."""
import sys

from extract.autotvm.measure import main

if __name__ == "__main__":
    sys.exit(main())
