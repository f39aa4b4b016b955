"""`python -m extract.xla_collect`: the measured XLA layout collection (the code:
extract/xla/collection/, its command line cli.py)."""
import sys

from extract.xla.collection.cli import main

if __name__ == "__main__":
    sys.exit(main())
