"""make bench report, section s3 (s3.sh): full backup and restore to Ceph RGW, walc over HTTP and
over stunnel's HTTPS, pgBackRest over HTTPS, WAL-G and Barman Cloud over HTTP, next to the
file-storage rows of bench_full."""
from report import MiB, cell, fmt, group, med, paired_ratio, summarize

S3_VS_FILE = 1.1  # issue 20 (issue 11 had 1.2)
VS_BARMAN = 0.5  # issue 49: S3 backup against Barman Cloud's
RSS_LIMIT_MIB = 100
SMALL = "s3-small"
# (op on S3, the op of bench_full on file storage)
OPS = [("s3-backup", "backup"), ("s3-restore", "restore")]
NAMES = {"s3-backup": "full backup", "s3-restore": "full restore"}


def section(meta, samples):
    groups = group(samples)
    s3 = {k: v for k, v in groups.items() if k[1] in dict(OPS)}
    if not s3:
        return {"md": [], "targets": [], "json": {}}
    ds = next(k[0] for k in s3 if k[0] != SMALL)

    def file_key(op, tool):
        codec, settings = {"walc": ("zstd", "best"), "wal-g": ("zstd", None)}.get(tool, ("zst", None))
        return next((k for k in groups if k[0] == ds and k[1] == op and k[2] == tool and k[3] == codec
                     and (settings is None or k[4] == settings)), None)

    def without_stop(a, b):
        return med([(a[r]["wall"] - a[r]["stop_s"]) / (b[r]["wall"] - b[r]["stop_s"]) for r in a
                    if r in b and a[r].get("stop_s") is not None and b[r].get("stop_s") is not None])

    def cpu_bound(a, b):
        """The lowest S3/file wall ratio the CPU allows: the S3 run's own CPU and the server's,
        on the same cores, spread perfectly, against the file run's wall."""
        return med([max(b[r]["wall"], (a[r]["user"] + a[r]["sys"] + a[r]["server_cpu"]) / meta["cores"])
                    / b[r]["wall"] for r in a if r in b and a[r].get("server_cpu") is not None])

    rows = []
    for op, fop in OPS:
        pg = next((k for k in s3 if k[0] == ds and k[1] == op and k[2] == "pgbackrest"), None)
        wg = next((k for k in s3 if k[0] == ds and k[1] == op and k[2] == "wal-g"), None)
        bm = next((k for k in s3 if k[0] == ds and k[1] == op and k[2] == "barman-cloud"), None)
        for tool in ("walc", "pgbackrest", "wal-g", "barman-cloud"):
            fk = file_key(fop, tool)
            if fk:
                r = summarize(fk, groups[fk])
                r["storage"] = "file"
                if tool == "walc" and file_key(fop, "pgbackrest"):
                    r["wall_vs_pgbackrest"] = paired_ratio(groups[fk], groups[file_key(fop, "pgbackrest")])
                rows.append(r)
            for k in sorted(k for k in s3 if k[0] == ds and k[1] == op and k[2] == tool):
                r = summarize(k, s3[k])
                tr = k[4].split(", ")[-1]
                r["storage"] = "S3, " + (f"http, S3_MAX_PART_SIZE {tr[5:]} MiB" if tr.startswith("http-") else tr) \
                    + (" (stunnel)" if tr == "https" else "")
                if fk:
                    r["wall_vs_file"] = paired_ratio(s3[k], groups[fk])
                    if op == "s3-backup":
                        r["wall_vs_file_without_stop"] = without_stop(s3[k], groups[fk])
                    r["cpu_bound_vs_file"] = cpu_bound(s3[k], groups[fk])
                if tool == "walc" and pg:
                    r["wall_vs_pgbackrest"] = paired_ratio(s3[k], s3[pg])
                if tool == "walc" and wg:
                    r["wall_vs_walg"] = paired_ratio(s3[k], s3[wg])
                if tool == "walc" and bm:
                    r["wall_vs_barman"] = paired_ratio(s3[k], s3[bm])
                rows.append(r)
    small = {op: summarize(k, s3[k]) for op, _ in OPS for k in s3 if k[0] == SMALL and k[1] == op}
    runs = max(len(v) for v in s3.values())

    L = [f"## S3: full backup and restore to Ceph RGW, pgbench scale {meta['scale']}", ""]
    L.append(f"Ceph RGW 16.2 on loopback (one OSD on memstore), median of {runs} run(s)"
             + (f" (fewer than the {meta['runs']} of the file rows)" if runs < meta["runs"] else "")
             + ". pgBackRest speaks only HTTPS to S3: stunnel terminates TLS (self-signed certificate, RSA 2048) in "
               "front of RGW, and walc runs both through it (*https*, `S3_CA_CERT_FILE`) and straight to RGW (*http*). "
               "walc: zstd, `WALG_UPLOAD_DISK_CONCURRENCY=cores`, path-style; pgBackRest: repo2, zst level 3, "
               "`process-max=cores`; WAL-G (when present): zstd, `WALG_UPLOAD_DISK_CONCURRENCY=cores`, http; Barman Cloud "
               "(BENCH_PG=18): `--zstd --jobs cores --min-chunk-size`, http, its restore (one stream, no fsync) "
               "timed with a syncfs of the directory after it. The *file* rows are bench_full's (the table above); *S3/file* pairs run *n* of "
               "each, measured minutes apart. While this section runs the archive_command also pushes to "
               "pgBackRest's S3 repository, so pg_backup_stop waits longer for the stop segment than in the file "
               "rows: *S3/file without stop* leaves that wait out on both sides. stored = the backup's objects in "
               "the bucket. *server CPU* = what RGW's daemons and stunnel used during the run, on the same "
               f"{meta['cores']} cores as the tool; *CPU floor S3/file* = (the tool's CPU + server CPU) / cores, "
               "against the file run's wall (at least 1): the S3/file ratio the machine allows with every core "
               "busy.")
    L.append("")
    L.append("| operation | tool | storage | wall s | CPU s | server CPU s | peak RSS MiB | stored MiB | "
             "wall S3/file | S3/file without stop | CPU floor S3/file | wall walc/pgBackRest | wall walc/WAL-G | "
             "wall walc/Barman |")
    L.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        stored = fmt(r["bytes"] / MiB) if "backup" in r["op"] and r["bytes"] is not None else ""
        L.append(f"| {NAMES.get(r['op'], 'full ' + r['op'])} | {r['tool']} | {cell(r['storage'])} | {fmt(r['wall_s'])} | "
                 f"{fmt(r['cpu_s'])} | {fmt(r.get('server_cpu_s'), 2)} | {fmt(r['rss_mib'])} | {stored} | "
                 f"{fmt(r.get('wall_vs_file'), 2)} | {fmt(r.get('wall_vs_file_without_stop'), 2)} | "
                 f"{fmt(r.get('cpu_bound_vs_file'), 2)} | {fmt(r.get('wall_vs_pgbackrest'), 2)} | "
                 f"{fmt(r.get('wall_vs_walg'), 2)} | {fmt(r.get('wall_vs_barman'), 2)} |")
    L.append("")
    if small:
        L.append(f"Peak RSS at a second size: walc over HTTP on a pgbench cluster of scale {meta['small_scale']} "
                 f"made in this section: backup-push {fmt(small.get('s3-backup', {}).get('rss_mib'))} MiB, "
                 f"backup-fetch {fmt(small.get('s3-restore', {}).get('rss_mib'))} MiB (scale {meta['scale']}: "
                 f"see the http rows above).")
        L.append("")

    def walc_row(op, storage):
        return next((r for r in rows if r["op"] == op and r["tool"] == "walc" and r["storage"].startswith(storage)), None)

    targets = []
    for tr in ("S3, http", "S3, https"):
        r = next((r for r in rows if r["op"] == "s3-backup" and r["tool"] == "walc"
                  and r["storage"] in (tr, tr + " (stunnel)")), None)
        if r and r.get("wall_vs_file") is not None:
            v = r["wall_vs_file"]
            ws = r.get("wall_vs_file_without_stop")
            cb = r.get("cpu_bound_vs_file")
            targets.append({"target": f"S3 ({tr[4:]}): walc backup-push wall ≤ {S3_VS_FILE} × to file storage",
                            "measured": f"{v:.2f} ×" + (f" ({ws:.2f} × without the pg_backup_stop waits)" if ws else "")
                            + (f"; the CPU allows {cb:.2f} × at best (the server's CPU on the same cores)" if cb else ""),
                            "met": v <= S3_VS_FILE, "by": None if v <= S3_VS_FILE else f"{(v / S3_VS_FILE - 1) * 100:.0f}% over"})
    r = next((r for r in rows if r["op"] == "s3-backup" and r["tool"] == "walc" and r["storage"] == "S3, http"), None)
    if r and r.get("wall_vs_barman") is not None:
        v = r["wall_vs_barman"]
        targets.append({"target": f"S3 (http): walc full backup wall ≤ {VS_BARMAN} × Barman Cloud's",
                        "measured": f"{v:.2f} ×", "met": v <= VS_BARMAN,
                        "by": None if v <= VS_BARMAN else f"{(v / VS_BARMAN - 1) * 100:.0f}% over"})
    walc = [r for r in rows if r["tool"] == "walc" and r["storage"] != "file"] + \
           [dict(v, storage=f"S3, http, scale {meta['small_scale']}") for v in small.values()]
    if walc:
        worst = max(walc, key=lambda r: r["rss_mib"])
        v = worst["rss_mib"]
        targets.append({"target": f"walc peak RSS ≤ {RSS_LIMIT_MIB} MiB to S3 (backup and restore)",
                        "measured": f"{v:.1f} MiB at most ({NAMES[worst['op']]}, {worst['storage']})",
                        "met": v <= RSS_LIMIT_MIB, "by": None if v <= RSS_LIMIT_MIB else f"{v - RSS_LIMIT_MIB:.1f} MiB over"})
    sizes = {}
    for op, _ in OPS:
        big = walc_row(op, "S3, http")
        if big and op in small:
            ratio = big["rss_mib"] / small[op]["rss_mib"]
            sizes[op] = {"small_mib": small[op]["rss_mib"], "mib": big["rss_mib"], "ratio": ratio}
            targets.append({"target": f"walc {NAMES[op]} peak RSS to S3 the same at two database sizes",
                            "measured": f"{small[op]['rss_mib']:.1f} MiB at scale {meta['small_scale']}, "
                                        f"{big['rss_mib']:.1f} MiB at scale {meta['scale']}: {ratio:.2f} ×",
                            "met": ratio <= 1.10, "by": None if ratio <= 1.10 else f"grows {(ratio - 1) * 100:.0f}%"})
    return {"md": L, "targets": targets, "json": {"rows": rows, "small": small, "rss_by_size": sizes}}
