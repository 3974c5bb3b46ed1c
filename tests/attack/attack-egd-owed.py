#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-sink-egd under clients owed a blocking read (issue 31, item 3). A local user (uid nobody)
opens 5 x 1,000 TCP connections from 127.0.0.2 to 127.0.0.6, each asking a blocking read of 255
bytes (0x02) that the sink's empty buffer cannot fill, and opens a new one whenever the sink
closes one. Meanwhile a legitimate client (root) asks the sink's PID (0x04) on a new connection
every second, over the unix socket and over TCP, each timed.

Before the fix every 127.x.y.z was a peer of its own for --max-clients-per-peer (1,024), so the
five held 5,000 slots, over --max-clients (4,096); and a client owed bytes was never dropped for
a newcomer: every request on the unix socket was refused (9 of 9 reset, 35 s later too). Now a
loopback TCP client is the uid that owns its socket, which the kernel's sock_diag reports, so the
five are one peer, held to 1,024 connections in all; and owed clients make way as idle ones do,
which a second run with --max-clients 256 (the attacker alone could fill it) checks."""
import os
import resource
import selectors
import socket
import subprocess
import time

from attacklib import check, expect, main, need_root, prog, start_broker
from eblib import reserve_port, wait_for

NOBODY = 65534
ADDRESSES = [f"127.0.0.{i}" for i in range(2, 7)]
PER_ADDRESS = 1000
DURATION_S = 8
PER_PEER = 1024  # eb-sink-egd's default --max-clients-per-peer
BOUND_S = 2.0  # a PID answer is immediate; a loaded two-core machine's slack


def pid_request(family, address, timeout=5):
    """0x04 on a new connection: (whether the sink answered with its PID, seconds)."""
    t0 = time.monotonic()
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(address)
            s.sendall(b"\x04")
            n = s.recv(1)
            got = b""
            while n and len(got) < n[0]:
                chunk = s.recv(n[0] - len(got))
                if not chunk:
                    break
                got += chunk
            ok = bool(n) and len(got) == n[0] and got.isdigit()
    except OSError:
        ok = False
    return ok, time.monotonic() - t0


def owed_flood(port, report_w, stop_r):
    """In a child as uid nobody: PER_ADDRESS connections from each of ADDRESSES, each asking a
    blocking read of 255 bytes, each reopened when the sink closes it, until stop_r says stop.
    Then stops reopening and, once the sink has closed no more for 2 s, writes how many it
    opened, how many the sink closed and how many it still holds."""
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    sel = selectors.DefaultSelector()
    sel.register(stop_r, selectors.EVENT_READ)
    opened = closed = 0
    open_now = {a: 0 for a in ADDRESSES}

    def one(a):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((a, 0))
            s.connect(("127.0.0.1", port))
            s.sendall(b"\x02\xff")
        except OSError:
            s.close()
            return False
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, a)
        open_now[a] += 1
        return True

    stopping, quiet_since = False, 0.0
    while not stopping or time.monotonic() - quiet_since < 2.0:
        for a in ADDRESSES:
            while not stopping and open_now[a] < PER_ADDRESS and one(a):
                opened += 1
        for key, _ in sel.select(timeout=0.1):
            if key.fileobj == stop_r:
                sel.unregister(stop_r)
                stopping, quiet_since = True, time.monotonic()
                continue
            try:
                data = key.fileobj.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                open_now[key.data] -= 1
                closed += 1
                quiet_since = time.monotonic()
    os.write(report_w, f"{opened} {closed} {sum(open_now.values())}\n".encode())


def phase(b, extra, what):
    """eb-sink-egd with extra options under the owed flood; legitimate clients timed."""
    sink = pid = None
    reserved, port = reserve_port()
    path = os.path.join(b.tmp, "egd-pool")
    logname = os.path.join(b.tmp, "egd.log")
    try:
        with open(logname, "wb") as log:
            sink = subprocess.Popen([prog("eb-sink-egd"), "-b", b.unix, "--listen",
                                     "unix:" + path, "--listen", f"tcp://127.0.0.1:{port}",
                                     *extra], stdout=log, stderr=log,
                                    env=dict(os.environ, EB_LOG_TARGET="console"))
        wait_for("eb-sink-egd answers on both sockets",
                 lambda: pid_request(socket.AF_UNIX, path)[0] and
                 pid_request(socket.AF_INET, ("127.0.0.1", port))[0], 20)

        report_r, report_w = os.pipe()
        stop_r, stop_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(report_r)
                os.close(stop_w)
                owed_flood(port, report_w, stop_r)
            finally:
                os._exit(0)
        os.close(report_w)
        os.close(stop_r)

        results = {"unix": [], "tcp": []}
        t0 = time.monotonic()
        time.sleep(2)  # the flood's first 5,000 connections
        while time.monotonic() - t0 < DURATION_S:
            results["unix"].append(pid_request(socket.AF_UNIX, path, BOUND_S + 3))
            results["tcp"].append(pid_request(socket.AF_INET, ("127.0.0.1", port),
                                              BOUND_S + 3))
            time.sleep(1)
        os.write(stop_w, b"x")
        with os.fdopen(report_r) as f:
            opened, closed, held = (int(x) for x in f.readline().split())
        os.waitpid(pid, 0)
        pid = None
        os.close(stop_w)
        print(f"# owed flood{what}: {opened} connections opened, {closed} closed by the sink, "
              f"{held} still held at the end")
        expect(held <= PER_PEER, f"one local uid on 5 loopback addresses holds at most "
               f"{PER_PEER} clients{what} ({held})")
        for name, rs in results.items():
            ok = [s for good, s in rs if good and s < BOUND_S]
            worst = f"{max(s for _, s in rs) * 1000:.0f} ms" if rs else "-"
            print(f"# legitimate PID requests over {name} under the owed flood{what}: {len(ok)} "
                  f"of {len(rs)} answered within {BOUND_S} s (slowest {worst})")
            expect(rs and len(ok) == len(rs), f"every legitimate request over {name} is "
                   f"answered within {BOUND_S} s{what} ({len(ok)} of {len(rs)})")
        with open(logname, errors="replace") as f:
            lines = [l for l in f.read().splitlines() if "Listening" not in l]
        print(f"# eb-sink-egd log lines{what}: {len(lines)}: {lines[:4]}")
        expect(len(lines) < 20, f"the sink logs fewer than 20 lines for the flood{what} "
               f"({len(lines)})")
    finally:
        reserved.close()
        if pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        if sink:
            sink.terminate()
            try:
                sink.wait(10)
            except subprocess.TimeoutExpired:
                sink.kill()
                sink.wait()


def test():
    need_root("to connect as uid nobody")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = len(ADDRESSES) * PER_ADDRESS + 256
    if soft < want:
        check(hard >= want, f"the open-file limit allows {want} descriptors (hard {hard})")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    # An empty pool: no blocking read can be filled, so every attacker is owed bytes for ever.
    b = start_broker(prime_bytes=0)
    try:
        phase(b, [], "")
        # The attacker alone fills all 256: a legitimate newcomer gets in only when one of
        # the attacker's owed clients makes way.
        phase(b, ["--max-clients", "256"], " (--max-clients 256)")
    finally:
        b.cleanup()


main(test)
