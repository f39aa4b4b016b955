"""`python -m benchmarks.transfer`: the transfer matrix (`benchmarks.transfer.matrix`)."""
import sys

from .matrix import main

sys.exit(main())
