#!/usr/bin/python3
"""Grandfather-father-son retention, modelled apart from walc for test_retention_gfs.sh.

usage:
  retention_gfs.py fake REPO NAME START
      rewrites backup NAME's times (sentinel StartTime/FinishTime, metadata.json start_time/
      finish_time) so that it started at START (RFC 3339, UTC) and took as long as it did
  retention_gfs.py expect REPO NOW ZONE DAILY WEEKLY MONTHLY YEARLY WINDOW_SECONDS
      the backups (oldest first, by name) that must be kept: the newest backup of each of the
      last DAILY days, WEEKLY ISO weeks, MONTHLY months, YEARLY years that have one (in ZONE),
      the newest that ended at or before NOW - WINDOW_SECONDS, and every base of a kept delta;
      then "window NAME": the one the window starts from
"""
import datetime
import json
import os
import sys
import zoneinfo

BB = "basebackups_005"
SENT = "_backup_stop_sentinel.json"


def parse(t):
    return datetime.datetime.fromisoformat(t)


def fmt(d):
    return d.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000000Z")


def fake(repo, name, start):
    sp = os.path.join(repo, BB, name + SENT)
    mp = os.path.join(repo, BB, name, "metadata.json")
    s = json.load(open(sp))
    took = parse(s["FinishTime"]) - parse(s["StartTime"])
    new = parse(start)
    s["StartTime"], s["FinishTime"] = fmt(new), fmt(new + took)
    json.dump(s, open(sp, "w"), separators=(",", ":"))
    m = json.load(open(mp))
    m["start_time"], m["finish_time"] = fmt(new), fmt(new + took)
    json.dump(m, open(mp, "w"), separators=(",", ":"))


def expect(repo, now, zone, counts, window):
    tz = zoneinfo.ZoneInfo(zone)
    backups = []
    for f in sorted(os.listdir(os.path.join(repo, BB))):
        if f.endswith(SENT):
            s = json.load(open(os.path.join(repo, BB, f)))
            backups.append((f[: -len(SENT)], parse(s["StartTime"]), parse(s["FinishTime"]),
                            s.get("DeltaFrom") or None))
    keep = set()
    periods = [lambda d: d.date(), lambda d: d.isocalendar()[:2], lambda d: (d.year, d.month),
               lambda d: d.year]
    last = [None] * 4
    used = [0] * 4
    for name, start, _finish, _base in reversed(backups):
        local = start.astimezone(tz)
        for k in range(4):
            p = periods[k](local)
            if used[k] < counts[k] and p != last[k]:
                keep.add(name)
                used[k] += 1
                last[k] = p
    base = None
    cutoff = datetime.datetime.fromtimestamp(now - window, datetime.timezone.utc)
    for name, _start, finish, _base in reversed(backups):
        if finish <= cutoff:
            base = name
            break
    base = base or backups[0][0]
    keep.add(base)
    bases = {n: b for n, _s, _f, b in backups}
    for name in list(keep):
        while bases.get(name):
            name = bases[name]
            keep.add(name)
    for name, *_ in backups:
        if name in keep:
            print(name)
    print("window", base)


if __name__ == "__main__":
    if sys.argv[1] == "fake":
        fake(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "expect":
        a = sys.argv
        expect(a[2], int(a[3]), a[4], [int(x) for x in a[5:9]], int(a[9]))
    else:
        sys.exit(__doc__)
