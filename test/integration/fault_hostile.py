#!/usr/bin/python3
"""Synthetic (and hostile) file repositories for the fault tests.

usage: fault_hostile.py CASE REPO [ARG]

Every repository holds the full backup FULL = base_000000010000000000000002 (minimal sentinel,
no Version, so no files_metadata.json; pg_control.tar.zst with /global/pg_control of 8192
bytes; backup_label.tar.zst with a backup_label; tar_partitions/part_001.tar.zst), compressed
with the zstd CLI. Cases:

  big MB        FULL's part holds /PG_VERSION and /base/1/big: MB MiB of incompressible data
                (ARG: MB), for restores into a full disk
  tar-octal     FULL's part: /PG_VERSION, then /base/1/huge whose octal size field says
                8 GiB - 1 (077777777777) followed by 4 KiB of data and the end of the stream
  tar-b256      as tar-octal, the size in GNU base-256: 2^62
  tar-b256neg   as tar-octal, a negative base-256 size (-1)
  tar-tib       as tar-octal, size exactly 2^40 (walc's largest accepted member) in base-256
  tar-pax       as tar-octal, with a PAX record size=1099511627777 (2^40 + 1)
  tar-paxover   as tar-octal, with a PAX record size=99999999999999999999999 (overflows 64 bits)
  tar-paxlong   as tar-octal, with a PAX header record claiming 1 GiB (an extended header
                that size must not be buffered)
  inc-ok        FULL holds /base/1/16384 (4 pages of 0x11); the delta DELTA =
                base_000000010000000000000004_D_000000010000000000000002 (sentinel with
                DeltaFrom = FULL, Version 2, files_metadata.json marking /base/1/16384
                IsIncremented) holds an increment writing pages 1 and 3 (0x22, 0x33): a
                benign control
  inc-magic     as inc-ok, the increment's magic is "wi2U" (wrong)
  inc-magic0    as inc-ok, the increment's first 4 bytes are zero
  inc-block     as inc-ok, block number 7 in a 4-page (32 KiB) file
  inc-blockmax  as inc-ok, block number 0xFFFFFFFF
  inc-count     as inc-ok, the header says 1000 pages; the member holds 2
  inc-countmax  as inc-ok, the header says 0xFFFFFFFF pages
  inc-bigfile   as inc-ok, the header says a 1 TiB file
  inc-short     as inc-ok, the member is 10 bytes (shorter than the 16-byte header)
  inc-nobase    as inc-ok, but FULL does not hold /base/1/16384 (no base to apply to)
  sent-*        FULL with a hostile sentinel (see SENTINELS below)
  delta-*       DELTA (from inc-ok) with a hostile sentinel or files_metadata.json (DELTAS)
  meta-*        FULL with a hostile metadata.json (METAS), for backup-list --detail
"""
import io
import json
import os
import subprocess
import sys
import tarfile

FULL = "base_000000010000000000000002"
DELTA = "base_000000010000000000000004_D_000000010000000000000002"
PAGE = 8192
FULL_SENTINEL = {"LSN": 33554472, "FinishLSN": 33554600, "PgVersion": 150000}
DELTA_SENTINEL = {
    "LSN": 67108904, "FinishLSN": 67109000, "PgVersion": 150000, "Version": 2,
    "DeltaFrom": FULL, "DeltaFullName": FULL, "DeltaLSN": 33554472, "DeltaCount": 1,
}
REL = "/base/1/16384"

