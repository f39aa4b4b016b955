"""The cost models judged on the measured XLA layout collection (`extract.xla_collect`).

    python -m benchmarks.xla_layout [--xla-root ROOT] [--xla-models gcn-early gcn-late sage-early sage-late
        config-mlp layout-sum xgb] [--xla-seeds 0 1 2] [--xla-epochs 100] [--xla-families FAMILY ...]
        [--xla-holdout family programs] [--runs runs/bench]
        [--results docs/results] [--parallel 1]

ROOT is a collection root (`ROOT/npz/layout/xla/{random,default}/<split>/*.npz`,
`ROOT/measurements/<program>.{plan.json,jsonl}`; docs/xla_collection.md); default: the
shipped `datasets/xla_layout_<cpu>` with the most programs. Two protocols (`--xla-holdout`,
both by default), each fold scoring its held-out programs, another fold's choosing each
model's epoch (`layout-sum` keeps its last: `--keep-weights last`, its own default), the
rest training it, every one of `--xla-epochs` (no early stop: a patience of 15 epochs stopped
most runs before their best, docs/xla_collection.md); every program is scored once (the
collection's own train/valid/test folders are not used):

* `family`: leave one model family out (a program's family is in its plan.json), every
  family in turn (`--xla-families` holds out only those), the next family (alphabetically,
  cyclic) validating: programs scored by models that never saw their family;
* `programs`: leave programs out, `PROGRAM_FOLDS` folds of programs dealt in turn by family,
  so no fold holds two programs of one family, the fold half-way round validating: a program
  is scored by models that trained on the other steps of its model (its inference step, say,
  when its training step is held out).

Per protocol, search (`random`, `default`) and program:

* Kendall τ (TpuGraphs' layout metric) and top-1 / top-5 slowdown (the best measured
  runtime among the model's k first configs against the program's best), mean ± std over
  `--xla-seeds`;
* the noise ceiling: τ between the collector's two measuring passes over the search's
  re-measured configs (`extract.xla.collection.collect.summarize`), and the model's τ as a
  share of it;
* XLA's default layout (config `""`, nothing constrained, in both searches): its slowdown
  against the best, whether some measured layout beats it by more than `GOAL_MARGIN`, and
  whether the model's first pick beats it (the collection's goal: on how many programs a
  model finds a layout faster than XLA's own).

Models (`MODEL_SPECS`): graph networks through the TpuGraphs path (`gcn`, `sage`, config
features joined early onto the configurable nodes or late at the pooled embedding), the
configuration-only `config-mlp` (no graph), `layout-sum` (a sum of per-configurable-node
terms, each reading the node's features, its neighbours' opcodes, its layout and the roles
of the config's other configurable nodes; pairwise hinge, what it was screened with; an
ensemble of its default `--members`) and `xgb` on the opcode histogram + pooled layout
features (simulator/models/xgb.py), each with the TpuGraphs layout defaults of
`simulator.train` (loss listmle, batch 2 graphs × 8 configs; xgb: rank:pairwise on every
measured config of the whole graph); beside them `minor-dim-rule`, which learns nothing
(benchmarks/layout_rule.py: the elements whose most-minor dimension a config moves off XLA's
choice). Each fold's root is RUNS/xla_layout/folds/<fold> (links to the collection's
files; a fold is named by its family, or `programs<i>of<k>`); runs go to
RUNS/xla_layout/<fold>-<search>-<model>-seed<S> (a finished run with the same command line,
trained on the same collection — `collection_digest` — is reused, from its folder or from
those kept in RESULTS/xla_layout_runs); results to RESULTS/xla_layout.json and .csv (`family`),
RESULTS/xla_layout_programs.json and .csv (`programs`), and a section of docs/RESULTS.md
each (`report_section`, through benchmarks.report).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from .common import (COUNT, SEED, add_run_options, cli, files_digest, finite_or_null, fmt, log, markdown_table,
                     mean_std, run_and_report, run_many, train_argv, write_csv, write_json)
from .kept_runs import KEPT_SUFFIX
from .layout_rule import RULE_NAME, rule_metrics

SEARCHES = ("random", "default")
METRICS = ["kendall_tau", "top1_slowdown", "top5_slowdown"]
MODEL_SPECS = {
    "gcn-early": ["--model", "gcn", "--join", "early"],
    "gcn-late": ["--model", "gcn", "--join", "late"],
    "sage-early": ["--model", "sage", "--join", "early"],
    "sage-late": ["--model", "sage", "--join", "late"],
    "config-mlp": ["--model", "config-mlp"],
    "layout-sum": ["--model", "layout-sum", "--loss", "pairwise-hinge"],
    # every measured config of each graph, the graph whole (its opcode histogram is the program's)
    "xgb": ["--model", "xgb", "--configs-per-graph", "1000000", "--keep-hops", "-1"],
}
XLA_DEFAULT = ""          # the config key of XLA's own layouts (nothing constrained)
GOAL_MARGIN = 0.05        # "a measured layout beats XLA's default": by more than this share
# the npz holds runtimes rounded to whole ns, the measurements seconds: equal within this share
SAME_RUNTIME = 1e-6
RESULT_NAME = "xla_layout"
HOLDOUTS = ("family", "programs")   # what a fold holds out: one model family, or programs
PROGRAM_FOLDS = 6                   # `programs`: folds of about a sixth of the programs each
SHIPPED_PREFIX = "xla_layout_"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--xla-root", default=None,
                    help="a measured layout collection (default: the shipped datasets/xla_layout_<cpu>)")
    ap.add_argument("--xla-models", nargs="+", choices=list(MODEL_SPECS), default=list(MODEL_SPECS))
    ap.add_argument("--xla-seeds", nargs="+", type=SEED, default=[0, 1, 2])
    ap.add_argument("--xla-epochs", type=COUNT, default=100)
    ap.add_argument("--xla-families", nargs="+", default=None, metavar="FAMILY",
                    help="hold out only these model families (default: every family in turn; "
                         "the `family` protocol only)")
    ap.add_argument("--xla-holdout", nargs="+", choices=HOLDOUTS, default=list(HOLDOUTS),
                    help="what a fold holds out: a model family, or programs, never two of one family "
                         "(default: both, each its own results)")


# ---------------------------------------------------------------- the collection
def shipped_root() -> Optional[Path]:
    """The shipped collection with the most measured programs (`datasets/xla_layout_<cpu>`), or None."""
    import datasets

    here = Path(datasets.__file__).parent
    found = [p for p in here.glob(SHIPPED_PREFIX + "*") if (p / "measurements").is_dir()]
    return max(found, key=lambda p: (len(list((p / "measurements").glob("*.plan.json"))), p.name), default=None)


def root_of(args) -> Optional[str]:
    """`--xla-root`, else the shipped collection (a relative path), else None."""
    if args.xla_root is not None:
        return args.xla_root
    found = shipped_root()
    return None if found is None else os.path.relpath(found)


def search_programs(root: Path, search: str) -> List[str]:
    """The programs (npz file stems) of one search, over all of its split folders; none is a
    one-line error naming the search's folder."""
    folder = root / "npz" / "layout" / "xla" / search
    names = sorted({p.name[:-len(".npz")] for p in folder.glob("*/*.npz")}) if folder.is_dir() else []
    if not names:
        raise SystemExit(f"{folder}: no measured program (an unfinished collection may have none yet)")
    return names


