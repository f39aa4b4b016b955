"""Make tests/data/networks_tiny: a few real records of a measuring work folder, compacted.

    python tests/data/make_networks_tiny.py /work/measure/pilot tests/data/networks_tiny

Per (task, sampling method), `--per-task` records of pass 1 (those pass 2 re-timed first),
with their sidecar lines, pass 2's re-timings of them, the reference timings and the task
rows (without their IRModule text, which loading does not read), written as a work folder
in a temporary place and compacted by `python -m datasets.ship`.
"""
import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict


def lines(path):
    with open(path, encoding="utf-8") as f:
        return [line for line in f if line.strip()]


def pass_records(folder, method):
    """(sidecar row, database line) pairs of one method, in commit order."""
    rows = [json.loads(x) for x in lines(os.path.join(folder, "records.jsonl"))]
    db = lines(os.path.join(folder, method, "database_tuning_record.json"))
    mine = [r for r in rows if r["method"] == method]
    assert len(mine) == len(db), (folder, method, len(mine), len(db))
    return list(zip(mine, db))


def pick(work, method, per_task, tasks):
    again = {r["mod_hash"] for r, _ in pass_records(os.path.join(work, "pass2"), method)}
    by_task = defaultdict(list)
    for row, line in pass_records(os.path.join(work, "pass1"), method):
        if row["workload"] in tasks:
            by_task[row["workload"]].append((row, line))
    out = []
    for pairs in by_task.values():
        pairs.sort(key=lambda p: p[0]["mod_hash"] not in again)
        out += pairs[:per_task]
    return out, again


def write_pass(dst, method, pairs, workloads, append_rows):
    """Database lines re-indexed into this folder's workload file."""
    os.makedirs(os.path.join(dst, method), exist_ok=True)
    index = {}
    wl_lines, rec_lines = [], []
    for row, line in pairs:
        rec = json.loads(line)
        if rec[0] not in index:
            index[rec[0]] = len(wl_lines)
            wl_lines.append(workloads[rec[0]])
        rec[0] = index[rec[0]]
        rec_lines.append(json.dumps(rec) + "\n")
        append_rows.append(row)
    with open(os.path.join(dst, method, "database_workload.json"), "w") as f:
        f.writelines(wl_lines)
    with open(os.path.join(dst, method, "database_tuning_record.json"), "w") as f:
        f.writelines(rec_lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("out")
    ap.add_argument("--per-task", type=int, default=4)
    ap.add_argument("--tasks", type=int, default=3)
    args = ap.parse_args()
    with open(os.path.join(args.work, "tasks.json")) as f:
        table = json.load(f)
    measured = {json.loads(x)["workload"] for x in lines(os.path.join(args.work, "pass1", "records.jsonl"))}
    rows = [dict(t, mod_json="") for t in table["tasks"] if t["key"] in measured and t["kind"] != "elementwise"]
    rows = rows[:args.tasks]
    keys = {t["key"] for t in rows}
    tmp = tempfile.mkdtemp(prefix="networks_tiny_")
    for name in ("meta.json", "reference.jsonl", "reference_kernel.json"):
        with open(os.path.join(args.work, name)) as src, open(os.path.join(tmp, name), "w") as dst:
            dst.write(src.read())
    with open(os.path.join(tmp, "tasks.json"), "w") as f:
        json.dump(dict(table, tasks=rows), f, indent=1)
    side1, side2 = [], []
    for method in ("random", "evolutionary"):
        pairs, _ = pick(args.work, method, args.per_task, keys)
        chosen = {r["mod_hash"] for r, _ in pairs}
        wl1 = lines(os.path.join(args.work, "pass1", method, "database_workload.json"))
        write_pass(os.path.join(tmp, "pass1"), method, pairs, wl1, side1)
        again = [p for p in pass_records(os.path.join(args.work, "pass2"), method) if p[0]["mod_hash"] in chosen]
        wl2 = lines(os.path.join(args.work, "pass2", method, "database_workload.json"))
        write_pass(os.path.join(tmp, "pass2"), method, again, wl2, side2)
    for folder, side in (("pass1", side1), ("pass2", side2)):
        with open(os.path.join(tmp, folder, "records.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in side)
    from datasets.ship import main as ship
    return ship([tmp, "--out", args.out, "--overwrite"])


if __name__ == "__main__":
    sys.exit(main())
