"""make bench report, section remote (remote_peers.sh): walc's remote full backup-push (no PGDATA,
BASE_BACKUP over the replication protocol) against pg_basebackup with the same compression and
WAL-G's remote backup-push, then the restores; remote.sh's own figures stay in remote.json."""
from report import MiB, cell, fmt, group, med, paired_ratio, summarize

VS_PGBB = 1.0  # issue 49: remote full against pg_basebackup with the same compression
VS_WALG = 0.5  # and against WAL-G's remote push
OPS = {"remote-backup": "remote full backup", "remote-restore": "restore of it"}


def section(meta, samples):
    groups = {k: v for k, v in group(samples).items() if k[1] in OPS}
    if not groups:
        return {"md": [], "targets": [], "json": {}}
    wire = {}
    for s in samples:
        if s.get("op") == "remote-wire" and s.get("wire_bytes") is not None:
            wire.setdefault((s["tool"], s["settings"]), []).append(s["wire_bytes"])

    def side(settings):
        return "server" if "server" in settings else "client"

    # the same side's compression: WAL-G compresses on the client only
    def peer(op, tool, settings):
        return next((k for k in groups if k[1] == op and k[2] == tool and side(k[4]) == side(settings)), None)

    rows = []
    order = {"walc": 0, "pg_basebackup": 1, "wal-g": 2}
    for k in sorted(groups, key=lambda k: (k[1] != "remote-backup", side(k[4]), order.get(k[2], 9))):
        r = summarize(k, groups[k])
        r["wire_bytes"] = med(wire.get((k[2], k[4]), [])) if k[1] == "remote-backup" else None
        if k[2] == "walc":
            pb, wg = peer(k[1], "pg_basebackup", k[4]), peer(k[1], "wal-g", k[4])
            r["wall_vs_pg_basebackup"] = paired_ratio(groups[k], groups[pb]) if pb else None
            r["wall_vs_walg"] = paired_ratio(groups[k], groups[wg]) if wg else None
        rows.append(r)

    L = [f"## Remote full backup (the CronJob's path), PostgreSQL {meta.get('remote_major')}", ""]
    L.append("A full backup taken over a replication connection (no PGDATA), every client in the same chroot as the "
             "server: walc with zstd on the client (the stream uncompressed on the wire) or on the server "
             "(`WALG_REMOTE_COMPRESSION=zstd`), `pg_basebackup -Ft -X none` with `-Z client-zstd:level=3` or "
             "`-Z server-zstd:level=3`, WAL-G's remote backup-push (zstd on the client) when present. "
             "Client CPU and peak RSS: the client's processes; server CPU: the postmaster and its children "
             "during the run. Wire: walc's count, pg_basebackup's archive (decompressed for client-zstd) plus "
             "its manifest; WAL-G gives none. Restores: backup-fetch; pg_basebackup's archive through zstd -d | "
             "tar -x, then syncfs. walc/peer: the peer with the same side's compression (WAL-G's is the "
             "client's).")
    L.append("")
    L.append("| operation | tool | settings | wall s | client CPU s | server CPU s | peak RSS MiB | wire MiB | "
             "stored MiB | wall walc/pg_basebackup | wall walc/WAL-G |")
    L.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        stored = fmt(r["bytes"] / MiB) if r["op"] == "remote-backup" and r["bytes"] is not None else ""
        w = fmt(r["wire_bytes"] / MiB) if r["wire_bytes"] is not None else ("—" if r["op"] == "remote-backup" else "")
        L.append(f"| {OPS[r['op']]} | {r['tool']} | {cell(r['settings'])} | {fmt(r['wall_s'])} | {fmt(r['cpu_s'])} | "
                 f"{fmt(r.get('server_cpu_s'), 2)} | {fmt(r['rss_mib'])} | {w} | {stored} | "
                 f"{fmt(r.get('wall_vs_pg_basebackup'), 2)} | {fmt(r.get('wall_vs_walg'), 2)} |")
    L.append("")

    targets = []
    for r in rows:
        if r["tool"] != "walc" or r["op"] != "remote-backup":
            continue
        v = r.get("wall_vs_pg_basebackup")
        if v is not None:
            targets.append({"target": f"remote full ({side(r['settings'])} zstd) wall ≤ {VS_PGBB} × pg_basebackup's",
                            "measured": f"{v:.2f} ×", "met": v <= VS_PGBB,
                            "by": None if v <= VS_PGBB else f"{(v / VS_PGBB - 1) * 100:.0f}% over"})
        v = r.get("wall_vs_walg")
        if v is not None:
            targets.append({"target": f"remote full ({side(r['settings'])} zstd) wall ≤ {VS_WALG} × WAL-G's remote push",
                            "measured": f"{v:.2f} ×", "met": v <= VS_WALG,
                            "by": None if v <= VS_WALG else f"{(v / VS_WALG - 1) * 100:.0f}% over"})
    return {"md": L, "targets": targets, "json": {"rows": rows}}
