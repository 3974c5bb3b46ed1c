#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""File descriptors run out: the broker runs with RLIMIT_NOFILE 128 and a peer opens 200 idle
TCP connections. accept() then fails with EMFILE while the listening socket stays readable; the
broker must not spin on it (CPU) nor log every failed accept (log lines), and once the peer lets
go the legitimate clients are served again at once.

The handshake limits are raised out of the way (max-handshakes, max-handshakes-per-address) so
that the descriptor limit, not a per-address refusal, is what the peer runs into."""
import shutil
import subprocess
import sys
import time

from attacklib import (SKIP, Legit, Window, attacker_connect, check, expect, main,
                       start_broker)

NOFILE = 128
CONNECTIONS = 200
HOLD_S = 8  # below hello-timeout-sec (10 by default): the broker does not close them itself


def test():
    if shutil.which("prlimit") is None:
        print("SKIP: needs prlimit (util-linux)")
        sys.exit(SKIP)
    b = start_broker(extra="max-sessions = 1024",
                     new_keys="max-handshakes = 1024\nmax-handshakes-per-address = 1024")
    conns = []
    try:
        legit = Legit(b)
        legit.round("no attack")
        subprocess.run(["prlimit", f"--pid={b.proc.pid}", f"--nofile={NOFILE}:{NOFILE}"],
                       check=True)
        w = Window(b, "fd-exhaustion").begin()
        t0 = time.monotonic()
        for _ in range(CONNECTIONS):
            conns.append(attacker_connect(b))  # the kernel completes them, accepted or not
        # While the descriptors are gone nobody new can be accepted: the legitimate clients
        # are tried and timed, but not required to get in.
        legit.round("fd-exhaustion", which=("sink-unix", "sink-tls"), bound_ms=3000,
                    must=False)
        while time.monotonic() - t0 < HOLD_S:
            w.sample()
            time.sleep(0.2)
        w.end()
        fds = len(__import__("os").listdir(f"/proc/{b.proc.pid}/fd"))
        print(f"# the broker holds {fds} descriptors of {NOFILE}")
        w.check_cpu()
        w.check_log(200)
        # Each accepted connection has its session buffers (about 150 KiB): at most NOFILE of
        # them, whatever the peer opens.
        w.check_rss(64 * 1024)
        for s in conns:
            s.close()
        conns = []
        t1 = time.monotonic()
        expect(legit.round("after fd-exhaustion", which=("sink-unix", "sink-tls")),
               f"once the peer closes, the sinks are served within 10 s "
               f"({time.monotonic() - t1:.1f} s)")
        legit.round("after fd-exhaustion")
        expect(b.alive(), "the broker is still running")
        all_lines = w.attack_lines()
        expect(len(all_lines) < 200, f"fewer than 200 log lines for the whole run "
               f"({len(all_lines)})")
        legit.summary("fd-exhaustion")
    finally:
        for s in conns:
            s.close()
        b.cleanup()


main(test)