# Hostile sentinels of FULL: each must make backup-fetch exit 1 naming the backup.
SENTINELS = {
    "sent-notjson": b'{"LSN": 33554472, "FinishLSN": ',
    "sent-array": b"[1, 2, 3]",
    "sent-string": b'"base_000000010000000000000002"',
    "sent-empty": b"",
    "sent-nolsn": json.dumps({"FinishLSN": 33554600, "PgVersion": 150000}).encode(),
    "sent-lsnstring": json.dumps(dict(FULL_SENTINEL, LSN="0/2000028")).encode(),
    "sent-lsnneg": json.dumps(dict(FULL_SENTINEL, LSN=-1)).encode(),
    "sent-lsnfloat": json.dumps(dict(FULL_SENTINEL, LSN=1.5)).encode(),
    "sent-lsnhuge": b'{"LSN": 99999999999999999999999999, "PgVersion": 150000}',
    "sent-versionstr": json.dumps(dict(FULL_SENTINEL, Version="2")).encode(),
    "sent-specstr": json.dumps(dict(FULL_SENTINEL, Spec="/etc")).encode(),
    "sent-specoid": json.dumps(dict(FULL_SENTINEL, Spec={
        "base_prefix": "/x", "tablespaces": ["../../walc-hostile-oid"],
        "../../walc-hostile-oid": {"loc": "/tmp/walc-hostile-never-made",
                                   "link": "pg_tblspc/../../walc-hostile-oid"}})).encode(),
    "sent-specrel": json.dumps(dict(FULL_SENTINEL, Spec={
        "base_prefix": "/x", "tablespaces": ["16385"],
        "16385": {"loc": "walc-hostile-relative", "link": "pg_tblspc/16385"}})).encode(),
    "sent-deltafromnum": json.dumps(dict(FULL_SENTINEL, DeltaFrom=7)).encode(),
    "sent-deltanofull": json.dumps(dict(FULL_SENTINEL, DeltaFrom=FULL, DeltaLSN=1, DeltaCount=1)).encode(),
    "sent-deltaself": json.dumps(dict(FULL_SENTINEL, DeltaFrom=FULL, DeltaFullName=FULL,
                                      DeltaLSN=1, DeltaCount=1)).encode(),
    "sent-deltamissing": json.dumps(dict(FULL_SENTINEL, DeltaFrom="base_000000010000000000000001",
                                         DeltaFullName="base_000000010000000000000001",
                                         DeltaLSN=1, DeltaCount=1)).encode(),
    "sent-deltapath": json.dumps(dict(FULL_SENTINEL, DeltaFrom="../../../../etc/passwd",
                                      DeltaFullName="../../../../etc/passwd",
                                      DeltaLSN=1, DeltaCount=1)).encode(),
    "sent-permstr": json.dumps(dict(FULL_SENTINEL, IsPermanent="yes")).encode(),
    "sent-deep": b'{"LSN": 33554472, "UserData": ' + b"[" * 100000 + b"]" * 100000 + b"}",
}
# Hostile sentinels or files metadata of DELTA (FULL is sound); FILES replaces
# files_metadata.json.
DELTAS = {
    "delta-nometa": ("sentinel", None),  # files_metadata.json missing
    "delta-filesarray": ("files", b'{"Files": ["/base/1/16384"]}'),
    "delta-filesmissing": ("files", b'{"DirectoryNames": []}'),
    "delta-notjson": ("files", b'{"Files": {'),
    "delta-countstr": ("sentinel", json.dumps(dict(DELTA_SENTINEL, DeltaCount="1")).encode()),
    "delta-nodeltalsn": ("sentinel", json.dumps({k: v for k, v in DELTA_SENTINEL.items()
                                                 if k != "DeltaLSN"}).encode()),
    "delta-incstring": ("files", json.dumps({"Files": {
        "/PG_VERSION": {"IsIncremented": False}, REL: {"IsIncremented": "true"}}}).encode()),
    "delta-incnumber": ("files", json.dumps({"Files": {
        "/PG_VERSION": {"IsIncremented": False}, REL: {"IsIncremented": 1}}}).encode()),
    "delta-entrystring": ("files", json.dumps({"Files": {
        "/PG_VERSION": {"IsIncremented": False}, REL: "IsIncremented"}}).encode()),
}
# Hostile metadata.json of FULL, for backup-list --detail.
METAS = {
    "meta-notjson": b'{"start_time": ',
    "meta-array": b"[]",
    "meta-types": json.dumps({"start_time": 5, "finish_time": [], "hostname": {"a": 1},
                              "data_dir": None, "pg_version": "15", "start_lsn": "x",
                              "finish_lsn": -1, "is_permanent": "no",
                              "corrupt_blocks": "many"}).encode(),
    "meta-huge-numbers": b'{"start_lsn": 1e400, "finish_lsn": 184467440737095516150, '
                         b'"pg_version": 99999999999999999999}',
}


