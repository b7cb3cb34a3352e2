#!/usr/bin/python3
"""A tiny hostile S3 server for walc's fault tests (loopback, path-style, no authentication).

usage: fault_fakes3.py --listen PORT --log FILE

The bucket name in the path chooses how the server misbehaves (WALG_S3_PREFIX=s3://MODE/p):

  garbage      ListObjectsV2 answers 200 with bytes that are not XML
  html         ListObjectsV2 answers 200 with an HTML page (a captive portal)
  truncxml     ListObjectsV2 answers 200 with a ListBucketResult cut in the middle of a tag
  huge         ListObjectsV2 answers 200, Content-Length 4 GiB, and streams valid-looking
               <Contents> elements until the client hangs up
  hugechunked  as huge, chunked transfer encoding, no length
  laughs       a "billion laughs" DOCTYPE with nested entities
  deep         100000 nested elements
  longkey      one <Key> of 16 MiB
  loop         IsTruncated=true with the same NextContinuationToken, forever
  notoken      IsTruncated=true without a NextContinuationToken
  badsize      a <Size> of -5
  bigsize      a <Size> of 99999999999999999999999
  err500huge   every request answers 500 with an endless body
  hostilekeys  keys with "..", "/" runs and a newline; one well-formed sentinel of a backup
               whose tar partition list is hostile too
  hugesentinel one sentinel whose GET answers a 256 MiB body of spaces
  record       accepts PUT (200 + ETag), answers HEAD/GET 404 and an empty listing
GET /ecs-creds answers as an ECS credentials endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI)
whose session token holds CR LF and a header line ("tok\r\nX-Injected: 1").
Every request is logged to FILE as one JSON line: method, path, query, headers, bytes_sent.
Prints "ready PORT" once listening.
"""
import argparse
import json
import socketserver
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

LOCK = threading.Lock()
LOG = None
ROOT = '<?xml version="1.0" encoding="UTF-8"?>\n'
NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'


def contents(key, size=1234, date="2026-01-01T00:00:00.000Z"):
    return (f"<Contents><Key>{key}</Key><LastModified>{date}</LastModified>"
            f'<ETag>"0123456789abcdef0123456789abcdef"</ETag><Size>{size}</Size>'
            f"<StorageClass>STANDARD</StorageClass></Contents>")


def listing(prefix, items, truncated=False, token=None, extra=""):
    t = f"<NextContinuationToken>{token}</NextContinuationToken>" if token else ""
    return (f"{ROOT}<ListBucketResult {NS}><Name>b</Name><Prefix>{prefix}</Prefix>"
            f"<KeyCount>{len(items)}</KeyCount><MaxKeys>1000</MaxKeys>"
            f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>{t}{extra}"
            + "".join(items) + "</ListBucketResult>").encode()


