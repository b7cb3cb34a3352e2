#!/usr/bin/python3
"""Independent model of a WAL-G repository for walc's retention tests (test_retention*.sh).

It reads a file-system repository (WALG_FILE_PREFIX) directly: sentinels, metadata.json and
object names, never walc, and computes what a delete mode must leave behind.

usage:
  retention_repo.py info REPO
      one line per backup, oldest first (metadata start_time):
      NAME TLI SEG END_SEG FULL|DELTA PARENT|- PERMANENT(0|1) START_TIME
  retention_repo.py expect REPO [--gone A,B,...] [--wal all|window] [--orphans keep|window]
                              [--everything]
      the objects (paths relative to REPO, sorted) that must remain when the backups named
      in --gone are deleted. --wal window: a WAL object stays when it has no 24-hex segment
      token (timeline histories, foreign files) or some remaining backup may need it: a
      non-permanent one needs every segment from its start on its timeline and later ones
      (recovery follows promotions), a permanent one the segments from its start to its
      finish on its own timeline. --orphans window: a backup folder without a sentinel goes
      when its segment token is needed by no remaining backup (same rule as WAL).
      --everything: every object of basebackups_005/ and wal_005/ goes, and the cluster
        marker walc_cluster.json (an emptied repository belongs to no cluster); nothing else.
  retention_repo.py restores REPO MARKS
      one line per backup: NAME KEY MAX_MARK. KEY hashes every object a restore of NAME to
      the end of its WAL reads (its chain's objects, the contiguous run of WAL segments from
      its start on its timeline); MAX_MARK is the highest mark (MARKS: lines "I SEGMENT", the
      segment holding mark I's commit) that replay of that run must reach.

Segment arithmetic uses WALG_PG_WAL_SIZE (MiB, default 16) from the environment.
"""
import hashlib
import json
import os
import re
import sys

BB = "basebackups_005/"
WAL = "wal_005/"
SENT = "_backup_stop_sentinel.json"
SEG_MB = int(os.environ.get("WALG_PG_WAL_SIZE", "16"))
SEGSIZE = SEG_MB << 20
PER_ID = (1 << 32) // SEGSIZE
TOKEN = re.compile(r"[0-9A-F]{24}")
SEGFILE = re.compile(r"^([0-9A-F]{24})(\.(lz4|zst|br|lzma|gz|lzo))?$")


def parse_seg(name24):
    tli = int(name24[0:8], 16)
    seg = int(name24[8:16], 16) * PER_ID + int(name24[16:24], 16)
    return tli, seg


def seg_name(tli, seg):
    return "%08X%08X%08X" % (tli, seg // PER_ID, seg % PER_ID)


def token(key):
    m = TOKEN.search(key)
    return parse_seg(m.group(0)) if m else None


def ci(d, k):
    for kk, v in d.items():
        if kk.lower() == k.lower():
            return v
    return None


def files(repo):
    out = []
    for root, _dirs, names in os.walk(repo):
        for n in names:
            if n.startswith("."):
                continue
            out.append(os.path.relpath(os.path.join(root, n), repo))
    return sorted(out)


def backups(repo):
    bb = os.path.join(repo, BB)
    res = []
    if not os.path.isdir(bb):
        return res
    for n in os.listdir(bb):
        if not n.endswith(SENT):
            continue
        name = n[: -len(SENT)]
        with open(os.path.join(bb, n)) as f:
            s = json.load(f)
        meta = {}
        mp = os.path.join(bb, name, "metadata.json")
        if os.path.exists(mp):
            with open(mp) as f:
                meta = json.load(f)
        tli, seg = token(name)
        fin = ci(s, "FinishLSN") or 0
        end = max(seg, (fin - 1) // SEGSIZE if fin else seg)
        perm = ci(meta, "is_permanent")
        if perm is None:
            perm = bool(ci(s, "IsPermanent"))
        res.append({
            "name": name, "tli": tli, "seg": seg, "end": end,
            "parent": ci(s, "DeltaFrom"), "perm": bool(perm),
            "start": ci(meta, "start_time") or ci(s, "StartTime") or "",
        })
    res.sort(key=lambda b: (b["start"], b["name"]))
    return res


def needed(kept, tli, seg):
    for b in kept:
        if b["perm"]:
            if tli == b["tli"] and b["seg"] <= seg <= b["end"]:
                return True
        elif tli >= b["tli"] and seg >= b["seg"]:
            return True
    return False


def cmd_info(repo):
    for b in backups(repo):
        print(b["name"], b["tli"], b["seg"], b["end"], "DELTA" if b["parent"] else "FULL",
              b["parent"] or "-", int(b["perm"]), b["start"])


def cmd_expect(repo, args):
    gone, wal, orphans, everything = set(), "all", "keep", False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--gone":
            gone = set(x for x in args[i + 1].split(",") if x)
            i += 1
        elif a == "--wal":
            wal = args[i + 1]
            i += 1
        elif a == "--orphans":
            orphans = args[i + 1]
            i += 1
        elif a == "--everything":
            everything = True
        else:
            raise SystemExit("unknown argument " + a)
        i += 1
    bs = backups(repo)
    names = set(b["name"] for b in bs)
    unknown = gone - names
    if unknown:
        raise SystemExit("expect: no such backups: %s" % sorted(unknown))
    kept = [b for b in bs if b["name"] not in gone]
    for f in files(repo):
        if everything:
            if f.startswith(BB) or f.startswith(WAL) or f == "walc_cluster.json":
                continue
            print(f)
            continue
        if f.startswith(BB):
            rest = f[len(BB):]
            name = rest[: -len(SENT)] if rest.endswith(SENT) and "/" not in rest else rest.split("/")[0]
            if name in gone:
                continue
            if name not in names and orphans == "window":
                t = token(name)
                if t is not None and not needed(kept, *t):
                    continue
        elif f.startswith(WAL) and wal == "window":
            t = token(f[len(WAL):])
            if t is not None and not needed(kept, *t):
                continue
        print(f)


def sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cmd_restores(repo, marks_path):
    marks = []
    with open(marks_path) as f:
        for line in f:
            if line.strip():
                i, s = line.split()
                marks.append((int(i), parse_seg(s)))
    bs = backups(repo)
    byname = {b["name"]: b for b in bs}
    allf = files(repo)
    segs = {}
    for f in allf:
        if f.startswith(WAL):
            m = SEGFILE.match(f[len(WAL):])
            if m:
                segs.setdefault(parse_seg(m.group(1)), []).append(f)
    for b in bs:
        chain, cur = [], b
        while cur is not None:
            chain.append(cur["name"])
            cur = byname.get(cur["parent"]) if cur["parent"] else None
        objs = []
        for n in chain:
            objs += [f for f in allf if f == BB + n + SENT or f.startswith(BB + n + "/")]
        last = b["seg"] - 1
        while (b["tli"], last + 1) in segs:
            last += 1
            objs += segs[(b["tli"], last)]
        h = hashlib.sha256()
        for f in sorted(objs):
            h.update(("%s %s\n" % (f, sha_file(os.path.join(repo, f)))).encode())
        top = 0
        for i, (tli, seg) in marks:
            if tli == b["tli"] and seg <= last:
                top = max(top, i)
        print(b["name"], h.hexdigest()[:32], top)


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    cmd, repo = sys.argv[1], sys.argv[2]
    if cmd == "info":
        cmd_info(repo)
    elif cmd == "expect":
        cmd_expect(repo, sys.argv[3:])
    elif cmd == "restores":
        cmd_restores(repo, sys.argv[3])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
