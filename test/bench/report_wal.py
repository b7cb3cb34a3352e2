"""make bench report, section wal (test/bench/wal.sh): backlog drain, per-segment archiving
latency, recovery from S3. Samples have dataset "wal" and ops wal-drain / wal-recovery; a drain's
sample also holds the gaps between the archiver's successive completions (gaps_ms)."""
import math
import statistics

MiB = 1048576.0
LATENCY_VS_PGBR = 0.5
DAEMON_VS_PGBR = 0.4  # issue 20: the daemon path (archive_library) below that
PGBR = ("pgbackrest", "file, archive_command, archive-push zst 3")
WALG = ("wal-g", "file, archive_command, concurrency 1")
# the one-segment-per-call configurations, compared with pgBackRest archive-push
LATENCY_ROWS = [("walc", "file, archive_command, concurrency 1", "walc wal-push (archive_command)"),
                ("walc", "file, archive_library + daemon, concurrency 1", "walc_archive + walc daemon (archive_library)"),
                ("walc", "s3, archive_command, concurrency 1", "walc wal-push (archive_command), S3"),
                (PGBR[0], PGBR[1], "pgBackRest archive-push (archive_command)"),
                ("wal-g", "file, archive_command, concurrency 1", "WAL-G wal-push (archive_command)")]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def pct(xs, q):
    """nearest-rank percentile"""
    if not xs:
        return None
    xs = sorted(xs)
    return xs[max(0, math.ceil(q * len(xs)) - 1)]


def fmt(x, nd=1):
    return "—" if x is None else f"{x:.{nd}f}"


def by_config(samples, op):
    out = {}
    for s in samples:
        if s.get("dataset") == "wal" and s["op"] == op:
            out.setdefault((s["tool"], s["settings"]), {})[s["run"]] = s
    return out


def paired(a, b, f):
    """median over the runs both have of f(a[run], b[run])"""
    return med([f(a[r], b[r]) for r in a if r in b])


def drain_summary(runs):
    vals = list(runs.values())
    n = med([v["archived"] for v in vals])
    gaps = [g for v in vals for g in v["gaps_ms"]]
    checked = [v for v in vals if v.get("verified") is not None]
    return {
        "runs": len(vals), "segments": n, "wall_s": med([v["wall"] for v in vals]),
        "cpu_s": med([v["user"] + v["sys"] for v in vals]),
        "seg_per_s": med([v["archived"] / v["wall"] for v in vals if v["wall"]]),
        "mib_per_s": med([v["bytes"] / MiB / v["wall"] for v in vals if v["wall"]]),
        # CPU the rest of the machine used meanwhile (other benches, tests, Ceph, PostgreSQL), in cores
        "others_cores": med([(v["busy_s"] - v["user"] - v["sys"]) / v["wall"] for v in vals
                             if v.get("busy_s") is not None and v["wall"]]),
        "cpu_ms_per_seg": med([(v["user"] + v["sys"]) * 1000 / v["archived"] for v in vals if v["archived"]]),
        "p50_ms": pct(gaps, 0.5), "p99_ms": pct(gaps, 0.99), "max_ms": max(gaps) if gaps else None,
        "run_p50_ms": {r: pct(v["gaps_ms"], 0.5) for r, v in runs.items()},
        "run_p99_ms": {r: pct(v["gaps_ms"], 0.99) for r, v in runs.items()},
        "verified": checked[0]["verified"] if checked else None,
        "stored": med([v.get("stored") for v in vals]),
        "markers_left": max(v["markers_left"] for v in vals),
        "uploads": max((v["uploads"] for v in vals if v.get("uploads") is not None), default=None),
        "failed": max((v.get("failed") or 0 for v in vals), default=0),
    }