def npz_path(root: Path, search: str, program: str) -> Path:
    found = sorted((root / "npz" / "layout" / "xla" / search).glob(f"*/{program}.npz"))
    if len(found) != 1:
        raise SystemExit(f"{root}: {program}.npz of search {search} is in {len(found)} split folders (needs one)")
    return found[0]


def program_facts(root: Path, program: str, search: str) -> Dict[str, Any]:
    """One program's search from its measurements: its model family, XLA's default against the
    best measured config, and the noise ceiling (the collector's `summarize` over the search's
    configs)."""
    from extract.metaschedule.jsonl import read_jsonl
    from extract.xla.collection.collect import measurements_file, npz_config_keys, results, summarize

    plan_path = root / "measurements" / f"{program}.plan.json"
    if not plan_path.is_file():
        raise SystemExit(f"{plan_path}: missing (the npz files of {program} have no measurements beside them)")
    saved = json.loads(plan_path.read_text())
    if not saved.get("family"):
        raise SystemExit(f"{plan_path}: no model family (the collector writes one; the benchmark holds out "
                         f"whole families)")
    keys = set(saved["configs"][search])
    rows = [r for r in results(read_jsonl(str(measurements_file(plan_path.parent, program)))) if r["config"] in keys]
    noise = summarize(saved, rows)
    first = {r["config"]: r["runtime_s"] for r in rows if r["pass"] == 1 and "error" not in r}
    best = min(first.values()) if first else None
    default = first.get(XLA_DEFAULT)
    slowdown = None if default is None or not best else default / best - 1.0
    in_npz = npz_config_keys(saved, rows, search)
    return {"family": saved["family"], "configs": len(first), "best_ms": None if best is None else 1e3 * best,
            "default_row": in_npz.index(XLA_DEFAULT) if XLA_DEFAULT in in_npz else None,
            "default_ms": None if default is None else 1e3 * default, "default_slowdown": slowdown,
            "beats_default": None if slowdown is None else slowdown > GOAL_MARGIN,
            "ceiling_tau": noise.get("noise_tau"), "ceiling_pairs": noise.get("remeasured", 0),
            "noise_rel": noise.get("noise_rel")}


