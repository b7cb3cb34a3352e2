"""make bench report, section delta-restore (delta_restore.sh): cold and --delta restores of
walc and pgBackRest onto directories with ~15% of the relation files changed."""
from report import MiB, cell, fmt, group, paired_ratio, summarize

COLD, DELTA = "delta-restore-cold", "delta-restore"
WALC_MAIN = "best"  # the last zstd full of bench_full; the other walc row is cut in 64 MiB parts


def section(meta, samples):
    groups = group(samples)
    rows = {k: v for k, v in groups.items() if k[1] in (COLD, DELTA)}
    if not rows:
        return {"md": [], "targets": [], "json": {}}
    changes = [s["change"] for s in samples if s["op"] == "delta-restore-change"]
    checks = [s for s in samples if s["op"] == "delta-restore-check"]
    ch = changes[0]

    def key(op, tool, settings):
        return next((k for k in rows if k[1] == op and k[2] == tool and k[4] == settings), None)

    variants = sorted({(k[2], k[4]) for k in rows}, key=lambda v: (v[0] != "walc", v[1] != WALC_MAIN, v[1]))
    pgbr = next((v for v in variants if v[0] == "pgbackrest"), None)
    out = []
    for tool, settings in variants:
        for op in (COLD, DELTA):
            k = key(op, tool, settings)
            if k is None:
                continue
            r = summarize(k, rows[k])
            r["mode"] = "cold" if op == COLD else "--delta"
            if op == DELTA and key(COLD, tool, settings):
                cold = rows[key(COLD, tool, settings)]
                r["wall_vs_cold"] = paired_ratio(rows[k], cold)
                r["read_vs_cold"] = paired_ratio(rows[k], cold, "bytes")
            if tool == "walc" and pgbr and key(op, *pgbr):
                r["wall_vs_pgbackrest"] = paired_ratio(rows[k], rows[key(op, *pgbr)])
            mine = [c for c in checks if c["tool"] == tool and c["settings"] == settings]
            if op == DELTA:
                r["checks"] = f"{sum(c['ok'] for c in mine)} of {len(mine)}"
                r["checks_ok"] = all(c["ok"] for c in mine) and bool(mine)
                r["check_diffs"] = [c["diff"] for c in mine if not c["ok"]]
            out.append(r)

    def find(tool, settings, mode):
        return next((r for r in out if r["tool"] == tool and r["settings"] == settings and r["mode"] == mode), None)

    L = [f"## Delta restore: {ch['files']} of {ch['total_files']} relation files changed "
         f"({ch['files'] / ch['total_files']:.0%}), pgbench scale {meta['scale']}", ""]
    L.append(f"Each run restores each backup cold into a fresh directory, then changes the same relation files "
             f"(under base/ and global/, chosen with seed {ch['seed']}) in every directory: "
             f"{ch['pages']} get 1–4 of their 8 KiB pages overwritten with random bytes, {ch['truncate']} are cut to "
             f"half their pages, {ch['delete']} are deleted, and a stray relation file is added. The changed files "
             f"hold {ch['bytes'] / MiB:.1f} of {ch['total_bytes'] / MiB:.0f} MiB of relation-file bytes "
             f"({ch['bytes'] / ch['total_bytes']:.1%}). Then `walc backup-fetch --delta` and "
             f"`pgbackrest restore --delta` (checksums every file) bring them back, and every file is compared by "
             f"sha256 with the cold restore's. walc *best*: the last zstd full of the table above "
             f"(WALG_TAR_SIZE_THRESHOLD 1 GiB); *64 MiB parts*: a zstd full cut at 64 MiB. *read from repo*: "
             f"the repository objects the restore read (walc: the tar partitions it logs extracting, plus the "
             f"backup's JSON; pgBackRest: the stored files of those it logs restoring rather than keeping, plus "
             f"backup.manifest). Ratios are medians of per-run ratios.")
    L.append("")
    L.append("| restore | tool | settings | wall s | CPU s | peak RSS MiB | read from repo MiB | wall --delta/cold | "
             "read --delta/cold | wall walc/pgBackRest | files equal a cold restore's |")
    L.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in out:
        L.append(f"| {r['mode']} | {r['tool']} | {cell(r['settings'])} | {fmt(r['wall_s'], 2)} | {fmt(r['cpu_s'], 2)} | "
                 f"{fmt(r['rss_mib'])} | {fmt(r['bytes'] / MiB)} | {fmt(r.get('wall_vs_cold'), 2)} | "
                 f"{fmt(r.get('read_vs_cold'), 2)} | {fmt(r.get('wall_vs_pgbackrest'), 2)} | {r.get('checks', '')} |")
    L.append("")
    for r in out:
        for d in r.get("check_diffs", []):
            L.append(f"{r['tool']} ({cell(r['settings'])}) --delta left differences: `{d.splitlines()[0] if d else ''}`")
    if any(r.get("check_diffs") for r in out):
        L.append("")

    targets = []
    w = find("walc", WALC_MAIN, "--delta")
    wp = [r for r in out if r["tool"] == "walc" and r["mode"] == "--delta" and r["settings"] != WALC_MAIN]
    if w and w.get("wall_vs_pgbackrest") is not None:
        v = w["wall_vs_pgbackrest"]
        others = "".join(f"; {r['settings']}: {r['wall_vs_pgbackrest']:.2f} ×" for r in wp
                         if r.get("wall_vs_pgbackrest") is not None)
        targets.append({"target": "delta restore: walc --delta wall ≤ pgBackRest --delta wall",
                        "measured": f"{v:.2f} × ({w['wall_s']:.2f} s vs "
                                    f"{find(pgbr[0], pgbr[1], '--delta')['wall_s']:.2f} s){others}",
                        "met": v <= 1.0, "by": None if v <= 1.0 else f"{(v - 1) * 100:.0f}% slower"})
    for r in [w] + wp:
        if r and r.get("read_vs_cold") is not None:
            v = r["read_vs_cold"]
            cold = find("walc", r["settings"], "cold")
            targets.append({"target": f"delta restore: walc --delta reads fewer bytes than a cold restore "
                                      f"({r['settings']})",
                            "measured": f"{r['bytes'] / MiB:.1f} of {cold['bytes'] / MiB:.1f} MiB ({v:.0%})",
                            "met": v < 1.0, "by": None if v < 1.0 else "reads every partition: each holds a changed file"})
    dr = [r for r in out if r["mode"] == "--delta"]
    bad = [f"{r['tool']} {r['settings']}" for r in dr if not r["checks_ok"]]
    targets.append({"target": "delta restore: every file equals a cold restore's (sha256)",
                    "measured": ", ".join(f"{r['tool']} {r['settings']}: {r['checks']} runs" for r in dr),
                    "met": not bad, "by": None if not bad else "differences in " + ", ".join(bad)})
    js = {"change": ch, "changes": changes, "rows": out,
          "walc_vs_pgbackrest_delta_wall": w.get("wall_vs_pgbackrest") if w else None}
    return {"md": L, "targets": targets, "json": js}
