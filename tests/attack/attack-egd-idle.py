#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-sink-egd under idle connections (issue 21, attack 13). A local peer opens 4,200 EGD
connections that never say a word (more than --max-clients, 4096) and opens a new one whenever
the sink closes one, for 20 s; a legitimate client meanwhile asks for a blocking read (0x02, 32
bytes) on a new connection every second, timed. Then a peer of another uid (nobody) opens 2,000
idle connections: it may hold no more than --max-clients-per-peer (1024) at once, and the
legitimate reads go on being served.

Before the limits, the sink refused every newcomer once 4096 idle clients held it, and went on
refusing for as long as they stayed."""
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import time

from attacklib import (Failure, check, expect, main, need_root, prog, run_attacker,
                       start_broker)

CONNECTIONS = 4200
DURATION_S = 20
PER_PEER = 1024  # eb-sink-egd's default --max-clients-per-peer
NOBODY = 65534
NOBODY_CONNECTIONS = 2000
READ_BOUND_S = 10.0  # generous: a loaded two-core machine


class EgdSink:
    """eb-sink-egd socket-activated as eb-sink-egd.socket does it, drawing from b over unix:."""

    def __init__(self, b, name="egd-pool", extra=()):
        self.path = os.path.join(b.tmp, name)
        self.log = os.path.join(b.tmp, name + ".log")
        self.logf = open(self.log, "wb")
        env = dict(os.environ, EB_LOG_TARGET="console")
        self.proc = subprocess.Popen(
            ["systemd-socket-activate", "-l", self.path, "--fdname=egd-pool",
             prog("eb-sink-egd"), "-b", b.unix, *extra],
            stdout=self.logf, stderr=self.logf, env=env)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if len(blocking_read(self.path, 32, 5)[0]) == 32:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        else:
            raise Failure("eb-sink-egd did not come up: " + self.read_log()[-2000:])
        # Other uids connect too (a unix connect needs write permission on the socket).
        os.chmod(self.path, 0o666)

    def read_log(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def stop(self):
        """Stops the sink; checks that it stopped cleanly, without a sanitizer's report."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.logf.closed:
            self.logf.close()
            log = self.read_log()
            expect(self.proc.returncode == 0 and "Sanitizer" not in log and
                   "runtime error" not in log,
                   f"eb-sink-egd stops with exit 0 and no sanitizer report "
                   f"({self.proc.returncode}: {log[-300:] if self.proc.returncode else ''})")


def blocking_read(path, n, timeout):
    """A new connection, 0x02 for n bytes: (the bytes, seconds), or what it got when the sink
    closed the connection first."""
    t0 = time.monotonic()
    got = b""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(bytes([2, n]))
        while len(got) < n:
            try:
                chunk = s.recv(n - len(got))
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            got += chunk
    return got, time.monotonic() - t0


class Reads:
    """The legitimate client: blocking reads, each timed, each on a new connection."""

    def __init__(self, sink):
        self.sink = sink
        self.times = []
        self.failed = []

    def one(self, when):
        try:
            got, secs = blocking_read(self.sink.path, 32, READ_BOUND_S)
        except OSError as e:
            got, secs = b"", 0.0
            print(f"# blocking read under {when}: {e}")
        ok = len(got) == 32 and secs < READ_BOUND_S
        (self.times if ok else self.failed).append(secs)
        return ok

    def during(self, t, when, every=1.0):
        while True:
            self.one(when)
            t.join(every)
            if not t.is_alive():
                return

    def summary(self, when):
        worst = f"{max(self.times) * 1000:.0f} ms" if self.times else "-"
        print(f"# legitimate blocking reads under {when}: {len(self.times)} served (max "
              f"{worst}), {len(self.failed)} failed or cut off")
        return len(self.times), len(self.failed)


def flood(report, path, connections=CONNECTIONS, duration=DURATION_S):
    """Idle connections, each replaced when the sink closes it, for duration seconds."""
    sel = selectors.DefaultSelector()
    t0 = time.monotonic()
    opened = closed = failed = open_now = 0
    try:
        while time.monotonic() - t0 < duration:
            while open_now < connections:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.setblocking(False)
                try:
                    s.connect(path)
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    s.close()
                    failed += 1
                    break
                sel.register(s, selectors.EVENT_READ)
                opened += 1
                open_now += 1
            for key, _ in sel.select(timeout=0.05):
                s = key.fileobj
                try:
                    data = s.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(s)
                    s.close()
                    open_now -= 1
                    closed += 1
            report["open_max"] = max(report.get("open_max", 0), open_now)
    finally:
        for key in list(sel.get_map().values()):
            key.fileobj.close()
        sel.close()
        report.update(opened=opened, closed=closed, failed=failed,
                      seconds=time.monotonic() - t0)