def section(meta, samples):
    drains = by_config(samples, "wal-drain")
    recs = by_config(samples, "wal-recovery")
    if not drains and not recs and not by_config(samples, "wal-single"):
        return {"md": [], "targets": [], "json": {}}
    D = {k: drain_summary(v) for k, v in drains.items()}
    n = med([d["segments"] for d in D.values()]) or med([s["segments"] for r in recs.values() for s in r.values()])
    targets, L = [], []
    L.append(f"## WAL: {n:.0f} segments of 16 MiB, zstd, PostgreSQL {meta.get('postgres_major', 15)}")
    L.append("")
    L.append(f"One backlog of {n:.0f} segments of inserted rows (~4.5× compressible with zstd -3), built with "
             "archive_command failing, is drained again and again: before each drain its archive_status files are "
             "renamed back to .ready and the repository is emptied; the drain is timed from the reload that wakes the "
             "archiver to the moment no .ready is left. CPU = the archiver and everything it runs (plus the daemon). "
             "Medians of runs; ratios are medians of per-run ratios. \"Rest of the machine\": the CPU everything else on the "
             "machine used during the drain (Ceph, other benches or tests), in cores, out of "
             f"{meta.get('cores', '?')}: with 2 cores, concurrency only pays when the rest leaves one free.")
    L.append("")
    if D:
        L.append("### Backlog drain (issue #6)")
        L.append("")
        L.append("| storage | tool | archiving | drain s | segments/s | MiB/s of WAL | CPU s | CPU ms/segment | "
                 "rest of the machine, cores | speed-up, 8 vs 1 | uploads (most in a run) | identical after wal-fetch | markers left |")
        L.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        speedups = {}
        for tool in ("walc", "wal-g"):
            for storage in ("file", "s3"):
                one = ((tool, f"{storage}, archive_command, concurrency 1"))
                eight = ((tool, f"{storage}, archive_command, concurrency 8"))
                if one in drains and eight in drains:
                    speedups[(tool, storage)] = paired(drains[one], drains[eight],
                                                       lambda a, b: a["wall"] / b["wall"] if b["wall"] else None)
        order = sorted(D, key=lambda k: (k[1].split(",")[0], k[0] != "walc", "daemon" in k[1], k[1]))
        for k in order:
            d = D[k]
            storage, rest = k[1].split(", ", 1)
            sp = speedups.get((k[0], storage)) if rest.endswith("concurrency 8") else None
            if d["verified"] is not None:
                ident = f"{d['verified']}/{d['segments']:.0f}"
            elif d["stored"] is not None:
                ident = f"{d['stored']:.0f} stored"
            else:
                ident = "—"
            uploads = "" if d["uploads"] is None else str(d["uploads"])
            if d["failed"]:
                uploads += f" ({d['failed']} failed calls)"
            L.append(f"| {storage} | {k[0]} | {rest} | {fmt(d['wall_s'], 2)} | {fmt(d['seg_per_s'])} | "
                     f"{fmt(d['mib_per_s'], 0)} | {fmt(d['cpu_s'])} | {fmt(d['cpu_ms_per_seg'], 0)} | {fmt(d['others_cores'], 2)} | "
                     f"{fmt(sp, 2) + ' ×' if sp else ''} | {uploads} | {ident} | {d['markers_left'] if k[0] == 'walc' else ''} |")
        L.append("")
        for (tool, storage), sp in speedups.items():
            if tool != "walc":
                continue
            a, b = D[("walc", f"{storage}, archive_command, concurrency 8")], D[("walc", f"{storage}, archive_command, concurrency 1")]
            targets.append({"target": f"WAL backlog drain to {storage} storage: WALG_UPLOAD_CONCURRENCY=8 faster than 1",
                            "measured": f"{sp:.2f} × faster ({a['wall_s']:.1f} s vs {b['wall_s']:.1f} s for {n:.0f} segments)",
                            "met": sp > 1, "by": None if sp > 1 else f"{(1 / sp - 1) * 100:.0f}% slower"})
        bad = [k for k, d in D.items() if k[0] == "walc" and
               ((d["verified"] is not None and d["verified"] != d["segments"]) or d["markers_left"])]
        checked = [k for k, d in D.items() if k[0] == "walc" and d["verified"] is not None]
        if checked:
            targets.append({"target": "WAL backlog drains lose nothing: every segment fetches back identical, "
                                      "no walc marker left in pg_wal/walg_data",
                            "measured": f"{len(checked) - len(bad)} of {len(checked)} walc configurations checked clean",
                            "met": not bad, "by": None if not bad else "; ".join(k[1] for k in bad)})

        # ---- per-segment latency
        rows = [(k, label) for t, st, label in LATENCY_ROWS for k in [(t, st)] if k in D]
        if rows:
            p = D.get(PGBR)
            L.append("### Per-segment archiving latency, one segment per call (issues #8, #11)")
            L.append("")
            L.append("Latency = the time between two successive .ready → .done renames by the archiver during the "
                     "drain (the files' change times, 4 ms resolution here): one archive call plus the archiver's own "
                     "work. p50 / p99 over every gap of every run (both tools' runs alternate), and the ratios are theirs.")
            L.append("")
            g = D.get(WALG)
            L.append("| archiving | storage | p50 ms | p99 ms | max ms | segments/s | CPU ms/segment | "
                     "p50 walc/pgBackRest | p99 walc/pgBackRest | p50 walc/WAL-G |")
            L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
            for k, label in rows:
                d = D[k]
                r50 = d["p50_ms"] / p["p50_ms"] if p and k[0] == "walc" and p["p50_ms"] else None
                r99 = d["p99_ms"] / p["p99_ms"] if p and k[0] == "walc" and p["p99_ms"] else None
                rg = d["p50_ms"] / g["p50_ms"] if g and k[0] == "walc" and g["p50_ms"] else None
                d["p50_vs_pgbackrest"], d["p99_vs_pgbackrest"], d["p50_vs_walg"] = r50, r99, rg
                L.append(f"| {label} | {k[1].split(',')[0]} | {fmt(d['p50_ms'])} | {fmt(d['p99_ms'])} | {fmt(d['max_ms'])} | "
                         f"{fmt(d['seg_per_s'])} | {fmt(d['cpu_ms_per_seg'], 0)} | {fmt(r50, 2)} | {fmt(r99, 2)} | {fmt(rg, 2)} |")
                if r50 is not None and k[1].startswith("file"):
                    lim = DAEMON_VS_PGBR if "daemon" in k[1] else LATENCY_VS_PGBR
                    targets.append({"target": f"{label}: per-segment latency ≤ {lim} × pgBackRest archive-push",
                                    "measured": f"p50 {r50:.2f} × ({d['p50_ms']:.0f} vs {p['p50_ms']:.0f} ms), "
                                                f"p99 {r99:.2f} × ({d['p99_ms']:.0f} vs {p['p99_ms']:.0f} ms)"
                                                + (f"; WAL-G wal-push p50 {g['p50_ms']:.0f} ms" if g else ""),
                                    "met": r50 <= lim,
                                    "by": None if r50 <= lim else f"{(r50 / lim - 1) * 100:.0f}% over"})
            L.append("")

    # ---- one call per segment, no backlog
    singles = by_config(samples, "wal-single")
    if singles:
        S = {}
        for k, runs in singles.items():
            vals = list(runs.values())
            ms = [g for v in vals for g in v["gaps_ms"]]
            S[k] = {"calls": len(ms), "p50_ms": pct(ms, 0.5), "p99_ms": pct(ms, 0.99), "max_ms": max(ms),
                    "cpu_ms_per_seg": med([(v["user"] + v["sys"]) * 1000 / v["archived"] for v in vals])}
        p = S.get(("pgbackrest", "file, archive-push zst 3"))
        g = S.get(("wal-g", "file, default settings"))
        L.append("### One archive call per segment, no backlog (issue 20)")
        L.append("")
        L.append("Each tool archives the backlog's first segments one call at a time, run directly (not by the archiver) "
                 "with every archive_status file .done, as on a primary that fills one segment at a time: the wall time "
                 "of each call, start-up to exit, to file storage. p50 / p99 over every call of every run.")
        L.append("")
        L.append("| tool | settings | calls | p50 ms | p99 ms | max ms | CPU ms/segment | p50 / pgBackRest | p50 / WAL-G |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for k in sorted(S, key=lambda k: (k[0] != "walc", k)):
            d = S[k]
            rp = d["p50_ms"] / p["p50_ms"] if p and k[0] != "pgbackrest" else None
            rg = d["p50_ms"] / g["p50_ms"] if g and k[0] == "walc" else None
            d["p50_vs_pgbackrest"], d["p50_vs_walg"] = rp, rg
            L.append(f"| {k[0]} | {k[1]} | {d['calls']} | {fmt(d['p50_ms'])} | {fmt(d['p99_ms'])} | {fmt(d['max_ms'])} | "
                     f"{fmt(d['cpu_ms_per_seg'], 0)} | {fmt(rp, 2)} | {fmt(rg, 2)} |")
            if k == ("walc", "file, default settings") and rp is not None:
                targets.append({"target": f"walc wal-push at default settings, one call per segment: p50 ≤ {LATENCY_VS_PGBR} × "
                                          "pgBackRest archive-push",
                                "measured": f"{rp:.2f} × ({d['p50_ms']:.0f} vs {p['p50_ms']:.0f} ms)"
                                            + (f"; WAL-G {g['p50_ms']:.0f} ms" if g else ""),
                                "met": rp <= LATENCY_VS_PGBR,
                                "by": None if rp <= LATENCY_VS_PGBR else f"{(rp / LATENCY_VS_PGBR - 1) * 100:.0f}% over"})
        L.append("")

    # ---- recovery
    R = {}
    for k, runs in recs.items():
        vals = list(runs.values())
        R[k] = {"runs": len(vals), "wall_s": med([v["wall"] for v in vals]), "fetched": med([v["fetched"] for v in vals]),
                "seg_per_s": med([v["fetched"] / v["wall"] for v in vals if v["wall"]]),
                "busy_cores": med([v["busy_s"] / v["wall"] for v in vals if v.get("busy_s") is not None and v["wall"]])}
    if R:
        def pair(tool):
            pre = next((k for k in recs if k[0] == tool and "default" in k[1]), None)
            one = next((k for k in recs if k[0] == tool and k[1].endswith("WALG_DOWNLOAD_CONCURRENCY=1")), None)
            return pre, one
        sp = {}
        for tool in ("walc", "wal-g"):
            pre, one = pair(tool)
            if pre and one:
                sp[pre] = paired(recs[one], recs[pre], lambda a, b: a["wall"] / b["wall"] if b["wall"] else None)
        # walc's time over WAL-G's at the same settings, per run
        vs = {k: paired(recs[k], recs[("wal-g", k[1])], lambda a, b: a["wall"] / b["wall"] if b["wall"] else None)
              for k in recs if k[0] == "walc" and ("wal-g", k[1]) in recs}
        L.append("### Recovery from S3 (issue #6; WAL-G: issue 20)")
        L.append("")
        L.append(f"A copy of a base backup taken before the backlog (pg_basebackup) recovers all {n:.0f} segments with "
                 "restore_command = walc wal-fetch, or wal-g wal-fetch on the same repository, from Ceph RGW through "
                 "s3_faultproxy.py adding the stated latency to every request, until it promotes at the end of the "
                 "archive; it must then answer a query and hold the last transaction. Time from pg_ctl start to "
                 "\"ready to accept connections\". The tools' runs alternate; walc / WAL-G is the median of per-run "
                 "ratios of the recovery times at the same settings.")
        L.append("")
        L.append("| restore_command | recovery s | segments fetched for recovery | segments/s | machine busy, cores | "
                 "speed-up vs concurrency 1 | walc / WAL-G |")
        L.append("|---|---:|---:|---:|---:|---:|---:|")
        order = sorted(R, key=lambda k: ("default" not in k[1], k[0] != "walc", k[1]))
        for k in order:
            r = R[k]
            s_ = sp.get(k)
            killed = sum(v.get("killed") or 0 for v in recs[k].values())
            note = f" ({killed} prefetch processes killed after 30 s)" if killed else ""
            L.append(f"| {'walc' if k[0] == 'walc' else 'wal-g'} wal-fetch, {k[1]}{note} | {fmt(r['wall_s'], 2)} | "
                     f"{fmt(r['fetched'], 0)} | {fmt(r['seg_per_s'])} | {fmt(r['busy_cores'], 2)} | "
                     f"{fmt(s_, 2) + ' ×' if s_ else ''} | {fmt(vs[k], 2) if vs.get(k) else ''} |")
        L.append("")
        pre, one = pair("walc")
        if pre in sp and sp[pre] is not None:
            a, b = R[pre], R[one]
            g = R.get(("wal-g", pre[1]))
            targets.append({"target": "recovery from S3: wal-fetch with prefetch faster than WALG_DOWNLOAD_CONCURRENCY=1",
                            "measured": f"{sp[pre]:.2f} × faster ({a['wall_s']:.1f} s vs {b['wall_s']:.1f} s; "
                                        f"{a['seg_per_s']:.1f} vs {b['seg_per_s']:.1f} segments/s)"
                                        + (f"; WAL-G with prefetch {g['wall_s']:.1f} s (walc / WAL-G {vs[pre]:.2f})"
                                           if g and vs.get(pre) else ""),
                            "met": sp[pre] > 1, "by": None if sp[pre] > 1 else f"{(1 / sp[pre] - 1) * 100:.0f}% slower"})
        for k in R:
            R[k]["speedup_vs_one"] = sp.get(k)
            R[k]["vs_walg"] = vs.get(k)
            R[k]["killed"] = sum(v.get("killed") or 0 for v in recs[k].values())
    js = {"segments": n,
          "drain": [dict(tool=k[0], settings=k[1], **{f: v for f, v in d.items() if not f.startswith("run_")})
                    for k, d in D.items()],
          "recovery": [dict(tool=k[0], settings=k[1], **r) for k, r in R.items()]}
    return {"md": L, "targets": targets, "json": js}
