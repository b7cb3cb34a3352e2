#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 proxy for the S3 tests (python3 asyncio, loopback only).

walc talks to this proxy as its S3 endpoint; the proxy forwards each request to the real
server and, for a chosen share of requests, misbehaves instead:

  drop      close the connection without answering (the request never reaches the server)
  dropmid   forward, then send the answer's head and half its body and close
  503       answer 503 SlowDown (not forwarded)
  500       answer 500 InternalError (not forwarded)
  stall     forward, send the head and part of the body (nothing when the answer has no
            body), then stall for --stall seconds
  hang      read the request, never forward it, never answer (for --stall seconds)
  latency   forward after --latency seconds

Usage: s3_faultproxy.py --listen PORT --upstream HOST:PORT [--rate R] [--faults a,b,...]
       [--stall S] [--latency S] [--seed N] [--log FILE] [--rule REGEX ACTION]...
A --rule applies ACTION (a fault name, or status:CODE:S3CODE; ACTION#N: to the first N
matches only) to every request whose "METHOD /path?query" matches REGEX, before the random
faults. Each request is logged as
"n METHOD path action status" to --log (with --log-header NAME, that header's value
follows). --tls-cert/--tls-key serve TLS (Azure's endpoints are https only), --upstream-tls
talks TLS to the server (unverified: both ends are the test's own). Prints "ready PORT" on
stdout once listening.
"""
import argparse
import asyncio
import random
import re
import ssl
import sys
import time

MAX_HEAD = 64 * 1024


class ProxyBase:
    """What both fault proxies keep: the arguments, the upstream, the seeded random choices,
    a count of connections or requests, the log (tcp_faultproxy.py's Proxy extends it too)."""

    def __init__(self, args):
        self.args = args
        self.up_host, up_port = args.upstream.rsplit(":", 1)
        self.up_port = int(up_port)
        self.rng = random.Random(args.seed)
        self.n = 0
        self.log = open(args.log, "a", buffering=1) if args.log else None


class Proxy(ProxyBase):
    def __init__(self, args):
        super().__init__(args)
        self.faults = [f for f in args.faults.split(",") if f]
        # ACTION#N applies to the first N matching requests only
        self.rules = []
        for r, a in args.rule or []:
            action, _, count = a.partition("#")
            self.rules.append([re.compile(r), action, int(count) if count else -1])

    def note(self, n, method, target, action, status, hdrs=None):
        if self.log:
            extra = ""
            if self.args.log_header and hdrs is not None:
                extra = " " + hdrs.get(self.args.log_header.lower(), "-").replace(" ", "_")
            self.log.write(f"{n} {method} {target.split('?')[0]} {action} {status} {time.time():.3f}{extra}\n")

    def choose(self, method, target):
        for rule in self.rules:
            rx, action, left = rule
            if left != 0 and rx.search(f"{method} {target}"):
                rule[2] = left - 1 if left > 0 else left
                return action
        if self.faults and self.rng.random() < self.args.rate:
            return self.rng.choice(self.faults)
        return "ok"

    async def read_head(self, reader):
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > MAX_HEAD:
            raise ValueError("head too large")
        return head

    @staticmethod
    def parse_headers(head):
        lines = head.decode("latin-1").split("\r\n")
        hdrs = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
        return lines[0], hdrs

    async def read_body(self, reader, hdrs, no_body):
        if no_body:
            return b"", False
        if "chunked" in hdrs.get("transfer-encoding", "").lower():
            out = bytearray()
            while True:
                line = await reader.readuntil(b"\r\n")
                out += line
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:
                        t = await reader.readuntil(b"\r\n")
                        out += t
                        if t == b"\r\n":
                            return bytes(out), False
                out += await reader.readexactly(size + 2)
        if "content-length" in hdrs:
            return await reader.readexactly(int(hdrs["content-length"])), False
        return await reader.read(), True  # until close

    @staticmethod
    def canned(status, reason, code):
        body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                f"<Message>injected by s3_faultproxy</Message></Error>").encode()
        return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    async def handle(self, creader, cwriter):
        up = None
        try:
            while True:
                try:
                    head = await self.read_head(creader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                reqline, hdrs = self.parse_headers(head)
                method, target = reqline.split(" ")[0], reqline.split(" ")[1]
                body = b""
                if "content-length" in hdrs:
                    body = await creader.readexactly(int(hdrs["content-length"]))
                self.n += 1
                n = self.n
                action = self.choose(method, target)
                if action == "drop":
                    self.note(n, method, target, action, "-")
                    return
                if action == "hang":
                    self.note(n, method, target, action, "-")
                    await asyncio.sleep(self.args.stall)
                    return
                if action in ("503", "500") or action.startswith("status:"):
                    if action == "503":
                        out, st = self.canned(503, "Slow Down", "SlowDown"), 503
                    elif action == "500":
                        out, st = self.canned(500, "Internal Server Error", "InternalError"), 500
                    else:
                        _, code, s3code = action.split(":")
                        out, st = self.canned(int(code), "Injected", s3code), int(code)
                    self.note(n, method, target, action, st)
                    cwriter.write(out)
                    await cwriter.drain()
                    continue
                if action == "latency":
                    await asyncio.sleep(self.args.latency)
                if up is None:
                    uctx = None
                    if self.args.upstream_tls:
                        uctx = ssl.create_default_context()
                        uctx.check_hostname = False
                        uctx.verify_mode = ssl.CERT_NONE
                    up = await asyncio.open_connection(self.up_host, self.up_port, ssl=uctx)
                ureader, uwriter = up
                uwriter.write(head + body)
                await uwriter.drain()
                rhead = await self.read_head(ureader)
                statline, rh = self.parse_headers(rhead)
                status = int(statline.split(" ")[1])
                no_body = method == "HEAD" or status in (204, 304) or status < 200
                rbody, closed = await self.read_body(ureader, rh, no_body)
                if closed or rh.get("connection", "").lower() == "close":
                    uwriter.close()
                    up = None
                self.note(n, method, target, action, status, hdrs)
                if action == "dropmid":
                    if rbody:
                        cwriter.write(rhead + rbody[: len(rbody) // 2])
                        await cwriter.drain()
                    return
                if action == "stall":
                    # part of the body, or nothing at all when there is none to cut
                    if rbody:
                        cwriter.write(rhead + rbody[: len(rbody) // 3])
                        await cwriter.drain()
                    await asyncio.sleep(self.args.stall)
                    return
                cwriter.write(rhead + rbody)
                await cwriter.drain()
                if closed:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, OSError):
            return
        finally:
            if up is not None:
                up[1].close()
            cwriter.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--rate", type=float, default=0.0)
    ap.add_argument("--faults", default="drop,dropmid,503,500,stall,latency")
    ap.add_argument("--stall", type=float, default=30.0)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log")
    ap.add_argument("--rule", nargs=2, action="append")
    ap.add_argument("--log-header")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--upstream-tls", action="store_true")
    args = ap.parse_args()
    proxy = Proxy(args)
    ctx = None
    if args.tls_cert:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
    await serve(proxy.handle, args.listen, limit=MAX_HEAD * 2, ssl=ctx)


async def serve(handle, port, **kwargs):
    """Serves handle on 127.0.0.1:port until killed, after printing "ready PORT" (the tests
    wait for it); tcp_faultproxy.py serves through this too."""
    server = await asyncio.start_server(handle, "127.0.0.1", port, **kwargs)
    print(f"ready {port}", flush=True)
    async with server:
        await server.serve_forever()


def run(main_coroutine):
    try:
        asyncio.run(main_coroutine())
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    run(main)
