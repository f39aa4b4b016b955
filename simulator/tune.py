"""`python -m simulator.tune`: tune an operator or a network with MetaSchedule, the simulator as its
cost model (the code: simulator/metaschedule/tune.py)."""
import sys

from simulator.metaschedule.tune import main

if __name__ == "__main__":
    sys.exit(main())
