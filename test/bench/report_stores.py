#!/usr/bin/env python3
"""stores.md from make bench's samples: walc's full backup and restore on each store (wall
time, peak RSS, ratio to the file system) and the batched deletes of retention (issue 15).

Usage: report_stores.py SAMPLES.jsonl OUT.md"""
import json
import statistics
import sys

STORES = [("file", "file system"), ("s3", "S3 (Ceph RGW, http)"), ("az", "Azure Blob (Azurite, https)"),
          ("gcs", "GCS (Firebase emulator, http)")]
RSS_LIMIT_MIB = 100


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
    servers = [("rgw", "Ceph RGW"), ("s3rver", "s3rver")]
    present = [(k, n) for k, n in servers if by.get((f"delete-2000-{k}", "batched")) and by.get((f"delete-2000-{k}", "single"))]
    if present:
        out += ["# Retention: `delete retain 1` of 2000 WAL objects on S3", "",
                "Longest answer: the slowest DeleteObjects request of the run, the server's own time for its keys.", "",
                "| server | deletes | wall s | DeleteObjects requests | longest answer ms |", "|---|---|---|---|---|"]
        verdicts = []
        for k, name in present:
            bat, sin = by[(f"delete-2000-{k}", "batched")], by[(f"delete-2000-{k}", "single")]
            bw, sw = statistics.median(x["wall"] for x in bat), statistics.median(x["wall"] for x in sin)
            out += [f"| {name} | batched (1000 keys a request, WALG_UPLOAD_CONCURRENCY=16) | {bw:.2f} | {bat[0]['bytes']} | {bat[0]['name']} |",
                    f"| {name} | one request per object, one at a time | {sw:.2f} | {sin[0]['bytes']} | {sin[0]['name']} |"]
            verdicts.append(f"{name}: batched is {sw / bw:.1f}x faster (target: at least 5x: {'met' if sw / bw >= 5 else 'NOT met'}).")
        out += [""] + verdicts
    open(sys.argv[2], "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