def pattern(n, seed=12345):
    out = bytearray()
    x = seed
    while len(out) < n:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out += x.to_bytes(4, "little")
    return bytes(out[:n])


def zstd(data):
    return subprocess.run(["zstd", "-q", "-c"], input=data, stdout=subprocess.PIPE,
                          check=True).stdout


def tar_of(members):
    """members: (name, bytes) regular files, or (name, None) directories."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            if data is None:
                ti.type, ti.mode = tarfile.DIRTYPE, 0o700
                tf.addfile(ti)
            else:
                ti.size, ti.mode = len(data), 0o600
                tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def header(name, size_field, typeflag=b"0"):
    """A raw USTAR header; size_field: the 12 raw bytes of the size field."""
    h = bytearray(512)
    h[0:len(name)] = name.encode()
    h[100:108] = b"0000600\0"
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    h[124:136] = size_field
    h[136:148] = b"14524540400\0"
    h[156:157] = typeflag
    h[257:263] = b"ustar\0"
    h[263:265] = b"00"
    h[148:156] = b" " * 8
    s = sum(h)
    h[148:156] = b"%06o\0 " % s
    return bytes(h)


def b256(n, width=12):
    if n < 0:
        n = (1 << (8 * width)) + n  # two's complement, high bit set
        return n.to_bytes(width, "big")
    b = bytearray(n.to_bytes(width, "big"))
    b[0] |= 0x80
    return bytes(b)


def pax_header(records):
    body = b""
    for k, v in records:
        rec = b" " + k + b"=" + v + b"\n"
        n = len(rec)
        while len(str(n + len(str(n))).encode()) + len(rec) != n:
            n = len(str(n).encode()) + len(rec)
        body += str(n).encode() + rec
    pad = (512 - len(body) % 512) % 512
    return header("././@PaxHeader", b"%011o\0" % len(body), b"x") + body + b"\0" * pad


def hostile_tar(case):
    pre = tar_of([("/", None), ("/PG_VERSION", b"15\n")])
    while pre.endswith(b"\0" * 512):  # drop the end-of-archive blocks and the record padding
        pre = pre[:-512]
    data = pattern(4096)
    if case == "tar-octal":
        member = header("/base/1/huge", b"77777777777\0") + data
    elif case == "tar-b256":
        member = header("/base/1/huge", b256(1 << 62)) + data
    elif case == "tar-b256neg":
        member = header("/base/1/huge", b256(-1)) + data
    elif case == "tar-tib":
        member = header("/base/1/huge", b256(1 << 40)) + data
    elif case == "tar-pax":
        member = pax_header([(b"size", b"1099511627777")]) + header("/base/1/huge", b"00000010000\0") + data
    elif case == "tar-paxover":
        member = pax_header([(b"size", b"99999999999999999999999")]) + header("/base/1/huge", b"00000010000\0") + data
    elif case == "tar-paxlong":
        member = header("././@PaxHeader", b"%011o\0" % (1 << 30), b"x") + b"4096 path=" + data
    else:
        raise SystemExit(f"unknown case {case}")
    return pre + member  # no end blocks: the stream ends inside the member


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def put_backup(repo, name, sentinel, part, files_meta=None, metadata=None):
    base = os.path.join(repo, "basebackups_005")
    tp = os.path.join(base, name, "tar_partitions")
    write(os.path.join(tp, "pg_control.tar.zst"),
          zstd(tar_of([("/global", None), ("/global/pg_control", b"\0" * PAGE)])))
    write(os.path.join(tp, "backup_label.tar.zst"),
          zstd(tar_of([("backup_label", b"START WAL LOCATION: 0/2000028 (file 000000010000000000000002)\n")])))
    write(os.path.join(tp, "part_001.tar.zst"), zstd(part))
    if files_meta is not None:
        write(os.path.join(base, name, "files_metadata.json"), files_meta)
    if metadata is not None:
        write(os.path.join(base, name, "metadata.json"), metadata)
    write(os.path.join(base, name + "_backup_stop_sentinel.json"), sentinel)


def increment(file_size, npages, blocks, pages, magic=b"wi1U"):
    out = magic + file_size.to_bytes(8, "little") + npages.to_bytes(4, "little")
    out += b"".join(b.to_bytes(4, "little") for b in blocks)
    return out + b"".join(pages)


def full_with_rel(repo, with_rel=True):
    members = [("/", None), ("/PG_VERSION", b"15\n"), ("/base", None), ("/base/1", None)]
    if with_rel:
        members.append((REL, b"\x11" * (4 * PAGE)))
    put_backup(repo, FULL, json.dumps(FULL_SENTINEL).encode(), tar_of(members))


def delta(repo, inc, sentinel=None, files_meta=b"", with_rel=True):
    full_with_rel(repo, with_rel)
    if files_meta == b"":
        files_meta = json.dumps({"Files": {
            "/PG_VERSION": {"IsIncremented": False, "IsSkipped": False},
            REL: {"IsIncremented": True, "IsSkipped": False},
        }}).encode()
    part = tar_of([("/", None), ("/PG_VERSION", b"15\n"), ("/base", None), ("/base/1", None),
                   (REL, inc)])
    put_backup(repo, DELTA, sentinel or json.dumps(DELTA_SENTINEL).encode(), part, files_meta)


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 64
    case, repo = sys.argv[1], sys.argv[2]
    arg = sys.argv[3] if len(sys.argv) > 3 else ""
    ok_pages = [b"\x22" * PAGE, b"\x33" * PAGE]
    if case == "big":
        mb = int(arg)
        chunks = [os.urandom(1 << 20) for _ in range(mb)]
        put_backup(repo, FULL, json.dumps(FULL_SENTINEL).encode(),
                   tar_of([("/", None), ("/PG_VERSION", b"15\n"), ("/base", None),
                           ("/base/1", None), ("/base/1/big", b"".join(chunks))]))
    elif case.startswith("tar-"):
        put_backup(repo, FULL, json.dumps(FULL_SENTINEL).encode(), hostile_tar(case))
    elif case == "inc-ok":
        delta(repo, increment(4 * PAGE, 2, [1, 3], ok_pages))
    elif case == "inc-magic":
        delta(repo, increment(4 * PAGE, 2, [1, 3], ok_pages, magic=b"wi2U"))
    elif case == "inc-magic0":
        delta(repo, increment(4 * PAGE, 2, [1, 3], ok_pages, magic=b"\0\0\0\0"))
    elif case == "inc-block":
        delta(repo, increment(4 * PAGE, 2, [1, 7], ok_pages))
    elif case == "inc-blockmax":
        delta(repo, increment(4 * PAGE, 2, [0xFFFFFFFF, 1], ok_pages))
    elif case == "inc-count":
        delta(repo, increment(4 * PAGE, 1000, [1, 3], ok_pages))
    elif case == "inc-countmax":
        delta(repo, increment(4 * PAGE, 0xFFFFFFFF, [1, 3], ok_pages))
    elif case == "inc-bigfile":
        delta(repo, increment(1 << 40, 2, [1, 3], ok_pages))
    elif case == "inc-short":
        delta(repo, b"wi1U\0\0\0\0\0\0")
    elif case == "inc-nobase":
        delta(repo, increment(4 * PAGE, 2, [1, 3], ok_pages), with_rel=False)
    elif case in SENTINELS:
        put_backup(repo, FULL, SENTINELS[case], tar_of([("/", None), ("/PG_VERSION", b"15\n")]))
    elif case in DELTAS:
        what, blob = DELTAS[case]
        inc = increment(4 * PAGE, 2, [1, 3], ok_pages)
        if what == "files":
            delta(repo, inc, files_meta=blob)
        elif blob is None:
            delta(repo, inc, files_meta=None)
        else:
            delta(repo, inc, sentinel=blob)
    elif case in METAS:
        put_backup(repo, FULL, json.dumps(FULL_SENTINEL).encode(),
                   tar_of([("/", None), ("/PG_VERSION", b"15\n")]), metadata=METAS[case])
    else:
        sys.stderr.write(f"unknown case {case}\n")
        return 64
    return 0


if __name__ == "__main__":
    sys.exit(main())
