"""The models of the transfer study: named `simulator.train` command lines and ensembles.

A spec is what `--models` names in `benchmarks.transfer` (and `benchmarks.transfer.analysis`,
`benchmarks.transfer.families`, `benchmarks.networks`): the flags of one `simulator.train`
run besides data, split, seed, threads and epochs. Graph models name their feature set
(`simulator.data.features`). The specs here are those whose rows docs/RESULTS.md shows.

  gcn, mlp                  the graph models on the base columns
  gcn-inv                   the size-invariant GNN (`simulator.models.invariant`); `-listmle`: ListMLE loss,
                            `-bb…`: with `buffer_bytes`
  gcn-inv-arf…              with the accumulator's register-file fill (the derived column
                            `acc_reg_fill`); `-noext`: without the loop extents; `-lane`: with the
                            register tile's shape (`acc_lane_share`); `-max` / `-hinge`: max pooling /
                            the pairwise-hinge ranking loss
  curve-mlp, xgb            the vector baselines
  knob-xgb-…, itervar-xgb-… AutoTVM's own XGBoost models, `rank:pairwise` (`-rank`) or regression (`-reg`)

Ensembles (`ENSEMBLES`, `ens-…`): members trained alone, their per-workload standardised
predictions combined by a declared aggregation (`mean`, or `pessimistic`: the maximum).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

import numpy as np

_LANE = "invariant,+acc_reg_fill,+acc_lane_share,-loop_extent"

# name → simulator.train flags (besides data, split, seed, threads, epochs)
MODEL_SPECS: Dict[str, List[str]] = {
    "gcn": ["--model", "gcn", "--features", "base"],
    "gcn-inv": ["--model", "gcn-inv", "--features", "invariant"],
    "gcn-inv-listmle": ["--model", "gcn-inv", "--features", "invariant", "--loss", "listmle"],
    "gcn-inv-bb-listmle": ["--model", "gcn-inv", "--features", "invariant,+buffer_bytes", "--loss", "listmle"],
    "gcn-inv-arf": ["--model", "gcn-inv", "--features", "invariant,+acc_reg_fill"],
    "gcn-inv-arf-listmle": ["--model", "gcn-inv", "--features", "invariant,+acc_reg_fill", "--loss", "listmle"],
    "gcn-inv-arf-noext": ["--model", "gcn-inv", "--features", "invariant,+acc_reg_fill,-loop_extent"],
    "gcn-inv-arf-noext-lane": ["--model", "gcn-inv", "--features", _LANE],
    "gcn-inv-arf-noext-lane-max": ["--model", "gcn-inv", "--features", _LANE, "--pooling", "max"],
    "gcn-inv-arf-noext-lane-hinge": ["--model", "gcn-inv", "--features", _LANE, "--loss", "pairwise-hinge"],
    "mlp": ["--model", "mlp", "--features", "base"],
    "curve-mlp": ["--model", "curve-mlp"],
    "xgb": ["--model", "xgb", "--xgb-objective", "reg"],
    "knob-xgb-rank": ["--model", "knob-xgb", "--xgb-objective", "rank"],
    "knob-xgb-reg": ["--model", "knob-xgb", "--xgb-objective", "reg"],
    "itervar-xgb-rank": ["--model", "itervar-xgb", "--xgb-objective", "rank"],
    "itervar-xgb-reg": ["--model", "itervar-xgb", "--xgb-objective", "reg"],
}


@dataclass(frozen=True)
class Ensemble:
    """Models trained alone whose rankings are combined: on each test workload every
    member's predictions are standardised (mean 0, std 1 over that workload's configs,
    so no member's scale dominates), then aggregated per config by `aggregation`:

      mean         the members' average: a config ranks high if the members do on average.
      pessimistic  the members' maximum (the slowest standardised prediction): a config
                   ranks high only if every member ranks it high, so one member's
                   extrapolation to a config family the others call slow cannot fill
                   the top picks.
    """

    members: Tuple[str, ...]
    aggregation: str = "mean"

    def __post_init__(self) -> None:
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"unknown ensemble aggregation {self.aggregation!r} (known: {', '.join(AGGREGATIONS)})")

    def combine(self, standardised_predictions: np.ndarray) -> np.ndarray:
        """(members, configs) standardised predictions → one prediction per config."""
        return AGGREGATIONS[self.aggregation](standardised_predictions)


AGGREGATIONS: Dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "mean": lambda members: members.mean(axis=0),
    "pessimistic": lambda members: members.max(axis=0),
}
ENSEMBLES: Dict[str, Ensemble] = {
    "ens-gcn-inv+itervar-xgb": Ensemble(("gcn-inv", "itervar-xgb-reg")),
    "ens-gcn-inv-bb-listmle+itervar": Ensemble(("gcn-inv-bb-listmle", "itervar-xgb-reg")),
    "ens-pess-gcn-inv+itervar-xgb": Ensemble(("gcn-inv", "itervar-xgb-reg"), "pessimistic"),
    "ens-gcn-inv-arf-noext+itervar": Ensemble(("gcn-inv-arf-noext", "itervar-xgb-reg")),
    "ens-pess-gcn-inv-arf-noext+itervar": Ensemble(("gcn-inv-arf-noext", "itervar-xgb-reg"), "pessimistic"),
}
MODELS = list(MODEL_SPECS)
# what benchmarks.all trains on the sets of more than one workload: the best transfer specs and
# AutoTVM's baselines (every model on 2, 4 and 11 workloads would be ~20× the one-workload time)
SIZES_MODELS = ["gcn", "gcn-inv-arf-noext-lane", "gcn-inv-arf-noext", "gcn-inv", "itervar-xgb-reg", "itervar-xgb-rank",
                "knob-xgb-reg", "knob-xgb-rank"]
