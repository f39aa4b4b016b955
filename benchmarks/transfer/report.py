"""The transfer section of docs/RESULTS.md, from transfer.json (benchmarks.transfer),
transfer_analysis.json (benchmarks.transfer.analysis) and, where present,
transfer_before.json (the same matrix with the older extractor, tir-ast-v1)
and the hand-written transfer_notes.md."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from ..common import load_json, markdown_table


def _pct(v: Optional[float], digits: int = 1) -> str:
    return "–" if v is None else f"{100 * v:.{digits}f}%"


def _num(v: Optional[float]) -> str:
    return "–" if v is None else f"{v:.3f}"


def summary_table(summary: Dict[str, Dict[str, Dict[str, Any]]], ceiling: Optional[Dict[str, Any]] = None) -> str:
    """One row per model: its one-workload pairs (more training workloads: `sizes_table`); last,
    where measured, the noise ceiling's row (pass 1's own ranking against the quiet pass)."""
    header = ["model", "τ mean", "τ worst", "top-5 mean", "top-5 median", "top-5 worst", "pairs > 25%",
              "picks to within 25%: median / 90% / worst", "τ vs quiet pass", "top-5 vs quiet: mean / worst"]
    rows = []
    for model, per in summary.items():
        one = per.get("1")
        if one is None:
            continue
        rows.append([f"`{model}`", _num(one["mean_tau"]), _num(one["worst_tau"]), _pct(one["mean_top5"]),
                     _pct(one["median_top5"]), _pct(one["worst_top5"], 0),
                     f"{one['pairs_top5_over_25']}/{one['pairs']}", _picks(one), _num(one.get("quiet_mean_tau")),
                     _quiet_top5(one)])
    if ceiling:
        rows.append(["noise ceiling: pass 1's own ranking"] + ["–"] * 7
                    + [_num(ceiling["quiet_mean_tau"]), _quiet_top5(ceiling)])
    return markdown_table(header, rows)


def _picks(one: Dict[str, Any]) -> str:
    """"median / 90% / worst" picks to within 25% of the best ("–" for runs without predictions)."""
    if one.get("median_picks_to_25") is None:
        return "–"
    return " / ".join(f"{v:.0f}" if v == int(v) else f"{v:.1f}"
                      for v in (one["median_picks_to_25"], one["p90_picks_to_25"], one["worst_picks_to_25"]))


def sizes_table(summary: Dict[str, Dict[str, Dict[str, Any]]]) -> str:
    """One row per model trained on sets of more than one workload: per training-set size
    (one workload included, for reference), τ / top-5 mean / median / worst / pairs over 25%;
    "" when no model was."""
    sizes = sorted({int(s) for per in summary.values() for s in per if s != "1"})
    if not sizes:
        return ""
    rows = []
    for model, per in summary.items():
        if not any(str(k) in per for k in sizes):
            continue
        row = [f"`{model}`"]
        for k in [1] + sizes:
            s = per.get(str(k))
            row.append("–" if s is None else
                       f"{s['mean_tau']:.3f} / {_pct(s['mean_top5'])} / {_pct(s['median_top5'])} / "
                       f"{_pct(s['worst_top5'], 0)} / {s['pairs_top5_over_25']} of {s['pairs']}")
        rows.append(row)
    header = ["model"] + [f"{k} workload{'s' if k > 1 else ''}: τ / top-5 mean / median / worst / > 25%"
                          for k in [1] + sizes]
    return markdown_table(header, rows, align="l" + "r" * (len(sizes) + 1))


def read_columns(analysis: Dict[str, Any]) -> List[str]:
    """The columns the analysed model reads (an analysis written before `model_columns`
    was recorded ablated exactly those)."""
    return list(analysis.get("model_columns") or analysis.get("ablation", {}).get("summary", {}))


def _quiet_top5(row: Dict[str, Any]) -> str:
    worst = row.get("quiet_worst_top5")
    return _pct(row.get("quiet_mean_top5")) + ("" if worst is None else f" / {_pct(worst, 0)}")


def analysis_table(analysis: Dict[str, Any]) -> str:
    shift, abl = analysis["shift"], analysis.get("ablation", {}).get("summary", {})
    read = set(read_columns(analysis))
    names = sorted(shift, key=lambda n: -(shift[n]["between_share"] + shift[n]["out_of_range"]))
    rows = []
    for n in names:
        s, a = shift[n], abl.get(n, {})
        if not (s["between_share"] or s["out_of_range"] or a.get("delta_tau_own")):
            continue
        ablated = n in abl
        rows.append([n + (" *(derived)*" if n in analysis.get("derived", ()) else ""), "yes" if n in read else "no",
                     f"{s['between_share']:.2f}", f"{s['out_of_range']:.2f}", f"{s['within_rho']:+.2f}",
                     f"{a['delta_tau_own']:+.3f}" if ablated else "–",
                     f"{a['delta_tau_others']:+.3f}" if ablated else "–",
                     f"{100 * a['delta_top5_others']:+.1f}%" if ablated else "–"])
    return markdown_table(["node feature", "model reads it", "variance between workloads",
                           "test nodes outside training range", "ρ with runtime (within)", "Δτ own, ablated",
                           "Δτ others, ablated", "Δ top-5 others, ablated"], rows)


MISLEADS = 0.002  # Δτ on the other workloads above which an ablated column counts as misleading


def analysis_findings(analysis: Dict[str, Any], top: int = 4) -> Dict[str, List[str]]:
    """The analysis in a few words: the columns that shift most (variance between workloads;
    nodes outside the training range), those the model relies on most (Δτ own when
    ablated, most negative), those that mislead it (Δτ others > `MISLEADS` when ablated),
    and each derived column's rank among those relied on."""
    shift, abl = analysis["shift"], analysis.get("ablation", {}).get("summary", {})
    read = set(read_columns(analysis))
    mark = lambda n: f"`{n}`" + ("" if n in read else " (not read)")  # noqa: E731
    between = sorted(shift, key=lambda n: -shift[n]["between_share"])[:top]
    outside = sorted(shift, key=lambda n: -shift[n]["out_of_range"])[:top]
    relied = sorted((n for n in abl if abl[n]["delta_tau_own"] < 0), key=lambda n: abl[n]["delta_tau_own"])
    misleads = sorted((n for n in abl if abl[n]["delta_tau_others"] > MISLEADS), key=lambda n: -abl[n]["delta_tau_others"])
    trainings = analysis.get("ablation", {}).get("trainings", "?")
    derived = []
    for n in analysis.get("derived", ()):
        if n not in abl:
            derived.append(f"`{n}` not read")
            continue
        rank = f"#{relied.index(n) + 1} relied on" if n in relied else "not relied on"
        derived.append(f"`{n}` {rank} (Δτ own {abl[n]['delta_tau_own']:+.3f}, others {abl[n]['delta_tau_others']:+.3f})")
    return {
        "shift": [f"{mark(n)} {shift[n]['between_share']:.2f}" for n in between],
        "outside": [f"{mark(n)} {shift[n]['out_of_range']:.2f}" for n in outside],
        "relied": [f"`{n}` {abl[n]['delta_tau_own']:+.3f} / {abl[n]['delta_tau_others']:+.3f}" for n in relied[:top]],
        "misleads": [f"`{n}` {abl[n]['delta_tau_others']:+.3f} ({abl[n]['others_better_without']}/{trainings}, "
                     f"top-5 {100 * abl[n]['delta_top5_others']:+.1f}%)" for n in misleads[:top]] or ["none"],
        "derived": derived or ["none in the data"],
    }


