#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Idle flood: a peer at 127.0.0.2 holds 1100 TCP connections that never say a word, and opens
a new one whenever the broker closes one, for 30 s. The legitimate clients (TLS from 127.0.0.1
and plain unix) must be served throughout, sampled every few seconds, and the broker must not
log a line per refusal. The limits at work: max-handshakes (64 in all), max-handshakes-per-address
(8), and max-local-sessions counted apart from network sessions, all at their defaults.

Then sessions per user: a user with `max-sessions = 4` in its [user] section gets its 5th
authenticated session refused while another user is still served."""
import errno
import os
import selectors
import socket
import time

from attacklib import (ATTACKER, MSG, ROLE_SINK, Legit, Raw, Window, check, expect, legit_during,
                       main, need_root, run_attacker, start_broker, wait_closed)

CONNECTIONS = 1100
DURATION_S = 30
OPENS_PER_S = 200  # how fast closed connections are replaced
MAX_OPENS = CONNECTIONS + OPENS_PER_S * DURATION_S


def flood(report, b):
    sel = selectors.DefaultSelector()
    t0 = time.monotonic()
    opened = closed = failed = 0
    open_now = 0

    def open_one():
        nonlocal opened, open_now, failed
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((ATTACKER, 0))
            r = s.connect_ex(("127.0.0.1", b.port))
        except OSError:
            s.close()
            failed += 1
            return
        if r not in (0, errno.EINPROGRESS):
            s.close()
            failed += 1
            return
        sel.register(s, selectors.EVENT_READ)
        opened += 1
        open_now += 1

    try:
        while time.monotonic() - t0 < DURATION_S:
            # Top up to CONNECTIONS, at most OPENS_PER_S a second after the first batch.
            budget = CONNECTIONS if opened == 0 else \
                int((time.monotonic() - t0) * OPENS_PER_S) - (opened - CONNECTIONS)
            while open_now < CONNECTIONS and budget > 0 and opened < MAX_OPENS:
                open_one()
                budget -= 1
            for key, _ in sel.select(timeout=0.05):
                s = key.fileobj
                try:
                    data = s.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:  # closed (or refused) by the broker: replaced next round
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


def sessions_per_user(b):
    """carl (unix uid 1000, sink) may hold 4 authenticated sessions; a 5th is refused."""
    held = []
    try:
        for i in range(4):
            r = Raw(b.sock, uid=1000)
            held.append(r)
            t, _ = r.hello(ROLE_SINK)
            check(t == MSG["WELCOME"], f"carl's session {i + 1} of 4 is welcomed")
        before = len(b.read_log())
        r = Raw(b.sock, uid=1000)
        held.append(r)
        try:
            t, payload = r.hello(ROLE_SINK)
        except OSError:  # refused before its HELLO was read: what did it say?
            t, payload = r.recv()
        expect(t != MSG["WELCOME"], f"carl's 5th session is refused (got {t}, "
               f"{payload[4:].decode(errors='replace') if t == MSG['ERROR'] else ''})")
        expect(wait_closed(r.s, 5) is not None, "and its connection is closed")
        new = b.read_log()[before:]
        print(f"# the broker on carl's 5th session: {new.strip().splitlines()[-3:]}")
        p = Legit(b).round("carl at his session limit", which=("sink-tls", "sink-unix"))
        expect(p, "other users are still served meanwhile")
        held.pop().close()
        held.pop().close()
        r = Raw(b.sock, uid=1000)
        held.append(r)
        t, _ = r.hello(ROLE_SINK)
        expect(t == MSG["WELCOME"], "once carl closes one, a new session of his is welcomed")
    finally:
        for r in held:
            r.close()


def test():
    # Its raw peers connect as other uids.
    need_root("to connect as uid 1000")
    b = start_broker(users={"carl": {"role": "sink", "unix-uid": 1000, "key": False}},
                     user_keys={"carl": "max-sessions = 4"})
    try:
        legit = Legit(b)
        legit.round("no attack")
        w = Window(b, "idle-flood").begin()
        t, report = run_attacker(flood, b)
        legit_during(t, legit, w, "idle-flood", every=2.0)
        w.end()
        check("exception" not in report, f"the attacker ran ({report})")
        print(f"# idle-flood: {report['opened']} connections opened, {report['closed']} closed "
              f"by the broker, at most {report['open_max']} at once, in "
              f"{report['seconds']:.1f} s")
        rounds = len(legit.latencies.get("sink-tls", [])) - 1
        expect(rounds >= 5, f"the legitimate clients were sampled throughout ({rounds} rounds)")
        w.check_cpu()
        w.check_log(150)
        w.check_rss(64 * 1024)
        expect(b.alive(), "the broker is still running")
        legit.summary("idle-flood")
        sessions_per_user(b)
    finally:
        b.cleanup()


main(test)
