#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A hostile broker against the sinks (issue 21, item 10, and the client rules of item 12):
`eb-sink-file --timeout 5` under a flood of WAKE frames ran past 20 s, and eb-sink-kernel
shares the code; a broker answering DATA of 0 bytes made a sink ask again at once; DATA longer
than asked was taken; a broker ending every session with an ERROR was reconnected to in a loop.
Each client must keep its --timeout within a second, wait between empty answers, refuse what it
did not ask for, and back off; eb-sink-egd's refill thread as well."""
import os
import socket
import subprocess
import tempfile
import time

from attacklib import HostileBroker, check, cpu_seconds, eblib, expect, main, prog, wait_for

TIMEOUT_S = 5
SLACK_S = 1.5  # "within a second", with a loaded machine's slack
KILL_S = 25


def run_timed(cmd, env=None):
    """Runs cmd; returns (seconds to exit, or None if still running at KILL_S, stderr, CPU s)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env=dict(os.environ, **(env or {})))
    cpu = 0.0
    try:
        while p.poll() is None and time.monotonic() - t0 < KILL_S:
            try:
                cpu = cpu_seconds(p.pid)
            except (FileNotFoundError, ProcessLookupError):
                pass
            time.sleep(0.05)
        took = time.monotonic() - t0 if p.poll() is not None else None
    finally:
        if p.poll() is None:
            p.kill()
        err = p.communicate()[1].decode(errors="replace")
    return took, err, cpu


def egd_storm(tmp, f):
    """eb-sink-egd drawing from f for 5 s with a client waiting for bytes: (connections made to
    f, "Lost broker" lines logged)."""
    path = os.path.join(tmp, "egd.sock")
    p = subprocess.Popen([prog("eb-sink-egd"), "-b", f.uri, "-l", "unix:" + path],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for("eb-sink-egd listens", lambda: os.path.exists(path), 10)
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(path)
            s.sendall(bytes([0x02, 32]))  # a blocking read: the buffer must fill
            time.sleep(5)
            n = f.count("connections")
    finally:
        p.terminate()
        err = p.communicate(timeout=20)[1].decode(errors="replace")
    return n, err.count("Lost broker")


def test():
    tmp = tempfile.mkdtemp(prefix="eb-attack-broker-")
    fakes = []

    def fake(mode):
        f = HostileBroker(os.path.join(tmp, f"{mode}.sock"), mode)
        fakes.append(f)
        return f

    try:
        # 1. A WAKE flood: --timeout holds, in eb-sink-file and eb-sink-kernel alike.
        f = fake("wake-flood")
        out = os.path.join(tmp, "out")
        took, err, cpu = run_timed([prog("eb-sink-file"), "-b", f.uri, "--bytes", "64",
                                    "-o", out, "--timeout", str(TIMEOUT_S)])
        print(f"# eb-sink-file --timeout {TIMEOUT_S} under a WAKE flood: "
              f"{'still running' if took is None else f'exit after {took:.1f} s'}, "
              f"{cpu:.1f} s CPU")
        expect(took is not None and took < TIMEOUT_S + SLACK_S,
               f"eb-sink-file --timeout {TIMEOUT_S} exits within {SLACK_S} s of it under a WAKE "
               f"flood ({took})")
        seam = os.path.join(eblib.BUILD, "tests", "eb-sink-kernel-seam")
        took, err, cpu = run_timed([seam, "-b", f.uri, "--oneshot", "--timeout", str(TIMEOUT_S)],
                                   {"EB_SEAM_LOG": os.path.join(tmp, "seam.log")})
        print(f"# eb-sink-kernel --oneshot --timeout {TIMEOUT_S} under a WAKE flood: "
              f"{'still running' if took is None else f'exit after {took:.1f} s'}, "
              f"{cpu:.1f} s CPU")
        expect(took is not None and took < TIMEOUT_S + SLACK_S,
               f"eb-sink-kernel --timeout {TIMEOUT_S} exits in time under a WAKE flood ({took})")

        # 2. DATA of 0 bytes: the sink waits as after EMPTY, not asking again at once.
        f = fake("zero-data")
        took, err, cpu = run_timed([prog("eb-sink-file"), "-b", f.uri, "--bytes", "64",
                                    "-o", out, "--timeout", "4"])
        gets = f.count("gets")
        print(f"# eb-sink-file against DATA of 0 bytes: {gets} GETs in 4 s, {cpu:.2f} s CPU")
        expect(gets <= 12, f"a sink answered DATA of 0 bytes waits between GETs ({gets} in 4 s)")

        # 3. DATA 8x longer than asked: refused, nothing written.
        f = fake("long-data")
        took, err, cpu = run_timed([prog("eb-sink-file"), "-b", f.uri, "--bytes", "64",
                                    "-o", out, "--timeout", "3"])
        size = os.path.getsize(out) if os.path.exists(out) else 0
        print(f"# eb-sink-file against DATA 8x longer than asked: wrote {size} bytes")
        expect(size == 0 and "for a GET of 64" in err,
               f"DATA longer than asked is refused and said to be ({size} bytes written; "
               f"{err.strip()[-300:]!r})")

        # 4. An ERROR after every WELCOME: reconnects on a back-off, not in a loop.
        f = fake("error-storm")
        took, err, cpu = run_timed([prog("eb-sink-file"), "-b", f.uri, "--bytes", "64",
                                    "-o", out, "--timeout", "5"])
        n = f.count("connections")
        lost = err.count("Lost broker")
        print(f"# eb-sink-file against an ERROR storm: {n} connections and {lost} log lines "
              f"in 5 s")
        expect(n <= 10, f"a sink backs off from a broker that ends every session ({n} in 5 s)")

        # 5. The same storm against eb-sink-egd, whose refill thread runs on the same runtime.
        f = HostileBroker(os.path.join(tmp, "egd-storm.sock"), "error-storm")
        fakes.append(f)
        n, lost = egd_storm(tmp, f)
        print(f"# eb-sink-egd against an ERROR storm: {n} connections and {lost} log lines "
              f"in 5 s")
        expect(n <= 10, f"eb-sink-egd backs off from a broker that ends every session "
               f"({n} in 5 s)")
    finally:
        for f in fakes:
            f.close()
    check(True, "done")


main(test)
