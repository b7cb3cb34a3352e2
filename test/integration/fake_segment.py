"""A WAL segment as PostgreSQL starts one (the long page header: magic, timeline, page address,
system identifier, segment and page sizes) followed by SOURCE's bytes repeated, or random ones:
what wal-push and wal-fetch take for a segment in tests that need no cluster.

    fake_segment.py NAME SIZE OUT [SOURCE [SYSID]]
"""
import os
import struct
import sys

name, size, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
src = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else None
sysid = int(sys.argv[5]) if len(sys.argv) > 5 else 7000000000000000042
tli, hi, lo = int(name[:8], 16), int(name[8:16], 16), int(name[16:24], 16)
segno = hi * ((1 << 32) // size) + lo
head = struct.pack("<HHIQI4xQII", 0xD110, 2, tli, segno * size, 0, sysid, size, 8192)
body = open(src, "rb").read() if src else os.urandom(size)
body = (body * (size // max(len(body), 1) + 1))[: size - len(head)]
with open(out, "wb") as f:
    f.write(head + body)
