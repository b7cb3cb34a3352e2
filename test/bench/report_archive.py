#!/usr/bin/env python3
"""make bench report, section archive (archive.sh; issue 45 §2): the WAL rate each archiving path
keeps up with under the heaviest load the machine sustains, and the backlog it leaves.

Usage: report_archive.py SAMPLES.jsonl OUT.md (also section(meta, samples) for report.py)"""
import json
import statistics
import sys

MiB = 1048576.0
SEG = 16 * MiB
PATHS = [("none", "no archiving (archive_mode off): the machine's rate"),
         ("walc", "walc wal-push (archive_command)"),
         ("walc-daemon", "walc_archive module + walc daemon"),
         ("wal-receive", "walc wal-receive (replication slot)"),
         ("pg_receivewal", "PostgreSQL's pg_receivewal (replication slot, uncompressed)"),
         ("wal-g", "WAL-G v3.0.9 wal-push (archive_command)"),
         ("pgbackrest", "pgBackRest archive-push, archive-async=y, process-max=2")]
WALC = ("walc", "walc-daemon", "wal-receive")
# what the goal compares walc against; pg_receivewal is a floor of streaming, not a peer
PEERS = ("wal-g", "pgbackrest")
STORES = [("file", "file system"), ("rgw", "Ceph RGW")]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=1):
    return "—" if x is None else f"{x:.{nd}f}"


def summary(runs):
    segs = [r["bytes"] / SEG for r in runs]
    return {
        "runs": len(runs),
        "wal_mib": med([r["bytes"] / MiB for r in runs]),
        "rate_mib_s": med([r["bytes"] / MiB / r["wall"] for r in runs if r["wall"]]),
        "max_backlog_mib": med([r["max_backlog"] / MiB for r in runs]),
        "end_backlog_mib": med([r["end_backlog"] / MiB for r in runs]),
        "drain_s": med([r["drain_s"] for r in runs]),
        "cpu_s": med([r["user"] for r in runs]),
        "cpu_ms_per_seg": med([r["user"] * 1000 / s for r, s in zip(runs, segs) if s]),
        "walsender_ms_per_seg": med([r["walsender_s"] * 1000 / s for r, s in zip(runs, segs)
                                     if s and r.get("walsender_s")]),
        "stored_ok": all(r["stored"] is None or r["stored"] >= int(r["bytes"] // SEG) for r in runs),
        "early": any(r.get("early") for r in runs),
    }


def section(meta, samples):
    runs = {}
    for s in samples:
        if s.get("op") == "archive-keepup":
            runs.setdefault((s["tool"], s["settings"]), []).append(s)
    if not runs:
        return {"md": [], "targets": [], "json": {}}
    S = {k: summary(v) for k, v in runs.items()}
    secs = med([s["wall"] for v in runs.values() for s in v])
    clients = next(iter(runs.values()))[0].get("clients")
    L = ["### Keeping up with the WAL (issue 45 §2)", "",
         f"PostgreSQL 15, 16 MiB segments, synchronous_commit off, driven for about {secs:.0f} s by pgbench "
         f"({clients} clients, each truncating its own table and inserting 2000 rows again) while one path archives "
         "(zstd everywhere). Backlog: the segments PostgreSQL keeps .ready (for wal-receive, the complete segments its slot holds), "
         "sampled five times a second; at the end: when the load stops; drain: from then until nothing waits. CPU: the "
         "archiving processes' (the archiver and the archive_command processes it waited for, the daemon, wal-receive "
         "and its walsender, pgBackRest's async processes, counted by a subreaper), for all of the run's WAL; "
         "of which the walsender's, for the paths that stream from a slot, in brackets. Medians of "
         f"{max(v['runs'] for v in S.values())} run(s).", "",
         "| path | store | WAL MiB | MiB/s | largest backlog MiB | backlog at the end MiB | drain s | CPU s | "
         "CPU ms / segment | all stored |",
         "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for path, name in PATHS:
        for store, sname in STORES:
            d = S.get((path, store))
            if d is None:
                continue
            note = " (load stopped early: pg_wal passed BENCH_ARCHIVE_MAX_GB)" if d["early"] else ""
            L.append(f"| {name}{note} | {sname if path != 'none' else '—'} | {fmt(d['wal_mib'], 0)} | "
                     f"{fmt(d['rate_mib_s'])} | {fmt(d['max_backlog_mib'], 0) if path != 'none' else '—'} | "
                     f"{fmt(d['end_backlog_mib'], 0) if path != 'none' else '—'} | "
                     f"{fmt(d['drain_s']) if path != 'none' else '—'} | {fmt(d['cpu_s'])} | "
                     f"{fmt(d['cpu_ms_per_seg'], 0) if path != 'none' else '—'}"
                     f"{'' if d['walsender_ms_per_seg'] is None else ' (' + fmt(d['walsender_ms_per_seg'], 0) + ')'} | "
                     f"{'—' if path == 'none' else ('yes' if d['stored_ok'] else 'NO')} |")
    L.append("")
    targets = []
    for store, sname in STORES:
        tools = {p: S[(p, store)] for p, _ in PATHS if p != "none" and (p, store) in S}
        walc = {p: d for p, d in tools.items() if p in WALC}
        peers = {p: d for p, d in tools.items() if p in PEERS}
        if not walc or not peers:
            continue
        worst = max(walc, key=lambda p: walc[p]["end_backlog_mib"])
        best_peer = min(peers, key=lambda p: peers[p]["end_backlog_mib"])
        met = walc[worst]["end_backlog_mib"] <= peers[best_peer]["end_backlog_mib"]
        targets.append({"target": f"{sname}: walc's backlog at the end of the run is the smallest of every tool",
                        "measured": ", ".join(f"{p} {d['end_backlog_mib']:.0f} MiB" for p, d in tools.items()),
                        "met": met, "by": None if met else f"{worst} {walc[worst]['end_backlog_mib']:.0f} MiB vs "
                                                          f"{best_peer} {peers[best_peer]['end_backlog_mib']:.0f} MiB"})
        pg = tools.get("pgbackrest")
        if pg is None:
            continue
        for p, d in walc.items():
            ok_rate = d["rate_mib_s"] >= pg["rate_mib_s"]
            ok_cpu = d["cpu_ms_per_seg"] is not None and pg["cpu_ms_per_seg"] is not None and \
                d["cpu_ms_per_seg"] < pg["cpu_ms_per_seg"]
            targets.append({"target": f"{sname}: {p} sustains at least pgBackRest async's WAL rate with less CPU "
                                      "per segment",
                            "measured": f"{d['rate_mib_s']:.1f} vs {pg['rate_mib_s']:.1f} MiB/s; "
                                        f"{fmt(d['cpu_ms_per_seg'], 0)} vs {fmt(pg['cpu_ms_per_seg'], 0)} ms/segment",
                            "met": ok_rate and ok_cpu,
                            "by": None if ok_rate and ok_cpu else
                            "; ".join(x for x in [None if ok_rate else "rate lower",
                                                  None if ok_cpu else "more CPU per segment"] if x)})
    for t in targets:
        L.append(f"- {'met' if t['met'] else 'NOT met'}: {t['target']}: {t['measured']}"
                 + (f" ({t['by']})" if t["by"] else ""))
    L.append("")
    return {"md": L, "targets": targets,
            "json": {"rows": [dict(path=k[0], store=k[1], **v) for k, v in S.items()]}}


def main():
    samples = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    out = section({}, samples)
    open(sys.argv[2], "w").write("\n".join(out["md"]) + "\n")


if __name__ == "__main__":
    main()
