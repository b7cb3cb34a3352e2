#!/usr/bin/env python3
"""make bench report: medians of the samples run.sh wrote, ratios, targets; Markdown, JSON, PNG.

usage: report.py META.json SAMPLES.jsonl OUTDIR STAMP
Writes OUTDIR/bench-STAMP.{md,json,png} and OUTDIR/latest.{md,json,png}; prints the Markdown.
"""
import importlib
import json
import os
import shutil
import statistics
import sys

MiB = 1048576.0
PGBR_CODEC = {"zstd": "zst", "lz4": "lz4"}
OPS = [("backup", "full backup"), ("restore", "full restore"), ("verify", "backup-verify (reads, writes nothing)"),
       ("delta", "delta backup (5% of rows updated)")]
TOOL_ORDER = {"floor": -1, "tar|zstd": 0, "walc": 1, "pgbackrest": 2, "wal-g": 3}
PEERS = ("pgbackrest", "wal-g")
# sections in modules of their own: report_NAME.section(meta, samples) -> {"md": [Markdown lines],
# "targets": [{"target", "measured", "met", "by"}], "json": {...}}; their samples have ops of
# their own, which the main tables leave out
SECTIONS = ["delta_restore", "s3", "wal", "archive", "remote"]
# targets from the issue
PUSH_VS_LIMIT = 1.05
FETCH_VS_PGBR = 0.8
VS_FASTER_PEER = 0.5  # issue 20: backup-push and full restore against the faster of pgBackRest and WAL-G
VERIFY_VS_FETCH = 0.8
VS_FLOOR = 1.15  # issue 49: full backup against the CPU floor, full restore against the disk floor
FLOOR_NAME = {"backup": "CPU floor", "restore": "disk floor"}
RSS_LIMIT_MIB = 64
DELTA_FRACTION = 0.15


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=1):
    if x is None:
        return "—"
    return f"{x:.{nd}f}"


def cell(s):
    """a Markdown table cell: escape the pipes"""
    return str(s).replace("|", "\\|")


def load(meta_path, samples_path):
    meta = json.load(open(meta_path))
    samples = [json.loads(line) for line in open(samples_path) if line.strip()]
    return meta, samples


def group(samples):
    rows = {}
    for s in samples:
        if s["run"] == 0:  # set-up backups (the pgBackRest base of the diff) are not figures
            continue
        key = (s["dataset"], s["op"], s["tool"], s["codec"], s["settings"])
        rows.setdefault(key, {})[s["run"]] = s
    return rows


def summarize(key, runs):
    vals = list(runs.values())
    return {
        "dataset": key[0], "op": key[1], "tool": key[2], "codec": key[3], "settings": key[4],
        "runs": len(vals),
        "wall_s": med([v["wall"] for v in vals]),
        "cpu_s": med([v["user"] + v["sys"] for v in vals]),
        "user_s": med([v["user"] for v in vals]),
        "sys_s": med([v["sys"] for v in vals]),
        "rss_mib": med([v["rss_kb"] / 1024.0 for v in vals]),
        "bytes": med([v["bytes"] for v in vals]),
        "backup_stop_s": med([v.get("stop_s") for v in vals]),
        "server_cpu_s": med([v.get("server_cpu") for v in vals]),
    }


def paired_ratio(a, b, field="wall"):
    """median over runs present in both of a[run][field] / b[run][field]"""
    rs = [a[r][field] / b[r][field] for r in a if r in b and b[r][field]]
    return med(rs)


def faster_peer_ratio(runs, peer_runs):
    """median over runs of walc's wall / the faster peer's wall in the same run"""
    rs = []
    for r in runs:
        walls = [p[r]["wall"] for p in peer_runs if r in p and p[r]["wall"]]
        if walls:
            rs.append(runs[r]["wall"] / min(walls))
    return med(rs)


