#!/usr/bin/env python3
"""stores.md from make bench's samples: walc's full backup and restore on each store (wall
time, peak RSS, ratio to the file system) and retention's deletes, walc batched against one
request per object (issue 15) and beside WAL-G and pgBackRest (issue 20 §6).

Usage: report_stores.py SAMPLES.jsonl OUT.md"""
import json
import re
import statistics
import sys

STORES = [("file", "file system"), ("s3", "S3 (Ceph RGW, http)"), ("az", "Azure Blob (Azurite, https)"),
          ("gcs", "GCS (Firebase emulator, http)")]
RSS_LIMIT_MIB = 100


SERVERS = [("rgw", "Ceph RGW"), ("s3rver", "s3rver"), ("file", "file system")]


def row_name(tool, settings, server):
    if tool == "walc" and server == "file" and settings == "batched":
        return "walc (unlinks on 8 threads)"
    if tool == "walc":
        return {"batched": "walc, batched (DeleteObjects of 1000 keys, WALG_UPLOAD_CONCURRENCY=16)",
                "single": "walc, one request per object, one at a time"}.get(settings, f"walc, {settings}")
    if tool == "wal-g":
        return "WAL-G v3.0.9"
    return f"pgBackRest, {settings}"


def retention(samples):
    """The retention rows: delete-N-SERVER ops, medians, walc (batched) / other ratios as medians
    of the per-run ratios."""
    groups = {}
    for s in samples:
        m = re.fullmatch(r"delete-(\d+)-(\w+)", s["op"])
        if m:
            groups.setdefault((int(m.group(1)), m.group(2)), {}).setdefault((s["tool"], s["settings"]), []).append(s)
    out = []
    for n in sorted({k[0] for k in groups}):
        present = [(k, name) for k, name in SERVERS if (n, k) in groups]
        if not present:
            continue
        out += [f"# Retention: `delete retain FULL 1` of {n} WAL objects below one backup", "",
                "walc: `delete retain FULL 1 --confirm` (before issue 20 §6: `delete retain 1`, the same with one full backup); "
                "WAL-G: the same command line; pgBackRest: `expire` with repo1-retention-full=1 in its own layout. "
                "Medians of the runs. walc / tool: the median of the per-run ratios of walc's batched wall time to the tool's "
                "(below 1: walc faster). Longest answer: the slowest DeleteObjects request of the run, the server's own time "
                "for its keys.", "",
                "| server | tool | runs | wall s | walc / tool | DeleteObjects requests | longest answer ms |",
                "|---|---|---|---|---|---|---|"]
        verdicts = []
        for k, name in present:
            rows = groups[(n, k)]
            ref = {x["run"]: x["wall"] for x in rows.get(("walc", "batched"), [])}
            order = sorted(rows, key=lambda t: ({"walc": 0, "wal-g": 1}.get(t[0], 2), t[1]))
            for tool, settings in order:
                xs = rows[(tool, settings)]
                wall = statistics.median(x["wall"] for x in xs)
                ratios = [ref[x["run"]] / x["wall"] for x in xs if x["run"] in ref and x["wall"] > 0]
                ratio = "" if (tool, settings) == ("walc", "batched") or not ratios else f"{statistics.median(ratios):.2f}"
                reqs = xs[0]["bytes"] if xs[0]["bytes"] is not None else ""
                longest = xs[0]["name"] or ""
                out.append(f"| {name} | {row_name(tool, settings, k)} | {len(xs)} | {wall:.2f} | {ratio} | {reqs} | {longest} |")
            bat, sin = rows.get(("walc", "batched")), rows.get(("walc", "single"))
            if bat and sin:
                bw, sw = statistics.median(x["wall"] for x in bat), statistics.median(x["wall"] for x in sin)
                verdicts.append(f"{name}: batched is {sw / bw:.1f}x faster than one request per object "
                                f"(target: at least 5x: {'met' if sw / bw >= 5 else 'NOT met'}).")
        out += [""] + verdicts + ([""] if verdicts else [])
    return out


def main():
    samples = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    by = {}
    for s in samples:
        by.setdefault((s["op"], s["settings"]), []).append(s)
    out = ["# Stores: walc backup-push and backup-fetch of the pgbench dataset", "",
           "Medians of the runs (wall seconds); peak RSS is the largest of the runs. Servers on loopback.", "",
           "| store | backup s | backup peak RSS MiB | restore s | restore peak RSS MiB | backup / file | restore / file |",
           "|---|---|---|---|---|---|---|"]
    base = {}
    ok = True
    for st, name in STORES:
        b, r = by.get(("store-backup", st), []), by.get(("store-restore", st), [])
        if not b or not r:
            continue
        bw, rw = statistics.median(x["wall"] for x in b), statistics.median(x["wall"] for x in r)
        brss, rrss = max(x["rss_kb"] for x in b) / 1024, max(x["rss_kb"] for x in r) / 1024
        if st == "file":
            base = {"b": bw, "r": rw}
        ok &= brss <= RSS_LIMIT_MIB and rrss <= RSS_LIMIT_MIB
        ratio = (lambda v, k: f"{v / base[k]:.2f}" if base.get(k) else "")
        out.append(f"| {name} | {bw:.1f} | {brss:.0f} | {rw:.1f} | {rrss:.0f} | {ratio(bw, 'b')} | {ratio(rw, 'r')} |")
    out += ["", f"Peak RSS at most {RSS_LIMIT_MIB} MiB on every store: {'yes' if ok else 'NO'}.", ""]
    out += retention(samples)
    open(sys.argv[2], "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