def analysis_comparison(analyses: List[Tuple[str, Dict[str, Any]]]) -> List[str]:
    """One row per analysis (title, analysis): what shifts, what the model relies on, what misleads it."""
    if not analyses:
        return []
    rows = []
    for title, a in analyses:
        f = analysis_findings(a)
        rows.append([f"{title}: `{a.get('extractor')}`, {_model_of(a)}", "; ".join(f["shift"]), "; ".join(f["outside"]),
                     "; ".join(f["relied"]), "; ".join(f["misleads"]), "; ".join(f["derived"])])
    return ["**Why the graphs do not transfer, compared** (generated from the analyses below: the four columns "
            "with the largest share of variance between workloads and of test nodes outside the training range "
            "(\"(not read)\": the model does not read it); the four the model relies on most (Δτ on its own "
            "validation configs when ablated, and on the other workloads); those that mislead it (Δτ on the other workloads > "
            f"{MISLEADS} when ablated; in how many of the trainings, and the change of the top-5 slowdown); the "
            "derived columns' rank among those relied on):", "",
            markdown_table(["analysis", "variance between workloads", "outside training range", "relied on (Δτ own / others)",
                            "misleads (Δτ others)", "derived columns"], rows, align="llllll"), ""]


def _model_of(analysis: Dict[str, Any]) -> str:
    proto = analysis.get("protocol", {})
    return f"`{proto['spec']}`" if proto.get("spec") else f"`{' '.join(proto.get('model_flags', []))}`"