def main():
    meta_path, samples_path, outdir, stamp = sys.argv[1:5]
    meta, samples = load(meta_path, samples_path)
    groups = group(samples)
    rows = []
    extra = {}
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    for name in SECTIONS:
        extra[name] = importlib.import_module("report_" + name).section(meta, samples)
    for key, runs in groups.items():
        if key[1] not in dict(OPS):
            continue
        row = summarize(key, runs)
        ds, op, tool, codec, settings = key
        if tool == "walc":
            pc = PGBR_CODEC.get(codec)
            peer = [k for k in groups if k[0] == ds and k[1] == op and k[2] == "pgbackrest" and k[3] == pc]
            if peer:
                row["wall_vs_pgbackrest"] = paired_ratio(runs, groups[peer[0]])
                row["bytes_vs_pgbackrest"] = paired_ratio(runs, groups[peer[0]], "bytes") if op != "restore" else None
            walg = [k for k in groups if k[0] == ds and k[1] == op and k[2] == "wal-g" and k[3] == codec]
            if walg:
                row["wall_vs_walg"] = paired_ratio(runs, groups[walg[0]])
            if peer or walg:
                row["wall_vs_faster_peer"] = faster_peer_ratio(runs, [groups[k] for k in peer[:1] + walg[:1]])
            fl = [k for k in groups if k[0] == ds and k[1] == op and k[2] == "floor"]
            if fl:
                row["wall_vs_floor"] = paired_ratio(runs, groups[fl[0]])
            lim = [k for k in groups if k[0] == ds and k[1] == op and k[2] == "tar|zstd"]
            if lim:
                row["wall_vs_limit"] = paired_ratio(runs, groups[lim[0]])
                lr = groups[lim[0]]
                if op == "backup":  # without PostgreSQL's wait for the archiver in pg_backup_stop
                    row["wall_vs_limit_without_stop"] = med([(runs[k]["wall"] - runs[k]["stop_s"]) / lr[k]["wall"]
                                                             for k in runs if k in lr and runs[k].get("stop_s") is not None])
        rows.append(row)
    opi = {o: i for i, (o, _) in enumerate(OPS)}
    dsi = {d: i for i, d in enumerate(["pgbench", "mixed", "small"])}
    rows.sort(key=lambda r: (dsi.get(r["dataset"], 9), opi.get(r["op"], 9), TOOL_ORDER.get(r["tool"], 9),
                             0 if r["settings"] != "default" else 1, r["codec"] != "zstd" and r["codec"] != "zst"))

    def find(ds, op, tool, codec=None, settings=None):
        for r in rows:
            if r["dataset"] == ds and r["op"] == op and r["tool"] == tool and \
                    (codec is None or r["codec"] == codec) and (settings is None or r["settings"] == settings):
                return r
        return None

    # ---- targets
    targets = []
    for ds in ("pgbench", "mixed"):
        w = find(ds, "backup", "walc", "zstd", "best")
        if w and w.get("wall_vs_limit") is not None:
            v = w["wall_vs_limit"]
            ws = w.get("wall_vs_limit_without_stop")
            targets.append({"target": f"{ds}: backup-push wall ≤ {PUSH_VS_LIMIT} × tar|zstd limit",
                            "measured": f"{v:.2f} ×" + (f" ({ws:.2f} × without the {w['backup_stop_s']:.1f} s "
                                                          f"pg_backup_stop waits for the archiver)" if ws else ""),
                            "met": v <= PUSH_VS_LIMIT,
                            "by": None if v <= PUSH_VS_LIMIT else f"{(v / PUSH_VS_LIMIT - 1) * 100:.0f}% over"})
        for op, what in (("backup", "backup-push"), ("restore", "full restore")):
            w = find(ds, op, "walc", "zstd", "best")
            if w and w.get("wall_vs_walg") is not None:
                v = w["wall_vs_faster_peer"]
                targets.append({"target": f"{ds}: {what} wall ≤ {VS_FASTER_PEER} × the faster of pgBackRest and WAL-G (zstd)",
                                "measured": f"{v:.2f} × (walc/pgBackRest {fmt(w.get('wall_vs_pgbackrest'), 2)}, "
                                            f"walc/WAL-G {fmt(w.get('wall_vs_walg'), 2)})",
                                "met": v <= VS_FASTER_PEER,
                                "by": None if v <= VS_FASTER_PEER else f"{(v / VS_FASTER_PEER - 1) * 100:.0f}% over"})
        for op in ("backup", "restore"):
            w = find(ds, op, "walc", "zstd", "best")
            if w and w.get("wall_vs_floor") is not None:
                v = w["wall_vs_floor"]
                targets.append({"target": f"{ds}: full {op} wall ≤ {VS_FLOOR} × the {FLOOR_NAME[op]} (zstd)",
                                "measured": f"{v:.2f} ×", "met": v <= VS_FLOOR,
                                "by": None if v <= VS_FLOOR else f"{(v / VS_FLOOR - 1) * 100:.0f}% over"})
        w = find(ds, "restore", "walc", "zstd", "best")
        if w and w.get("wall_vs_pgbackrest") is not None:
            v = w["wall_vs_pgbackrest"]
            targets.append({"target": f"{ds}: backup-fetch wall ≤ {FETCH_VS_PGBR} × pgBackRest restore (zstd)",
                            "measured": f"{v:.2f} ×", "met": v <= FETCH_VS_PGBR,
                            "by": None if v <= FETCH_VS_PGBR else f"{(v / FETCH_VS_PGBR - 1) * 100:.0f}% over"})
        v_rows = (groups.get((ds, "verify", "walc", "zstd", "best")), groups.get((ds, "restore", "walc", "zstd", "best")))
        if all(v_rows):
            v = paired_ratio(*v_rows)
            if v is not None:
                targets.append({"target": f"{ds}: backup-verify wall ≤ {VERIFY_VS_FETCH} × backup-fetch (zstd)",
                                "measured": f"{v:.2f} ×", "met": v <= VERIFY_VS_FETCH,
                                "by": None if v <= VERIFY_VS_FETCH else f"{(v / VERIFY_VS_FETCH - 1) * 100:.0f}% over"})
    walc_rss = [r for r in rows if r["tool"] == "walc"]
    if walc_rss:
        worst = max(walc_rss, key=lambda r: r["rss_mib"])
        v = worst["rss_mib"]
        targets.append({"target": f"walc peak RSS ≤ {RSS_LIMIT_MIB} MiB to file storage (every row)",
                        "measured": f"{v:.1f} MiB ({worst['dataset']} {worst['op']} {worst['codec']} {worst['settings']})",
                        "met": v <= RSS_LIMIT_MIB,
                        "by": None if v <= RSS_LIMIT_MIB else f"{v - RSS_LIMIT_MIB:.1f} MiB over"})
    # issue 49: walc's peak RSS at most every peer's, same dataset, operation and codec family
    worst = None
    for r in rows:
        if r["tool"] != "walc" or r["settings"] != "best" or r["codec"] != "zstd":
            continue
        for p in rows:
            if p["tool"] in PEERS and p["dataset"] == r["dataset"] and p["op"] == r["op"] and \
                    p["codec"] in ("zstd", "zst") and p["rss_mib"]:
                v = r["rss_mib"] / p["rss_mib"]
                if worst is None or v > worst[0]:
                    worst = (v, r, p)
    if worst:
        v, r, p = worst
        targets.append({"target": "walc peak RSS ≤ every peer's (zstd, file storage, each dataset and operation)",
                        "measured": f"{v:.2f} × at most ({r['dataset']} {r['op']}: walc {r['rss_mib']:.1f} MiB, "
                                    f"{p['tool']} {p['rss_mib']:.1f} MiB)",
                        "met": v <= 1, "by": None if v <= 1 else f"{(v - 1) * 100:.0f}% over"})
    rss_sizes = {}
    for op, what in (("backup", "backup-push"), ("restore", "backup-fetch")):
        small = find("small", op, "walc", settings="default")
        big = find("pgbench", op, "walc", settings="default")
        if small and big:
            ratio = big["rss_mib"] / small["rss_mib"]
            rss_sizes[what] = {"small_scale": meta["small_scale"], "small_mib": small["rss_mib"],
                               "scale": meta["scale"], "mib": big["rss_mib"], "ratio": ratio}
            targets.append({"target": f"{what} peak RSS (default settings) does not grow with the database",
                            "measured": f"{small['rss_mib']:.1f} MiB at scale {meta['small_scale']}, "
                                        f"{big['rss_mib']:.1f} MiB at scale {meta['scale']}: {ratio:.2f} ×",
                            "met": ratio <= 1.10 and big["rss_mib"] <= RSS_LIMIT_MIB,
                            "by": None if ratio <= 1.10 else f"grows {(ratio - 1) * 100:.0f}%"})
    for r in rows:
        if r["dataset"] == "small" and r["op"] == "restore" and r["settings"].startswith("default, "):
            v = r["rss_mib"]
            rss_sizes["backup-fetch, many partitions"] = {"settings": r["settings"], "mib": v}
            targets.append({"target": f"backup-fetch peak RSS ≤ {RSS_LIMIT_MIB} MiB at default settings from a backup of "
                                      f"{r['settings'].split(', ')[1]} (a 20+ GiB database has as many)",
                            "measured": f"{v:.1f} MiB", "met": v <= RSS_LIMIT_MIB,
                            "by": None if v <= RSS_LIMIT_MIB else f"{v - RSS_LIMIT_MIB:.1f} MiB over"})
    delta = {}
    for tool, codec in (("walc", "zstd"), ("pgbackrest", "zst"), ("wal-g", "zstd")):
        d = find("pgbench", "delta", tool, codec)
        f = find("pgbench", "backup", tool, codec, "best" if tool == "walc" else None)
        if d and f and f["bytes"]:
            delta[tool] = {"delta_bytes": d["bytes"], "full_bytes": f["bytes"], "fraction": d["bytes"] / f["bytes"]}
    if "walc" in delta:
        v = delta["walc"]["fraction"]
        targets.append({"target": f"delta after 5% of pgbench_accounts rows updated < {DELTA_FRACTION:.0%} of the full",
                        "measured": f"{v:.1%}" + "".join(f" ({name}: {delta[t]['fraction']:.1%})" for t, name in
                                                         (("pgbackrest", "pgBackRest diff"), ("wal-g", "WAL-G delta"))
                                                         if t in delta),
                        "met": v < DELTA_FRACTION,
                        "by": None if v < DELTA_FRACTION else f"{(v - DELTA_FRACTION) * 100:.1f} points over"})
    if "walc" in delta and "pgbackrest" in delta and meta.get("postgres_major", 15) >= 18:
        v = delta["walc"]["delta_bytes"] / delta["pgbackrest"]["delta_bytes"]
        targets.append({"target": f"delta bytes ≤ {meta['pgbackrest']}'s block incremental after the same change",
                        "measured": f"{v:.2f} × ({delta['walc']['delta_bytes'] / MiB:.1f} MiB against "
                                    f"{delta['pgbackrest']['delta_bytes'] / MiB:.1f} MiB)",
                        "met": v <= 1, "by": None if v <= 1 else f"{(v - 1) * 100:.0f}% more"})

    # ---- Markdown
    L = []
    L.append(f"# walc bench, {meta['date']}")
    L.append("")
    L.append(f"PostgreSQL {meta.get('postgres_major', 15)}: pgbench scale {meta['scale']}, mixed dataset {meta['mixed_mb']} MB, "
             f"median of {meta['runs']} run(s), "
             f"{meta['cores']} cores ({meta['cpu']}), file storage on local disk; {meta['walc']}, {meta['pgbackrest']}, "
             f"{meta.get('walg') or 'no WAL-G'}, {meta.get('barman') or 'no Barman Cloud'}, "
             f"{meta['zstd']}, {meta['postgres']}; the run took {meta['seconds'] // 60} min.")
    L.append("")
    L.append("walc *best*: `WALG_UPLOAD_DISK_CONCURRENCY=cores`; *default*: nothing set but the prefix (lz4, one packer). "
             "pgBackRest: `process-max=cores`, zst level 3 / lz4 default level. WAL-G: `WALG_UPLOAD_DISK_CONCURRENCY=cores`, "
             "its defaults otherwise. Ratios are medians of per-run ratios "
             "(both measured in the same run); < 1 means walc is faster. *floor*: the machine's own limits on the same "
             "bytes in the same rotation (backup: zstd -3 on every core from the page cache to /dev/null; restore: dd "
             "from the page cache, fsync), *walc/floor* against them. CPU = user + sys of every process; "
             "peak RSS = the largest single process (/usr/bin/time %M); stored = bytes in the repository for that backup.")
    L.append("")
    for ds in ("pgbench", "mixed", "small"):
        drows = [r for r in rows if r["dataset"] == ds]
        if not drows:
            continue
        size = meta["pgdata_bytes"].get(ds)
        title = {"pgbench": f"pgbench, scale {meta['scale']}", "mixed": "mixed (text, JSONB, random bytes)",
                 "small": f"pgbench, scale {meta['small_scale']} (peak RSS check)"}[ds]
        L.append(f"## {title}" + (f", PGDATA {size / MiB:.0f} MiB" if size else ""))
        L.append("")
        L.append("| operation | tool | codec | settings | wall s | CPU s | peak RSS MiB | stored MiB | wall walc/pgBackRest "
                 "| wall walc/WAL-G | wall walc/faster peer | wall walc/limit | wall walc/floor |")
        L.append("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in drows:
            opname = dict(OPS).get(r["op"], r["op"])
            # a floor stores nothing: its bytes are what it read
            stored = fmt(r["bytes"] / MiB) if r["op"] != "restore" and r["tool"] != "floor" and r["bytes"] is not None else ""
            L.append(f"| {opname} | {cell(r['tool'])} | {r['codec']} | {cell(r['settings'])} | {fmt(r['wall_s'])} | {fmt(r['cpu_s'])} | "
                     f"{fmt(r['rss_mib'])} | {stored} | {fmt(r.get('wall_vs_pgbackrest'), 2)} | "
                     f"{fmt(r.get('wall_vs_walg'), 2)} | {fmt(r.get('wall_vs_faster_peer'), 2)} | {fmt(r.get('wall_vs_limit'), 2)} | "
                     f"{fmt(r.get('wall_vs_floor'), 2)} |")
        L.append("")
    for name in SECTIONS:
        L.extend(extra[name]["md"])
        targets.extend(extra[name]["targets"])
    L.append("## Targets")
    L.append("")
    L.append("| target | measured | met |")
    L.append("|---|---|---|")
    for t in targets:
        L.append(f"| {cell(t['target'])} | {t['measured']} | {'yes' if t['met'] else 'NO, ' + t['by']} |")
    L.append("")
    md = "\n".join(L)

    base = os.path.join(outdir, f"bench-{stamp}")
    with open(base + ".md", "w") as f:
        f.write(md)
    with open(base + ".json", "w") as f:
        json.dump({"meta": meta, "rows": rows, "targets": targets, "rss_by_size": rss_sizes,
                   "delta": delta, "sections": {n: e["json"] for n, e in extra.items()},
                   "samples": samples}, f, indent=1)
    chart(rows, meta, base + ".png")
    for ext in ("md", "json", "png"):
        if os.path.exists(f"{base}.{ext}"):
            shutil.copyfile(f"{base}.{ext}", os.path.join(outdir, f"latest.{ext}"))
    print(md)


def chart(rows, meta, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no chart", file=sys.stderr)
        return
    dss = [d for d in ("pgbench", "mixed") if any(r["dataset"] == d for r in rows)]
    if not dss:
        return
    fig, axes = plt.subplots(1, len(dss), figsize=(7 * len(dss), 4.8), squeeze=False)
    for ax, ds in zip(axes[0], dss):
        labels, back, rest = [], [], []
        for tool, codec, settings, label in (("tar|zstd", "zstd", None, "tar|zstd -3\n(limit)"),
                                             ("walc", "zstd", "best", "walc zstd"),
                                             ("pgbackrest", "zst", None, "pgBackRest zst"),
                                             ("walc", "lz4", "best", "walc lz4"),
                                             ("wal-g", "zstd", None, "WAL-G zstd"),
                                             ("pgbackrest", "lz4", None, "pgBackRest lz4"),
                                             ("wal-g", "lz4", None, "WAL-G lz4"),
                                             ("walc", "lz4", "default", "walc default\n(lz4, 1 packer)")):
            def w(op):
                for r in rows:
                    if r["dataset"] == ds and r["op"] == op and r["tool"] == tool and r["codec"] == codec and \
                            (settings is None or r["settings"] == settings):
                        return r["wall_s"]
                return 0
            labels.append(label)
            back.append(w("backup"))
            rest.append(w("restore"))
        x = range(len(labels))
        ax.bar([i - 0.2 for i in x], back, 0.4, label="full backup")
        ax.bar([i + 0.2 for i in x], rest, 0.4, label="full restore")
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel("wall seconds (median)")
        size = meta["pgdata_bytes"].get(ds, 0) / MiB
        ax.set_title(f"{ds} ({size:.0f} MiB PGDATA), {meta['cores']} cores")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