def collection_digest(root: Path) -> str:
    """The digest of the collection's npz files (`benchmarks.common.files_digest`): what
    every fold trains on. A collection measured again (or topped up) has another digest, and
    every run of the benchmark is trained again (`benchmarks.common.run_training`'s `data`)."""
    return files_digest(str(root), [str(p) for p in (root / "npz").rglob("*.npz")])


def collection_facts(root: Path) -> Dict[str, Any]:
    """Per search: the facts of every program."""
    return {search: {"programs": {p: program_facts(root, p, search) for p in search_programs(root, search)}}
            for search in SEARCHES}


# ---------------------------------------------------------------- the folds
def families_of(facts: Dict[str, Any]) -> Dict[str, str]:
    """{program: its model family} over both searches."""
    return {p: f["family"] for search in facts.values() for p, f in search["programs"].items()}


def folds(facts: Dict[str, Any], held: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """Leave one model family out: per held-out family (`held`, default every one), the next
    family in alphabetical order (cyclic) validates; the rest train. A fold: its name ("test"),
    its validating family ("valid") and the programs of both ("programs")."""
    family = families_of(facts)
    families = sorted(set(family.values()))
    if len(families) < 3:
        raise SystemExit(f"the collection has programs of {len(families)} model families; leaving one out needs "
                         f"at least 3 (one held out, one to validate on, the rest to train on)")
    unknown = sorted(set(held or ()) - set(families))
    if unknown:
        raise SystemExit(f"--xla-families: {', '.join(unknown)} not in the collection ({', '.join(families)})")
    members = {f: sorted(p for p in family if family[p] == f) for f in families}
    valid = {f: families[(i + 1) % len(families)] for i, f in enumerate(families)}
    return [{"test": f, "valid": valid[f], "programs": {"test": members[f], "valid": members[valid[f]]}}
            for f in families if held is None or f in held]


def program_folds(facts: Dict[str, Any], count: int = PROGRAM_FOLDS) -> List[Dict[str, Any]]:
    """Leave programs out: the programs, ordered by family, dealt in turn into `count` folds
    (fewer with fewer programs), so a family's programs fall in consecutive folds, one each;
    fold i is scored and the fold half-way round, i + count // 2 (cyclic), validates, so the
    siblings of a held-out program train (for families of up to count // 2 programs)."""
    family = families_of(facts)
    order = sorted(family, key=lambda p: (family[p], p))
    count = min(count, len(order))
    if count < 3:
        raise SystemExit(f"the collection has {len(order)} programs; leaving programs out needs at least 3")
    dealt = [order[i::count] for i in range(count)]
    valid = [(i + count // 2) % count for i in range(count)]
    return [{"test": f"programs{i + 1}of{count}", "valid": f"programs{valid[i] + 1}of{count}",
             "programs": {"test": dealt[i], "valid": dealt[valid[i]]}} for i in range(count)]


def fold_links(root: Path, facts: Dict[str, Any], fold: Dict[str, Any]) -> Dict[str, Path]:
    """{path in the fold's root: the collection's npz file it links to}."""
    out = {}
    for search, found in facts.items():
        for program, f in found["programs"].items():
            split = next((s for s in ("test", "valid") if program in fold["programs"][s]), "train")
            out[f"npz/layout/xla/{search}/{split}/{program}.npz"] = npz_path(root, search, program).resolve()
    return out


def fold_root(runs: str, root: Path, facts: Dict[str, Any], fold: Dict[str, Any]) -> Path:
    """A layout collection root for one fold, RUNS/xla_layout/folds/<fold's name>: its
    npz/…/{train,valid,test} folders hold links to the collection's files, by the fold's
    programs (`fold_links`). Kept when
    it already holds exactly these links, else built beside it and swapped in."""
    import shutil
    import tempfile

    out = Path(runs) / "xla_layout" / "folds" / fold["test"]
    links = fold_links(root, facts, fold)
    if out.is_dir() and {str(p.relative_to(out)): p.resolve() for p in out.rglob("*.npz")} == links:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{fold['test']}.", dir=out.parent))
    for rel, target in links.items():
        (fresh / rel).parent.mkdir(parents=True, exist_ok=True)
        (fresh / rel).symlink_to(target)
    if out.exists():
        shutil.rmtree(out)
    fresh.rename(out)
    return out


# ---------------------------------------------------------------- training runs
def jobs(args, facts: Dict[str, Any], chosen: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One training run per (fold of `chosen`, search, model, seed)."""
    runs = os.path.join(args.runs, "xla_layout")
    data = collection_digest(Path(args.xla_root))
    out = []
    for fold in chosen:
        data_root = fold_root(args.runs, Path(args.xla_root), facts, fold)
        for seed in args.xla_seeds:
            for search in SEARCHES:
                for model in args.xla_models:
                    folder = os.path.join(runs, f"{fold['test']}-{search}-{model}-seed{seed}")
                    spec = MODEL_SPECS[model]
                    argv = train_argv(spec[1], seed, folder, [f"tpugraphs:layout:xla:{search}"], args.xla_epochs,
                                      extra=[*spec[2:], "--patience", str(args.xla_epochs),
                                             "--data-root", str(data_root)])
                    out.append({"fold": fold["test"], "held": fold["programs"]["test"], "search": search,
                                "model": model, "seed": seed, "out": folder, "argv": argv, "data": data})
    return out


def run_rows(results: Sequence[Dict[str, Any]], facts: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One row per (run, program it held out): its metrics, and whether its first pick beats
    XLA's default."""
    rows = []
    for r in results:
        test = r["metrics"].get("test", {})
        for name, program in facts[r["search"]]["programs"].items():
            if name not in r["held"]:
                continue
            values = {m: finite_or_null(test.get(m, {}).get("per_workload", {}).get(name)) for m in METRICS}
            rows.append({"search": r["search"], "model": r["model"], "seed": r["seed"], "program": name,
                         "family": program["family"], **values,
                         "pick_beats_default": pick_beats_default(values["top1_slowdown"], program["default_slowdown"]),
                         "command": "python -m simulator.train " + " ".join(r["argv"])})
    return rows


def rule_rows(root: Path, facts: Dict[str, Any], held: Sequence[str]) -> List[Dict[str, Any]]:
    """The no-learning reference (`layout_rule`) on every held-out program (`held`),
    in `run_rows`' form (no seed: it is deterministic); programs without XLA's own config
    measured are left out."""
    rows = []
    for search, found in facts.items():
        for name, program in found["programs"].items():
            if name not in held or program["default_row"] is None:
                continue
            values = {m: finite_or_null(v) for m, v in
                      rule_metrics(npz_path(root, search, name), program["default_row"], METRICS).items()}
            rows.append({"search": search, "model": RULE_NAME, "seed": None, "program": name,
                         "family": program["family"], **values,
                         "pick_beats_default": pick_beats_default(values["top1_slowdown"], program["default_slowdown"]),
                         "command": None})
    return rows


def pick_beats_default(top1_slowdown: Optional[float], default_slowdown: Optional[float]) -> Optional[bool]:
    """Whether the model's first pick ran faster than XLA's default (both against the same best
    runtime; the same config measured once counts as equal): None without both numbers."""
    if top1_slowdown is None or default_slowdown is None:
        return None
    return 1.0 + top1_slowdown < (1.0 + default_slowdown) * (1.0 - SAME_RUNTIME)


# ---------------------------------------------------------------- tables
def program_means(rows: Sequence[Dict[str, Any]], facts: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Per (search, program, model): each metric's (mean, std, seeds) and τ as a share of the ceiling."""
    groups: Dict[tuple, List[Dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["search"], r["program"], r["model"]), []).append(r)
    out = []
    for (search, program, model), rs in groups.items():
        stats = {m: mean_std(r[m] for r in rs) for m in METRICS}
        ceiling = facts[search]["programs"][program]["ceiling_tau"]
        tau = stats["kendall_tau"][0]
        share = tau / ceiling if tau is not None and ceiling is not None and ceiling > 0 else None
        out.append({"search": search, "program": program, "model": model, "family": rs[0]["family"],
                    **stats, "tau_of_ceiling": share})
    return out


def goal_counts(rows: Sequence[Dict[str, Any]], facts: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Per (search, model, seed): held-out programs where some measured layout beats XLA's
    default by > GOAL_MARGIN, and of those, where the model's first pick beats the default."""
    out: Dict[tuple, Dict[str, Any]] = {}
    for r in rows:
        program = facts[r["search"]]["programs"][r["program"]]
        key = (r["search"], r["model"], r["seed"])
        row = out.setdefault(key, dict(zip(("search", "model", "seed"), key), beatable=0, picked=0))
        if program["beats_default"]:
            row["beatable"] += 1
            row["picked"] += int(bool(r["pick_beats_default"]))
    return list(out.values())


def run(args) -> List[Dict[str, Any]]:
    """Every protocol of `--xla-holdout` in turn: their results."""
    root = Path(args.xla_root)
    if not (root / "measurements").is_dir():
        raise SystemExit(f"{root}: not a measured layout collection (no measurements/ folder; "
                         f"python -m extract.xla_collect makes one)")
    facts = collection_facts(root)
    return [run_holdout(args, root, facts, holdout) for holdout in args.xla_holdout]


def result_name(holdout: str) -> str:
    return RESULT_NAME if holdout == "family" else f"{RESULT_NAME}_{holdout}"


def run_holdout(args, root: Path, facts: Dict[str, Any], holdout: str) -> Dict[str, Any]:
    """One protocol's runs, rows and results files."""
    chosen = folds(facts, args.xla_families) if holdout == "family" else program_folds(facts)
    planned = jobs(args, facts, chosen)
    log(f"xla-layout ({holdout} held out): {len(planned)} training runs on {root}")
    kept = os.path.join(args.results, RESULT_NAME + KEPT_SUFFIX)
    rows = run_rows(run_many(planned, args.parallel, args.device, kept), facts)
    rows += rule_rows(root, facts, [p for fold in chosen for p in fold["programs"]["test"]])
    out = {"root": str(args.xla_root), "facts": facts, "rows": rows, "programs": program_means(rows, facts),
           "goal": goal_counts(rows, facts), "machine": collection_machine(root),
           "protocol": {"holdout": holdout, "epochs": args.xla_epochs, "seeds": list(args.xla_seeds),
                        "models": list(args.xla_models), "folds": chosen, "goal_margin": GOAL_MARGIN}}
    os.makedirs(args.results, exist_ok=True)
    write_json(os.path.join(args.results, f"{result_name(holdout)}.json"), out)
    columns = ["search", "family", "program", "model", "seed", *METRICS, "pick_beats_default"]
    write_csv(os.path.join(args.results, f"{result_name(holdout)}.csv"), columns,
              [[r[k] for k in columns] for r in rows])
    return out


def collection_machine(root: Path) -> Optional[Dict[str, Any]]:
    """The machine of the collection's last run (`runs.jsonl`), or None without one."""
    from extract.metaschedule.jsonl import read_jsonl

    path = root / "runs.jsonl"
    runs = read_jsonl(str(path)) if path.is_file() else []
    return runs[-1].get("machine") if runs else None


def load_results(results: str) -> List[Dict[str, Any]]:
    """The results of each protocol that has them, in `HOLDOUTS` order."""
    out = []
    for holdout in HOLDOUTS:
        path = os.path.join(results, f"{result_name(holdout)}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                out.append(json.load(f))
    return out


def holdout_of(res: Dict[str, Any]) -> str:
    return res["protocol"].get("holdout", "family")   # results made before the second protocol


def out_of_date(res: Dict[str, Any]) -> bool:
    """Whether the collection at the results' root, where it still is, now gives other facts
    (programs, configs, runtimes, ceilings) than those the results were computed on: it was
    measured again or changed since."""
    root = Path(res["root"])
    if not (root / "measurements").is_dir():
        return False
    return json.loads(json.dumps(collection_facts(root))) != res["facts"]


# ---------------------------------------------------------------- report
def _cell(stat: Sequence[Any], metric: str) -> str:
    mean, std, n = stat
    return fmt(mean, metric, std if n > 1 else None)


def _share(value: Optional[float]) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def _model_cell(row: Optional[Dict[str, Any]]) -> str:
    """τ (share of the ceiling); top-1 / top-5 slowdown."""
    if row is None:
        return "–"
    return (f"{_cell(row['kendall_tau'], 'kendall_tau')} ({_share(row['tau_of_ceiling'])}); "
            + " / ".join(_cell(row[k], k) for k in ("top1_slowdown", "top5_slowdown")))


def overall_means(means: Sequence[Dict[str, Any]], model: str, facts: Dict[str, Dict[str, Any]],
                  programs: Optional[Sequence[str]] = None) -> Optional[Dict[str, Any]]:
    """A model's mean over the held-out programs (`programs`, default all; each program's value a
    mean over seeds; programs without a value left out), in a program row's form; None without
    any. Its share of the ceiling is the ratio of the means over the programs with a positive
    ceiling (a mean of per-program shares would let a near-zero ceiling dominate)."""
    mine = [r for r in means if r["model"] == model and (programs is None or r["program"] in programs)]
    if not mine:
        return None
    out = {k: (mean_std(r[k][0] for r in mine)[0], None, 1) for k in METRICS}
    ceiled = [(r["kendall_tau"][0], facts[r["program"]]["ceiling_tau"]) for r in mine
              if r["kendall_tau"][0] is not None and (facts[r["program"]]["ceiling_tau"] or 0) > 0]
    out["tau_of_ceiling"] = (sum(t for t, _ in ceiled) / sum(c for _, c in ceiled)) if ceiled else None
    return out


def _mean_row(label: str, chosen: Dict[str, Dict[str, Any]], means, models) -> List[Any]:
    return ([label, "", len(chosen), fmt(mean_std(c["ceiling_tau"] for c in chosen.values())[0], "kendall_tau"),
             fmt(mean_std(c["default_slowdown"] for c in chosen.values())[0], "top1_slowdown")]
            + [_model_cell(overall_means(means, m, chosen, list(chosen))) for m in models])


def _program_table(res: Dict[str, Any], search: str) -> List[str]:
    """One row per program of a search (by family), then the means over all of them and over
    those where some layout beats XLA's default: ceiling, XLA's default, and per model τ (share
    of the ceiling); top-1 / top-5 slowdown."""
    means = [r for r in res["programs"] if r["search"] == search]
    models = list(dict.fromkeys(r["model"] for r in means))
    facts = {p: f for p, f in res["facts"][search]["programs"].items() if any(r["program"] == p for r in means)}
    order = sorted(facts, key=lambda p: (facts[p]["family"], p))
    header = ["program", "family", "configs", "ceiling τ (pairs)", "XLA default: slowdown"] + \
             [f"{m}: τ (of ceiling); top-1 / top-5" for m in models]
    body = []
    for program in order:
        f = facts[program]
        mine = {r["model"]: r for r in means if r["program"] == program}
        ceiling = f"{fmt(f['ceiling_tau'], 'kendall_tau')} ({f['ceiling_pairs']})"
        body.append([program, f["family"], f["configs"], ceiling, fmt(f["default_slowdown"], "top1_slowdown")]
                    + [_model_cell(mine.get(m)) for m in models])
    body.append(_mean_row("**mean**", facts, means, models))
    beatable = {p: f for p, f in facts.items() if f["beats_default"]}
    if beatable:
        body.append(_mean_row(f"**mean, default beaten by > {100 * GOAL_MARGIN:.0f}%**", beatable, means, models))
    return [markdown_table(header, body, "ll" + "r" * (len(header) - 2)), ""]


def _goal_table(res: Dict[str, Any]) -> List[str]:
    """Per model and search: on how many of the programs some layout beats XLA's default on,
    the model's first pick beats it (per seed)."""
    cells: Dict[tuple, List[Dict[str, Any]]] = {}
    for g in res["goal"]:
        cells.setdefault((g["model"], g["search"]), []).append(g)
    searches = [s for s in SEARCHES if any(key[1] == s for key in cells)]
    body = []
    for model in dict.fromkeys(m for m, _ in cells):
        row = [model]
        for search in searches:
            row.append(goal_text(cells.get((model, search), [])) or "–")
        body.append(row)
    header = ["model"] + [f"`{search}`" for search in searches]
    return [f"On how many held-out programs the model's first pick runs faster than XLA's default layout, of "
            f"those where some measured layout beats the default by more than {100 * GOAL_MARGIN:.0f}% "
            f"(one count per seed):", "", markdown_table(header, body, "l" + "r" * len(searches)), ""]


def goal_text(goal: Sequence[Dict[str, Any]]) -> str:
    """"2, 3, 3 of 4": first picks beating XLA's default per seed, of the beatable programs;
    "none beatable" where no program has a layout faster than the default by the margin."""
    if not goal:
        return ""
    if not goal[0]["beatable"]:
        return "none beatable"
    return f"{', '.join(str(g['picked']) for g in sorted(goal, key=lambda g: g['seed']))} of {goal[0]['beatable']}"


def summary_row(res: Optional[Dict[str, Any]]) -> List[List[str]]:
    """The one-screen summary's row (benchmarks.summary): per search, the model with the best
    mean τ over the held-out programs, beside their mean ceiling, and its first picks against
    XLA's default; none without results."""
    if not res:
        return []
    cells = []
    for search in SEARCHES:
        means = [r for r in res["programs"] if r["search"] == search]
        programs = res["facts"][search]["programs"]
        scored = {m: overall_means(means, m, programs) for m in dict.fromkeys(r["model"] for r in means)}
        scored = {m: v for m, v in scored.items() if v and v["kendall_tau"][0] is not None}
        rule = scored.pop(RULE_NAME, None)
        if not scored:
            continue
        best = max(scored, key=lambda m: scored[m]["kendall_tau"][0])
        held = {r["program"] for r in means}
        facts = [f for p, f in programs.items() if p in held]
        goal = [g for g in res["goal"] if (g["search"], g["model"]) == (search, best)]
        cells.append(f"`{search}`: {best} τ {fmt(scored[best]['kendall_tau'][0], 'kendall_tau')} (ceiling "
                     f"{fmt(mean_std(f['ceiling_tau'] for f in facts)[0], 'kendall_tau')}; "
                     f"{_share(scored[best]['tau_of_ceiling'])} of it), "
                     + (f"first pick beats XLA's default on {goal_text(goal)}" if any(g["beatable"] for g in goal)
                        else f"no measured layout beats XLA's default by > {100 * GOAL_MARGIN:.0f}%")
                     + (f"; {RULE_NAME} (no learning) τ {fmt(rule['kendall_tau'][0], 'kendall_tau')}" if rule else ""))
    if not cells:
        return []
    name = os.path.basename(os.path.normpath(res["root"]))
    stale = "; out of date: the collection was measured again since" if out_of_date(res) else ""
    if holdout_of(res) == "family":
        question, topic = (f"ranking layouts of XLA programs of model families never trained on (`{name}`, every "
                           f"family held out in turn, mean{stale})"), "xla_layout"
    else:
        question, topic = (f"ranking layouts of XLA programs never trained on, the other steps of their model "
                           f"trained on (`{name}`, programs held out in {len(res['protocol']['folds'])} folds, "
                           f"mean{stale})"), "xla_layout_programs"
    return [[question, "; ".join(cells), topic]]


HEADINGS = {"family": "", "programs": ", programs held out"}   # after "## Measured XLA layout collection"


def _protocol_text(holdout: str, folds_count: int) -> str:
    epoch = ("chose each model's epoch (`layout-sum`: its last epoch, an ensemble of its default `--members`), "
             "the rest trained it; so every program below is scored by models that")
    if holdout == "family":
        return (f"Leave one model family out, every family in turn ({folds_count} folds): the held-out "
                f"family's programs are scored, the next family's (alphabetically) {epoch} never saw its family.")
    return (f"Leave programs out: the programs, ordered by family, dealt in turn into {folds_count} folds, so no "
            f"fold holds two programs of one family; each fold's programs are scored, those of the fold half-way "
            f"round (whose programs' siblings train) {epoch} trained on the other step of its model (its "
            f"inference step where the training step is scored, and the other way round) but never on it.")


def report_section(res: Optional[Dict[str, Any]]) -> List[str]:
    """The section of docs/RESULTS.md (none without results)."""
    if not res:
        return []
    p, m = res["protocol"], res.get("machine") or {}
    holdout, name = holdout_of(res), os.path.basename(os.path.normpath(res["root"]))
    lines = [f"## Measured XLA layout collection{HEADINGS[holdout]} (`{name}`)", "",
             f"`python -m benchmarks.xla_layout --xla-root {res['root']} --xla-holdout {holdout}` (every command in "
             f"`docs/results/{result_name(holdout)}.json`); collection measured on {m.get('cpu', '?')} "
             f"(jax {m.get('jax', '?')}). {_protocol_text(holdout, len(p['folds']))} Seeds "
             f"{', '.join(map(str, p['seeds']))} (mean ± std), {p['epochs']} epochs. τ is Kendall's τ over a "
             f"program's measured configs; the ceiling is τ between the two measuring passes of the search's "
             f"re-measured configs (pairs in brackets), and a mean row's share of it is the ratio of the means over "
             f"the programs with a positive ceiling; top-k slowdown: the best of the model's k first configs "
             f"against the program's best; XLA's default is config 0 (nothing constrained). `{RULE_NAME}` "
             f"learns nothing: it ranks a program's configs by the elements whose most-minor dimension they move "
             f"off XLA's choice (`benchmarks/layout_rule.py`); a model has to beat it to be worth training.", ""]
    if out_of_date(res):
        lines += [f"**Out of date:** `{res['root']}` was measured again or changed after these results were "
                  f"made (its programs, configs, runtimes or ceilings differ from those below); `python -m "
                  f"benchmarks.xla_layout --xla-root {res['root']}` judges the models on it again.", ""]
    for search in SEARCHES:
        if any(r["search"] == search for r in res["programs"]):
            lines += [f"**Search `{search}`**", "", *_program_table(res, search)]
    lines += ["**Beating XLA's default layout**", "", *_goal_table(res)]
    return lines


@cli
def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.xla_layout", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    add_run_options(ap)
    args = ap.parse_args(argv)
    args.xla_root = root_of(args)
    if args.xla_root is None:
        raise SystemExit(f"no --xla-root given and no datasets/{SHIPPED_PREFIX}<cpu> collection is shipped")
    return run_and_report(args, run, lambda results: [line for res in results for line in report_section(res)])


if __name__ == "__main__":
    sys.exit(main())
