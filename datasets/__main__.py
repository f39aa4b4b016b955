"""python -m datasets [--rebuild-shipped]: summarise the shipped dataset, or re-extract it."""
import argparse
import sys
from collections import Counter

import numpy as np

from . import SHIPPED_SAMPLES, load_shipped, rebuild_shipped_samples


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m datasets", description=__doc__)
    ap.add_argument("--rebuild-shipped", action="store_true",
                    help=f"re-extract the shipped log into {SHIPPED_SAMPLES.name}")
    args = ap.parse_args()
    if args.rebuild_shipped:
        print(f"wrote {rebuild_shipped_samples()}")
    samples = load_shipped()
    counts = Counter(s.group for s in samples)
    print(f"{'workload':<8} {'configs':>7} {'best ms':>8} {'median ms':>9} {'worst ms':>9} {'nodes':>6}")
    for group in sorted(counts, key=lambda g: (len(g), g)):
        t = np.array([s.runtimes[0] for s in samples if s.group == group]) * 1e3
        nodes = np.median([s.num_nodes for s in samples if s.group == group])
        print(f"{group:<8} {counts[group]:>7} {t.min():>8.3f} {np.median(t):>9.3f} {t.max():>9.3f} {nodes:>6.0f}")
    print(f"{'total':<8} {len(samples):>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
