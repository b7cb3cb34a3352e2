#!/usr/bin/python3
"""Run a command and SIGKILL it (and every process it started) after a random delay.

usage: fault_kill.py --tag TAG --min S --max S [--seed N] [--out F] [--err F] -- CMD [ARG...]

CMD runs with FAULT_KILL_TAG=TAG added to its environment. After a delay drawn uniformly from
[min, max] seconds (random.Random(seed)), every process whose environment holds
FAULT_KILL_TAG=TAG gets SIGKILL: the command, the walc it may exec through runuser/env, and
children walc forked and detached (wal-fetch's prefetcher, which calls setsid). This is how
an OOM kill of a container, a power cut of the process tree, or `kill -9` by an operator look
to walc: no handler runs. Only processes carrying the tag are touched (found by pid in
/proc/*/environ, so nothing else on the machine is).

Prints one line: "killed DELAY_MS" when the command was still running at the kill, or
"exited RC DELAY_MS" when it had already finished (RC its status); tagged children still
alive at DELAY_MS (a detached prefetcher) are killed then in both cases. Exits 0 unless it could not run the command.
"""
import argparse
import os
import random
import signal
import subprocess
import sys
import time


def tagged(tag):
    want = ("FAULT_KILL_TAG=" + tag).encode()
    me = os.getpid()
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if want in env:
            pids.append(int(d))
    return pids


def kill_tagged(tag):
    # Repeat: a process may fork between the scan and the kill.
    n = 0
    for _ in range(5):
        pids = tagged(tag)
        if not pids:
            break
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
                n += 1
            except ProcessLookupError:
                pass
        time.sleep(0.02)
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tag", required=True)
    ap.add_argument("--min", type=float, required=True)
    ap.add_argument("--max", type=float, required=True)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default="/dev/null")
    ap.add_argument("--err", default="/dev/null")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        sys.exit("fault_kill.py: no command")
    delay = random.Random(a.seed).uniform(a.min, a.max)
    env = dict(os.environ, FAULT_KILL_TAG=a.tag)
    with open(a.out, "wb") as out, open(a.err, "wb") as err:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        deadline = t0 + delay
        rc = None
        # Until the deadline: the command may finish first; its detached children (the
        # prefetcher) still get the kill at the drawn moment.
        while True:
            if rc is None:
                rc = p.poll()
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, 0.002))
        ms = int(delay * 1000)
        if rc is None:
            rc = p.poll()
        kill_tagged(a.tag)
        if rc is None:
            p.kill()
            rc = p.wait()
        if rc == -signal.SIGKILL:
            print(f"killed {ms}")
        else:
            print(f"exited {rc} {ms}")


if __name__ == "__main__":
    main()
