#!/usr/bin/env python3
"""A fault-injecting TCP proxy for the SFTP tests (python3 asyncio, loopback only).

walc connects to this proxy as its SSH server; the proxy forwards the bytes both ways and,
for a chosen share of connections, breaks the connection after a number of bytes (counted in
both directions together, or in one with --dir), closing both sides at once: to walc, the
server went away mid-stream.

  --rate R           share of connections cut (0 to 1), each at a byte count uniform in
                     [--cut-min, --cut-max] (bytes through the connection)
  --first N --cut-at B   the first N connections cut after B bytes (before --rate applies)
  --dir up|down|any  which bytes count: client to server, server to client, or both (any)
  --bps N            each direction at most N bytes a second (a slow link), 0: no limit

Usage: tcp_faultproxy.py --listen PORT --upstream HOST:PORT [options] [--seed N] [--log FILE]
Each connection is logged as "n action bytes_up bytes_down" to --log when it ends (action:
ok, or cut@BYTES). Prints "ready PORT" on stdout once listening.
"""
import argparse
import asyncio
import time

from s3_faultproxy import ProxyBase, run, serve

CHUNK = 16384


class Proxy(ProxyBase):
    def cut_point(self, n):
        if n <= self.args.first:
            return self.args.cut_at
        if self.rng.random() < self.args.rate:
            return self.rng.randint(self.args.cut_min, self.args.cut_max)
        return None

    async def handle(self, creader, cwriter):
        self.n += 1
        n = self.n
        cut = self.cut_point(n)
        try:
            ureader, uwriter = await asyncio.open_connection(self.up_host, self.up_port)
        except OSError:
            cwriter.close()
            return
        moved = {"up": 0, "down": 0}
        done = asyncio.Event()

        def counted():
            if self.args.dir == "any":
                return moved["up"] + moved["down"]
            return moved[self.args.dir]

        async def pump(reader, writer, direction):
            start = time.monotonic()
            sent = 0
            try:
                while not done.is_set():
                    data = await reader.read(CHUNK)
                    if not data:
                        break
                    if cut is not None and self.args.dir in ("any", direction):
                        room = cut - counted()
                        if room <= len(data):
                            if room > 0:
                                writer.write(data[:room])
                                moved[direction] += room
                                await writer.drain()
                            done.set()
                            break
                    writer.write(data)
                    moved[direction] += len(data)
                    sent += len(data)
                    await writer.drain()
                    if self.args.bps > 0:
                        ahead = sent / self.args.bps - (time.monotonic() - start)
                        if ahead > 0:
                            await asyncio.sleep(ahead)
            except (OSError, asyncio.CancelledError):
                pass
            done.set()

        tasks = [asyncio.ensure_future(pump(creader, uwriter, "up")),
                 asyncio.ensure_future(pump(ureader, cwriter, "down"))]
        await done.wait()
        for t in tasks:
            t.cancel()
        for w in (cwriter, uwriter):
            try:
                # an abrupt end, as when the server's process dies
                w.transport.abort()
            except Exception:
                pass
        cut_now = cut is not None and counted() >= cut
        if self.log:
            action = f"cut@{cut}" if cut_now else "ok"
            self.log.write(f"{n} {action} {moved['up']} {moved['down']}\n")


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--rate", type=float, default=0.0)
    ap.add_argument("--cut-min", type=int, default=0)
    ap.add_argument("--cut-max", type=int, default=1 << 20)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--cut-at", type=int, default=0)
    ap.add_argument("--dir", choices=("up", "down", "any"), default="any")
    ap.add_argument("--bps", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log")
    args = ap.parse_args()
    await serve(Proxy(args).handle, args.listen)


if __name__ == "__main__":
    run(main)