class Server(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        pass

    def note(self, sent):
        u = urllib.parse.urlsplit(self.path)
        rec = {"method": self.command, "path": u.path, "query": u.query,
               "headers": {k: v for k, v in self.headers.items()}, "bytes_sent": sent}
        with LOCK:
            LOG.write(json.dumps(rec) + "\n")
            LOG.flush()

    def send(self, status, body, ctype="application/xml", extra=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.note(len(body))

    def stream(self, status, head, chunk, length=None, chunked=False):
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        sent = 0
        try:
            data = head
            while True:
                if chunked:
                    self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
                else:
                    if length is not None and sent + len(data) > length:
                        data = data[: length - sent]
                    self.wfile.write(data)
                sent += len(data)
                if length is not None and sent >= length:
                    break
                data = chunk
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        self.close_connection = True
        self.note(sent)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(n) if n else b""

    def dispatch(self):
        u = urllib.parse.urlsplit(self.path)
        if u.path == "/ecs-creds":
            return self.send(200, json.dumps({
                "AccessKeyId": "AKIDFROMECS", "SecretAccessKey": "ecs-secret",
                "Token": "tok\r\nX-Injected: 1", "Expiration": "2099-01-01T00:00:00Z"}).encode(),
                "application/json")
        parts = u.path.lstrip("/").split("/", 1)
        mode = parts[0]
        key = urllib.parse.unquote(parts[1]) if len(parts) > 1 else ""
        q = urllib.parse.parse_qs(u.query)
        prefix = q.get("prefix", [""])[0]
        if self.command in ("PUT", "POST"):
            self.body()
        is_list = self.command == "GET" and "list-type" in q
        if mode == "err500huge":
            return self.stream(500, b"<Error><Code>InternalError</Code><Message>",
                               b"x" * 65536, chunked=True)
        if mode == "record":
            if self.command == "PUT":
                return self.send(200, b"", extra={"ETag": '"0123456789abcdef0123456789abcdef"'})
            if is_list:
                return self.send(200, listing(prefix, []))
            return self.send(404, b"<Error><Code>NoSuchKey</Code></Error>")
        if not is_list:
            # the bucket exists (a HEAD of it follows a 404 on an object, to tell the two apart)
            if key == "" and self.command == "HEAD":
                return self.send(200, b"")
            if mode == "hugesentinel" and key.endswith("_backup_stop_sentinel.json"):
                return self.stream(200, b'{"LSN": 1, "x": "', b" " * 65536, length=256 << 20)
            if mode == "hostilekeys" and key.endswith("_backup_stop_sentinel.json"):
                return self.send(200, json.dumps({"LSN": 33554472, "PgVersion": 150000}).encode(),
                                 "application/json")
            return self.send(404, b"<Error><Code>NoSuchKey</Code><Message>no</Message></Error>")
        if mode == "garbage":
            return self.send(200, b"\x00\xff\xfe garbage <<<>>> \x01\x02 not xml", "text/plain")
        if mode == "html":
            return self.send(200, b"<html><body><h1>Welcome to the hotel wifi</h1></body></html>",
                             "text/html")
        if mode == "truncxml":
            return self.send(200, listing(prefix, [contents(prefix + "a")])[:150])
        if mode == "huge":
            return self.stream(200, listing(prefix, [])[:-len("</ListBucketResult>")],
                               contents(prefix + "wal_005/000000010000000000000001.lz4").encode() * 100,
                               length=4 << 30)
        if mode == "hugechunked":
            return self.stream(200, listing(prefix, [])[:-len("</ListBucketResult>")],
                               contents(prefix + "wal_005/000000010000000000000001.lz4").encode() * 100,
                               chunked=True)
        if mode == "laughs":
            ents = '<!ENTITY a0 "lol">' + "".join(
                f'<!ENTITY a{i} "{("&a%d;" % (i - 1)) * 10}">' for i in range(1, 10))
            body = (f'{ROOT}<!DOCTYPE lolz [{ents}]><ListBucketResult {NS}><Name>&a9;</Name>'
                    "</ListBucketResult>").encode()
            return self.send(200, body)
        if mode == "deep":
            return self.send(200, (ROOT + "<a>" * 100000 + "</a>" * 100000).encode())
        if mode == "longkey":
            return self.send(200, listing(prefix, [contents(prefix + "k" * (16 << 20))]))
        if mode == "loop":
            return self.send(200, listing(prefix, [contents(prefix + "wal_005/000000010000000000000001.lz4")],
                                          truncated=True, token="same-token"))
        if mode == "notoken":
            return self.send(200, listing(prefix, [contents(prefix + "wal_005/000000010000000000000001.lz4")],
                                          truncated=True))
        if mode == "badsize":
            return self.send(200, listing(prefix, [contents(prefix + "wal_005/000000010000000000000001.lz4", -5)]))
        if mode == "bigsize":
            return self.send(200, listing(prefix, [contents(prefix + "wal_005/000000010000000000000001.lz4",
                                                            "99999999999999999999999")]))
        if mode == "hostilekeys":
            keys = [
                "p/basebackups_005/../../../../tmp/walc-fakes3-escape_backup_stop_sentinel.json",
                "p/basebackups_005/base_000000010000000000000002_backup_stop_sentinel.json",
                "p/basebackups_005/base_000000010000000000000002/tar_partitions/../../../../x.tar.lz4",
                "p/basebackups_005/base_000000010000000000000002/tar_partitions//part_1.tar.lz4",
                "p/wal_005/../../../etc/passwd.lz4",
                "p/wal_005/000000010000000000000001&#10;X.lz4",
                "p//wal_005/000000010000000000000002.lz4",
            ]
            return self.send(200, listing(prefix, [contents(k) for k in keys if k.startswith(prefix)]))
        if mode == "hugesentinel":
            k = "p/basebackups_005/base_000000010000000000000002_backup_stop_sentinel.json"
            return self.send(200, listing(prefix, [contents(k, 256 << 20)] if k.startswith(prefix) else []))
        return self.send(400, b"<Error><Code>InvalidRequest</Code><Message>unknown mode</Message></Error>")

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = dispatch


def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--log", required=True)
    a = ap.parse_args()
    LOG = open(a.log, "a")
    srv = Server(("127.0.0.1", a.listen), Handler)
    print(f"ready {a.listen}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