def analysis_files(results: str) -> List[Tuple[str, str]]:
    """(tag, title) of the analyses in `results`: the one of the older extractor
    (`_before`), the current one (no tag; benchmarks.all writes it) and any other tagged one."""
    import glob
    out = [("_before", "before the size-invariant features"), ("", "now")]
    for path in sorted(glob.glob(os.path.join(results, "transfer_analysis_*.json"))):
        tag = os.path.basename(path)[len("transfer_analysis"):-len(".json")]
        if tag != "_before":
            out.append((tag, f"for comparison ({tag[1:]})"))
    return out


BASELINE_PREFIXES = ("knob-xgb", "itervar-xgb")   # AutoTVM's own models, the bar the goals set
GRAPH_PREFIXES = ("gcn", "sage", "gat", "cheb")    # the GNNs the goal is about
WORST_TOP5_BAR, GOAL_TAU, GOAL_TOP5 = 0.25, 0.5, 0.03


def goal_rows(summary: Dict[str, Dict[str, Dict[str, Any]]]) -> List[List[str]]:
    """The transfer goals, one row per GNN in the matrix: its one-workload mean τ against the
    best AutoTVM baseline's, mean top-5 against the best baseline's, the worst pair's
    top-5 against 25%, the stretch goal (τ ≥ 0.5, top-5 ≤ 3%), and the worst pair's top-5 from
    the most training workloads the model was run on (how far more data takes the bar; – when
    only one). [] when the matrix has no baseline or no GNN."""
    one = {m: per["1"] for m, per in summary.items() if "1" in per}
    base = {m: s for m, s in one.items() if m.startswith(BASELINE_PREFIXES)}
    gnns = {m: s for m, s in one.items() if m.startswith(GRAPH_PREFIXES)}
    if not base or not gnns:
        return []
    best_tau = max(base.items(), key=lambda kv: kv[1]["mean_tau"])
    best_top5 = min(base.items(), key=lambda kv: kv[1]["mean_top5"])
    rows = []
    for m, s in gnns.items():
        rows.append([f"`{m}`",
                     f"{yes(s['mean_tau'] > best_tau[1]['mean_tau'])} ({_num(s['mean_tau'])} vs "
                     f"{_num(best_tau[1]['mean_tau'])} `{best_tau[0]}`)",
                     f"{yes(s['mean_top5'] < best_top5[1]['mean_top5'])} ({_pct(s['mean_top5'])} vs "
                     f"{_pct(best_top5[1]['mean_top5'])} `{best_top5[0]}`)",
                     f"{yes(s['worst_top5'] <= WORST_TOP5_BAR)} ({_pct(s['worst_top5'], 0)})",
                     f"{yes(s['mean_tau'] >= GOAL_TAU and s['mean_top5'] <= GOAL_TOP5)} "
                     f"(τ {_num(s['mean_tau'])}, top-5 {_pct(s['mean_top5'])})",
                     most_workloads(summary[m])])
    return rows


