#!/usr/bin/python3
"""Hostile (and one benign) tar partitions for test_hostile_tar.sh.

usage: backup_hostile.py CASE OUT.tar [ARG]

Cases (member names as WAL-G writes them, with a leading "/", unless the case is about that):
  ok          benign members only: /, /PG_VERSION, /base/, /base/1/, /base/1/1259 (256 KiB)
  dotdot      /PG_VERSION, then ../x
  abs         /PG_VERSION, then /../../../../../../../../../../ARG  (ARG: an absolute path)
  mid         /PG_VERSION, then base/../../x
  midslash    /PG_VERSION, then /base/../../x
  symlink     link -> /etc (symlink member), then link/passwd
  symlink2    link2 -> ARG (symlink member, ARG: a directory outside DEST), then link2/victim
  hardlink    hl => /etc/passwd (hardlink member)
  hardlink2   hl2 => ARG (hardlink member, ARG: a file outside DEST), then hl2 (regular, "pwned")
  truncated   like ok, with the tar stream cut inside /base/1/1259's data
"""
import io
import sys
import tarfile


def reg(tf, name, data):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.REGTYPE
    ti.size = len(data)
    ti.mode = 0o600
    ti.mtime = 1700000000
    tf.addfile(ti, io.BytesIO(data))


def dirent(tf, name):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.DIRTYPE
    ti.mode = 0o700
    ti.mtime = 1700000000
    tf.addfile(ti)


def link(tf, name, target, kind):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.linkname = target
    ti.mode = 0o777 if kind == tarfile.SYMTYPE else 0o600
    ti.mtime = 1700000000
    tf.addfile(ti)


def pattern(n):
    # deterministic, not very compressible
    out = bytearray()
    x = 12345
    while len(out) < n:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out += x.to_bytes(4, "little")
    return bytes(out[:n])


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 64
    case, out = sys.argv[1], sys.argv[2]
    arg = sys.argv[3] if len(sys.argv) > 3 else ""
    buf = io.BytesIO()
    # PAX keeps names exactly as given (no prefix splitting surprises); names stay < 100 bytes
    tf = tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT)
    if case in ("ok", "truncated"):
        dirent(tf, "/")
        reg(tf, "/PG_VERSION", b"15\n")
        dirent(tf, "/base")
        dirent(tf, "/base/1")
        reg(tf, "/base/1/1259", pattern(256 * 1024))
    elif case == "dotdot":
        reg(tf, "/PG_VERSION", b"15\n")
        reg(tf, "../x", b"escaped\n")
    elif case == "abs":
        reg(tf, "/PG_VERSION", b"15\n")
        reg(tf, "/../../../../../../../../../.." + arg, b"escaped\n")
    elif case == "mid":
        reg(tf, "/PG_VERSION", b"15\n")
        reg(tf, "base/../../x", b"escaped\n")
    elif case == "midslash":
        reg(tf, "/PG_VERSION", b"15\n")
        reg(tf, "/base/../../x", b"escaped\n")
    elif case == "symlink":
        link(tf, "link", "/etc", tarfile.SYMTYPE)
        reg(tf, "link/passwd", b"pwned::0:0::/:/bin/sh\n")
    elif case == "symlink2":
        link(tf, "link2", arg, tarfile.SYMTYPE)
        reg(tf, "link2/victim", b"pwned\n")
    elif case == "hardlink":
        link(tf, "hl", "/etc/passwd", tarfile.LNKTYPE)
    elif case == "hardlink2":
        link(tf, "hl2", arg, tarfile.LNKTYPE)
        reg(tf, "hl2", b"pwned\n")
    else:
        sys.stderr.write("unknown case %s\n" % case)
        return 64
    tf.close()
    data = buf.getvalue()
    if case == "truncated":
        # cut in the middle of /base/1/1259's content (it starts after a few KiB of headers)
        data = data[: len(data) // 2]
    with open(out, "wb") as f:
        f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
