#!/usr/bin/env python3
"""Runs a command as a child subreaper (archive.sh): the processes orphaned below it (pgBackRest's
async archive-push detaches from the archiver that started it) are reaped here instead of by
init, and the CPU of those whose name is NAME, with their own reaped children's, is summed.

usage: reaper.py OUT NAME -- COMMAND...   (OUT: seconds, user + sys, rewritten at each reap;
the reaper ends when it has no child left: COMMAND and everything it left behind)"""
import ctypes
import os
import sys

PR_SET_CHILD_SUBREAPER = 36


def main():
    out, name, sep, cmd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    if sep != "--" or not cmd:
        sys.exit(__doc__)
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("reaper.py: prctl(PR_SET_CHILD_SUBREAPER) failed")
    if os.fork() == 0:
        os.execvp(cmd[0], cmd)
    total = 0.0
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            break
        try:  # a zombie keeps its name until reaped
            stat = open(f"/proc/{info.si_pid}/stat").read()
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
        except OSError:
            comm = ""
        _, _, ru = os.wait4(info.si_pid, 0)
        if comm == name:
            total += ru.ru_utime + ru.ru_stime
            with open(out + ".tmp", "w") as f:
                f.write(f"{total:.3f}\n")
            os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