def yes(ok: bool) -> str:
    """A goal's verdict, as the goals table writes it."""
    return "**yes**" if ok else "no"


def most_workloads(per: Dict[str, Dict[str, Any]]) -> str:
    """The worst pair's top-5 on the model's largest training sets against the 25% bar,
    – when it was trained on single workloads only."""
    most = max(int(k) for k in per)
    if most == 1:
        return "–"
    worst = per[str(most)]["worst_top5"]
    return f"{yes(worst <= WORST_TOP5_BAR)} ({_pct(worst, 0)} on {most} workloads)"


def goal_lines(summary: Dict[str, Dict[str, Dict[str, Any]]]) -> List[str]:
    rows = goal_rows(summary)
    if not rows:
        return []
    return ["**The transfer goals, one training workload** (mean over the 132 pairs; \"best baseline\": the best "
            "of AutoTVM's knob-xgb / itervar-xgb rows on that figure; the last column: the same bar on the "
            "model's largest training sets, the leave-one-out ones where run):", "",
            markdown_table(["model", "mean τ beats the best baseline", "mean top-5 beats the best baseline",
                            "worst pair top-5 ≤ 25%", "τ ≥ 0.5 and top-5 ≤ 3%",
                            "worst pair ≤ 25% from the most training workloads"], rows, align="llllll"), ""]


def _more_sets(proto: Dict[str, Any]) -> str:
    sizes = [s for s in proto.get("sizes", []) if s != 1]
    if not sizes:
        return ""
    which = proto.get("sizes_models")
    only = (f"; trained on them: {', '.join(f'`{m}`' for m in which)} and the ensembles of these, the other "
            "rows show –") if which else ""
    return (f", and on {proto.get('choices', '?')} seeded sets of {' and '.join(str(s) for s in sizes)} "
            f"workloads (tested on the rest{only})")


