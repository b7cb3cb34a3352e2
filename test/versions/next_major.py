#!/usr/bin/env python3
"""A PostgreSQL server of a major that does not exist yet, for the version matrix: a proxy on a
Unix socket that passes a real server's protocol through both ways, except the server_version
the server reports at startup (ParameterStatus), which it replaces. libpq takes
server_version_num from that report, so a client sees the real server as VERSION.

    next_major.py LISTEN_DIR PORT UPSTREAM_DIR VERSION

listens on LISTEN_DIR/.s.PGSQL.PORT (open to every user), forwards to UPSTREAM_DIR/.s.PGSQL.PORT,
and prints "ready" once listening. Runs until killed."""
import os
import socket
import struct
import sys
import threading

listen_dir, port, upstream_dir, version = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
name = ".s.PGSQL." + port


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        got = s.recv(n - len(buf))
        if not got:
            raise EOFError
        buf += got
    return buf


def server_to_client(up, client):
    """Message by message until the server is ready for a query; then bytes as they come."""
    try:
        while True:
            head = recv_exact(up, 5)
            kind, length = head[:1], struct.unpack("!I", head[1:])[0]
            body = recv_exact(up, length - 4)
            if kind == b"S" and body.split(b"\0")[0] == b"server_version":
                body = b"server_version\0" + version.encode() + b"\0"
                head = kind + struct.pack("!I", len(body) + 4)
            client.sendall(head + body)
            if kind in (b"Z", b"E"):
                break
    except (EOFError, OSError):
        client.close()
        up.close()
        return
    pipe(up, client)


def serve(client):
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(os.path.join(upstream_dir, name))
    except OSError:
        client.close()
        return
    threading.Thread(target=pipe, args=(client, up), daemon=True).start()
    server_to_client(up, client)


path = os.path.join(listen_dir, name)
if os.path.exists(path):
    os.unlink(path)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
os.chmod(path, 0o777)
srv.listen(8)
print("ready", flush=True)
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
