#!/usr/bin/env python3
"""files.md from make bench's samples, section files (files.sh): each tool's wall time and peak
RSS on a cluster of about 1,000 files and one of about 200,000, and how much the peak grew
(issue 20: walc's backup-push, delta push and backup-fetch within 10%; a delta chain's restore, its
--delta restore and backup-verify are shown beside them).

Usage: report_files.py SAMPLES.jsonl OUT.md"""
import json
import statistics
import sys

SETS = ("files-small", "files-large")
ROWS = [("walc", "backup", "backup-push (full)"), ("walc", "delta", "backup-push (delta of one changed table)"),
        ("walc", "restore", "backup-fetch"), ("walc", "restore-chain", "backup-fetch of the delta (a chain of two)"),
        ("walc", "files-delta-chain", "backup-fetch --delta of the chain onto its restore, 15% of relation files changed"),
        ("walc", "verify-chain", "backup-verify of the delta"), ("wal-g", "backup", "backup-push"), ("wal-g", "restore", "backup-fetch"),
        ("pgbackrest", "backup", "backup (full)"), ("pgbackrest", "restore", "restore")]
TARGET = 1.10


def main():
    samples = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    files = {s["dataset"]: s["files"] for s in samples if s.get("op") == "files-count"}
    by = {}
    for s in samples:
        if s.get("dataset") in SETS and s.get("op") != "files-count":
            op = s["op"] + ("-chain" if s.get("settings") == "chain" else "")
            by.setdefault((s["dataset"], s["tool"], op), []).append(s)
    small, large = (files.get(d, "?") for d in SETS)
    out = ["# Files: memory against the number of files", "",
           f"PGDATA of {small} and of {large} files (one-row tables with a primary key and TOAST). "
           "Medians of the runs for wall seconds; peak RSS is the largest of the runs.", "",
           f"| tool | operation | {small} files: s | MiB | {large} files: s | MiB | peak RSS large / small |",
           "|---|---|---|---|---|---|---|"]
    verdicts = []
    for tool, op, label in ROWS:
        a, b = by.get((SETS[0], tool, op)), by.get((SETS[1], tool, op))
        if not a or not b:
            continue
        aw, bw = statistics.median(x["wall"] for x in a), statistics.median(x["wall"] for x in b)
        ar, br = max(x["rss_kb"] for x in a) / 1024, max(x["rss_kb"] for x in b) / 1024
        out.append(f"| {tool} | {label} | {aw:.1f} | {ar:.1f} | {bw:.1f} | {br:.1f} | {br / ar:.2f} |")
        if tool == "walc" and op in ("backup", "delta", "restore"):
            verdicts.append(f"walc {label}: peak RSS {br / ar:.2f}x (target at most {TARGET:.2f}x: "
                            f"{'met' if br / ar <= TARGET else 'NOT met'}).")
    out += [""] + verdicts
    open(sys.argv[2], "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