def transfer_section(results: str, prefix: str = "results") -> List[str]:
    out = load_json(results, "transfer.json")
    if out is None:
        return []
    proto = out.get("protocol", {})
    lines = ["## Transfer from few workloads", "",
             f"`python -m benchmarks.transfer`: each model trained on one workload and tested on each of the other "
             f"eleven (12 trainings, 132 pairs){_more_sets(proto)}; "
             f"20% of the training workloads' configs for validation and early stopping, "
             f"{proto.get('epochs', '?')} epochs at most for the graph and MLP models, seed {proto.get('seed', 0)}. "
             "τ and top-5 slowdown per (training set, test workload) pair against pass 1 (the labels); the worst "
             "is the worst pair; \"vs quiet pass\": the same pairs scored on the ≈ 121 configs per workload the "
             "quiet third pass re-measured; on those, pass 1's own ranking is the noise ceiling (last row: "
             "no model of pass 1's labels can do better against the quiet pass). Rows ending in `-rank` / "
             "`-reg` are AutoTVM's XGBoost with `rank:pairwise` / regression.", "",
             summary_table(out["summary"], out.get("noise_ceiling")), ""]
    by_size = sizes_table(out["summary"])
    if by_size:
        lines += ["**By the number of training workloads** (the same pairs' figures; each set of more than one "
                  "workload is tested on the workloads outside it):", "", by_size, ""]
    lines += goal_lines(out["summary"])
    before = load_json(results, "transfer_before.json")
    if before is not None:
        lines += ["**The same matrix before the size-invariant features** (extractor "
                  f"`{before.get('extractor', '?')}`):", "", summary_table(before["summary"]), ""]
    for name, title in (("transfer_tau.png", "Kendall τ of every one-workload pair"),
                        ("transfer_top5.png", "top-5 slowdown of every one-workload pair")):
        if os.path.exists(os.path.join(results, name)):
            lines += [f"**{title}**", "", f"![{title}]({prefix}/{name})", ""]
    notes = os.path.join(results, "transfer_notes.md")
    if os.path.exists(notes):
        with open(notes, encoding="utf-8") as f:
            lines += [f.read().strip(), ""]
    lines += families_lines(results)
    analyses = [(tag, title, load_json(results, f"transfer_analysis{tag}.json")) for tag, title in analysis_files(results)]
    analyses = [(tag, title, a) for tag, title, a in analyses if a is not None]
    lines += analysis_comparison([(title, a) for _, title, a in analyses])
    for tag, title, analysis in analyses:
        lines += [f"**Why the graphs do not transfer, measured ({title}; extractor `{analysis.get('extractor')}`, "
                  f"{_model_of(analysis)} trained on each single workload).** "
                  "`python -m benchmarks.transfer.analysis`: per node feature (every column of the data, derived "
                  "ones included; those never non-zero left out), the share of its variance (per-config "
                  "mean over the nodes it applies to) between workloads, the share of a test workload's node values "
                  "outside the range the training workload's nodes of the same type take (mean over the 132 "
                  "pairs), its within-workload Spearman ρ with the log runtime, and, for the columns the model "
                  "reads, the change of τ (on the training workload's validation configs, and on the other eleven) "
                  "and of the top-5 slowdown when the column is ablated (set to the training nodes' mean for the "
                  "node's type).", "", analysis_table(analysis), ""]
        fig = f"transfer_features{tag}.png"
        if os.path.exists(os.path.join(results, fig)):
            lines += [f"![node features {title}]({prefix}/{fig})", ""]
    return lines


def families_lines(results: str) -> List[str]:
    """The register-tile family analysis (benchmarks.transfer.families), if it was run."""
    out = load_json(results, "transfer_families.json")
    if out is None:
        return []
    s = out["summary"]

    def cell(v: Optional[Dict[str, Any]]) -> str:  # None: an analysis written before the figure existed
        return "–" if v is None else f"{_pct(v['mean'])} / {_pct(v['median'])} / {_pct(v['worst'], 0)} / {v['over_25']}"
    rows = [["lookup rule (no learning)", cell(s["lookup"]), "–", "–", "–"],
            ["the test workload's own family order (an oracle), random inside", cell(s.get("oracle")), "–", "–", "–"]]
    rows += [[f"`{m}`", cell(v["top5"]), cell(v["lookup_then_model"]), cell(v.get("oracle_then_model")),
              _pct(v["top5_unseen_share"], 0)] for m, v in s["models"].items()]
    knobs = " × ".join(out["family_knobs"])
    return [f"**What transfers: the register tile** (`python -m benchmarks.transfer.families`; a config's family "
            f"is its {knobs}, the accumulator's shape in absolute sizes). Over the {s['pairs']} one-workload pairs, "
            f"two workloads order the families they share alike (mean Kendall τ {_num(s['family_tau_mean'])}). "
            "The lookup rule ranks the test workload's configs by the training workload's median log runtime of "
            f"their family (families it never measured last, ties in {out['repeats']} random orders); "
            "\"lookup, then the model\": the same with the model's prediction breaking the ties inside a family. "
            "\"Own order, then the model\": the test workload's configs ranked by the test workload's own median of "
            "their family — what no training workload can tell — with the model breaking the ties; a bound on what a "
            "better family order alone can give. Top-5 slowdown mean / median / worst / pairs over 25%:", "",
            markdown_table(["ranking", "top-5", "lookup, then the model", "own order, then the model",
                            "model's top-5 in unmeasured families"], rows), ""]
