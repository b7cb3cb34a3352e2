#!/usr/bin/python3
"""Checks of a file repository (and of restored directories) after faults.

usage:
  fault_check.py repo WALC REPO [--segments DIR] [--wal-size BYTES] [--markers MARKERDIR]
      Every visible object under REPO (no path component starting with ".") must decode
      completely with `walc st get` (decrypted with the key in the environment, decompressed
      by extension); decoded tars must parse to the end (python's tarfile reads every member),
      JSON must parse, and a WAL segment object must be WAL-size bytes (--wal-size) and, with
      --segments, byte-identical to DIR/NAME. Hidden ".NAME.walc-tmp.*" temporaries are
      counted, not decoded; any other hidden file is an error. With --markers, every wal-push
      marker in MARKERDIR (a segment PostgreSQL will be told is archived without an upload)
      must name a segment that has an object here, and the checks above found it complete.
      Prints "objects N tars N json N wal N hidden N markers N" and exits 1 listing each
      failure.
  fault_check.py tree DIR
      Prints "path size sha256" for every regular file under DIR, sorted (for comparisons).
  fault_check.py rss FILE CMD [ARG...]
      Runs CMD, writes its peak resident set (KiB, getrusage of the child) to FILE and exits
      with CMD's status (128 + N when a signal N ended it).
"""
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile

CODEC_EXT = (".lz4", ".zst", ".br", ".lzma")


def visible(rel):
    return not any(p.startswith(".") for p in rel.split("/"))


def st_get(walc, repo, key, out):
    env = dict(os.environ, WALG_FILE_PREFIX=repo)
    # Sentinels and metadata are stored as plain JSON (as WAL-G does), never encrypted.
    extra = ["--no-decrypt"] if key.endswith(".json") else []
    p = subprocess.run([walc, "st", "get"] + extra + [key, out], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stderr.decode(errors="replace").strip()


def strip_codec(key):
    for e in CODEC_EXT:
        if key.endswith(e):
            return key[: -len(e)]
    return key


def is_segment(name):
    return len(name) == 24 and all(c in "0123456789ABCDEF" for c in name)


def check_repo(walc, repo, segdir, wal_size, markerdir):
    fails = []
    counts = dict(objects=0, tars=0, json=0, wal=0, hidden=0, markers=0)
    segments = {}  # segment name -> True while every object of it decoded to the segment
    tmp = tempfile.mkdtemp(prefix="fault-check-")
    out = os.path.join(tmp, "obj")
    try:
        for root, dirs, files in os.walk(repo):
            for f in files:
                rel = os.path.relpath(os.path.join(root, f), repo)
                if not visible(rel):
                    if ".walc-tmp." in f:
                        counts["hidden"] += 1
                    else:
                        fails.append(f"{rel}: unexpected hidden file")
                    continue
                counts["objects"] += 1
                rc, err = st_get(walc, repo, rel, out)
                plain = strip_codec(rel)
                if rc != 0:
                    fails.append(f"{rel}: walc st get exit {rc}: {err}")
                    segments[os.path.basename(plain)] = False
                    continue
                if plain.endswith(".tar"):
                    counts["tars"] += 1
                    try:
                        with tarfile.open(out, "r:") as tf:
                            for m in tf:
                                if m.isfile():
                                    r = tf.extractfile(m)
                                    while r.read(1 << 20):
                                        pass
                    except (tarfile.TarError, OSError, EOFError) as e:
                        fails.append(f"{rel}: decoded tar does not parse: {e}")
                elif plain.endswith(".json"):
                    counts["json"] += 1
                    try:
                        with open(out, "rb") as fh:
                            json.loads(fh.read())
                    except ValueError as e:
                        fails.append(f"{rel}: not JSON: {e}")
                elif plain.startswith("wal_005/") and is_segment(os.path.basename(plain)):
                    counts["wal"] += 1
                    name = os.path.basename(plain)
                    size = os.path.getsize(out)
                    good = True
                    if wal_size and size != wal_size:
                        fails.append(f"{rel}: decodes to {size} bytes, not {wal_size}")
                        good = False
                    elif segdir:
                        with open(out, "rb") as a, open(os.path.join(segdir, name), "rb") as b:
                            if a.read() != b.read():
                                fails.append(f"{rel}: differs from {segdir}/{name}")
                                good = False
                    segments[name] = segments.get(name, True) and good
    finally:
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    # A marker is checked against the objects decoded above, not decoded again: one walc
    # process per object is what this check costs under the sanitized build.
    markers = sorted(os.listdir(markerdir)) if markerdir and os.path.isdir(markerdir) else []
    for name in markers:
        counts["markers"] += 1
        if name not in segments:
            fails.append(f"marker {name}: no object in the repository")
        elif not segments[name]:
            fails.append(f"marker {name}: its object is not the complete segment")
    print(" ".join(f"{k} {v}" for k, v in counts.items()))
    for f in fails:
        print("FAIL: " + f)
    return 1 if fails else 0


def tree(d):
    rows = []
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            rows.append(f"{os.path.relpath(p, d)} {os.path.getsize(p)} {h.hexdigest()}")
    print("\n".join(sorted(rows)))
    return 0


def rss(out, cmd):
    import resource
    rc = subprocess.call(cmd)
    with open(out, "w") as f:
        f.write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return 128 - rc if rc < 0 else rc


def main():
    a = sys.argv[1:]
    if len(a) >= 3 and a[0] == "rss":
        return rss(a[1], a[2:])
    if len(a) >= 3 and a[0] == "repo":
        segdir, wal_size, markerdir = None, 0, None
        rest = a[3:]
        while rest:
            if rest[0] == "--segments":
                segdir = rest[1]
            elif rest[0] == "--wal-size":
                wal_size = int(rest[1])
            elif rest[0] == "--markers":
                markerdir = rest[1]
            else:
                sys.exit(__doc__)
            rest = rest[2:]
        return check_repo(a[1], a[2], segdir, wal_size, markerdir)
    if len(a) == 2 and a[0] == "tree":
        return tree(a[1])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
