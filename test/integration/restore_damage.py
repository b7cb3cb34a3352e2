#!/usr/bin/python3
"""Damage done to a backup's objects on purpose, for the restore-check tests.

usage:
  restore_damage.py largest TAR [NAMES]  the largest regular member of the uncompressed tar
                                         TAR (only those listed in the file NAMES, one a line,
                                         when given): prints "OFFSET NAME", OFFSET being the
                                         middle of its content in TAR
  restore_damage.py drop TAR OUT NAME    TAR without member NAME, written to OUT (PAX format)
  restore_damage.py files META KEY [not] the names of files_metadata.json's Files whose entry
                                         has KEY true (e.g. IsIncremented), one a line; with
                                         "not", the regular files whose entry has not
  restore_damage.py sentinel SENTINEL KEY ADD
                                         adds ADD to the sentinel's number KEY (LSN, FinishLSN,
                                         SystemIdentifier)
"""
import json
import sys
import tarfile


def largest(path, names_file=None):
    wanted = None
    if names_file:
        with open(names_file) as f:
            wanted = set(f.read().split())
    best = None
    with tarfile.open(path, "r:") as t:
        for m in t.getmembers():
            if m.isfile() and m.size > 0 and (wanted is None or m.name in wanted):
                if best is None or m.size > best.size:
                    best = m
    if best is None:
        return 1
    print(best.offset_data + best.size // 2, best.name)
    return 0


def drop(path, out, name):
    found = False
    with tarfile.open(path, "r:") as src, tarfile.open(out, "w:", format=tarfile.PAX_FORMAT) as dst:
        for m in src.getmembers():
            if m.name == name:
                found = True
                continue
            dst.addfile(m, src.extractfile(m) if m.isfile() else None)
    return 0 if found else 1


def files(meta, key, negate=""):
    d = json.load(open(meta))
    for name, rec in d["Files"].items():
        if not isinstance(rec, dict):
            continue
        if negate == "not":
            if rec.get(key) is not True and "Checksum" in rec:
                print(name)
        elif rec.get(key) is True:
            print(name)
    return 0


def sentinel(path, key, add):
    d = json.load(open(path))
    d[key] += int(add)
    json.dump(d, open(path, "w"))
    return 0


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "largest" and len(sys.argv) in (3, 4):
        return largest(*sys.argv[2:])
    if cmd == "drop" and len(sys.argv) == 5:
        return drop(*sys.argv[2:])
    if cmd == "files" and len(sys.argv) in (4, 5):
        return files(*sys.argv[2:])
    if cmd == "sentinel" and len(sys.argv) == 5:
        return sentinel(*sys.argv[2:])
    sys.stderr.write(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main())