def nobody_peer(path, n, report_w, hold_r):
    """In a child as uid nobody: opens n idle connections, writes how many it opened and how
    many the sink left open once it stopped closing them, and holds them until hold_r closes."""
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    sel = selectors.DefaultSelector()
    opened = 0
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
        except OSError:
            s.close()
            continue
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        opened += 1
    open_now, quiet_since = opened, time.monotonic()
    while time.monotonic() - quiet_since < 2.0:
        for key, _ in sel.select(timeout=0.2):
            try:
                data = key.fileobj.recv(16)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                open_now -= 1
                quiet_since = time.monotonic()
    os.write(report_w, f"{opened} {open_now}\n".encode())
    os.read(hold_r, 1)


def as_nobody(path, n):
    """Forks nobody_peer(): returns (pid, its report line, the fd whose closing ends it)."""
    report_r, report_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(report_r)
            os.close(hold_w)
            nobody_peer(path, n, report_w, hold_r)
        finally:
            os._exit(0)
    os.close(report_w)
    os.close(hold_r)
    with os.fdopen(report_r) as f:
        line = f.readline()
    return pid, line, hold_w


def test():
    need_root("to connect as uid nobody")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = CONNECTIONS + 256
    if soft < want:
        check(hard >= want, f"the open-file limit allows {want} descriptors (hard {hard})")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    b = start_broker()
    sink = None
    try:
        sink = EgdSink(b)
        reads = Reads(sink)
        check(reads.one("no attack"), "a blocking read is served with no attack")
        base = len(sink.read_log().splitlines())

        t, report = run_attacker(flood, sink.path)
        reads.during(t, "4,200 idle connections")
        check("exception" not in report, f"the attacker ran ({report})")
        print(f"# idle flood: {report['opened']} connections opened, {report['closed']} closed "
              f"by the sink, at most {report['open_max']} at once, in {report['seconds']:.1f} s")
        served, failed = reads.summary("4,200 idle connections of the same uid")
        expect(served >= 5, f"the legitimate reads were sampled throughout ({served} served)")
        expect(failed == 0, f"every legitimate blocking read is served within {READ_BOUND_S} s "
               f"({failed} failed)")
        lines = sink.read_log().splitlines()[base:]
        print(f"# eb-sink-egd log lines during the flood: {len(lines)}: {lines[:3]}")
        expect(len(lines) < 20, f"the sink logs fewer than 20 lines for the flood ({len(lines)})")

        # Another uid: bounded to its share even while everything it holds is idle.
        pid, line, hold = as_nobody(sink.path, NOBODY_CONNECTIONS)
        try:
            line = line.split()
            check(len(line) == 2, "the peer of uid nobody reports what it holds")
            opened, held = int(line[0]), int(line[1])
            print(f"# uid nobody: {opened} connections opened, {held} left open by the sink")
            expect(opened == NOBODY_CONNECTIONS, f"uid nobody could connect ({opened} opened)")
            expect(held <= PER_PEER, f"uid nobody holds at most {PER_PEER} connections at once "
                   f"({held})")
            reads = Reads(sink)
            for _ in range(3):
                reads.one("uid nobody at its limit")
            served, failed = reads.summary("uid nobody at its limit")
            expect(failed == 0, "root's blocking reads are served meanwhile")
        finally:
            os.close(hold)
            os.waitpid(pid, 0)
        expect(sink.proc.poll() is None, "the sink is still running")
        sink.stop()

        # The limit in all, where one peer's share is all of it: the newest client still wins
        # a place over the longest-idle one.
        sink = EgdSink(b, "egd-small", ["--max-clients", "256", "--max-clients-per-peer", "256"])
        reads = Reads(sink)
        t, report = run_attacker(flood, sink.path, 400, 8)
        reads.during(t, "400 idle connections, --max-clients 256")
        print(f"# idle flood against --max-clients 256: {report}")
        served, failed = reads.summary("400 idle connections, --max-clients 256")
        expect(served >= 3 and failed == 0, "every blocking read is served at the limit in all "
               f"({served} served, {failed} failed)")
        log = sink.read_log()
        expect("256 clients is the limit (--max-clients)" in log,
               "the sink says which limit it enforces")
    finally:
        if sink:
            sink.stop()
        b.cleanup()


main(test)
