#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""SLEEP is repeated. A source told SLEEP rests retry_ms (60 s) unless a WAKE comes first, then
may send again: if the pool is still at high water, its PUT is acknowledged (with no credit, the
pool being full) and followed by a new SLEEP, and `eb-brokerctl sources` says asleep while it
rests, not after. Before, the source got nothing more and its row said asleep for ever. A source
that does not send again after its rest (it waits for the WAKE, as eb-source-jitter does) is not
silent while the pool stays full: a resting source is no health alarm (issue 26)."""
import json
import os
import struct
import time

from eblib import MSG, Broker, Raw, check, main, prog, run, wait_for

CAP = 65536  # bits: 8 KiB of full credit fills it


def sources(b):
    p = run([prog("eb-brokerctl"), "-b", b.unix, "sources", "--json"])
    check(p.returncode == 0, f"eb-brokerctl sources ({p.stderr.decode().strip()[-200:]})")
    return [s for s in json.loads(p.stdout)["sources"] if s["kind"] == "sleepy"]


def put(r, n=1024):
    data = os.urandom(n)
    r.send(MSG["PUT"], struct.pack(">II", 8 * n, n) + data)


def test():
    me = os.getuid()
    b = Broker({"local": {"role": "source,admin", "unix-uid": me, "key": False}},
               capacity=CAP).start()
    try:
        r = Raw(b.sock)
        t, _ = r.hello(1, kind=b"sleepy")
        check(t == MSG["WELCOME"], "the source is welcomed")
        # Fill the pool to high water: the broker says SLEEP after the PUT_ACK that did it.
        got_sleep = False
        for _ in range(16):
            put(r, 2048)
            t, _ = r.recv()
            check(t == MSG["PUT_ACK"], f"a PUT is acknowledged (got type {t})")
            r.s.settimeout(0.5)
            try:
                t, payload = r.recv()
            except OSError:
                t = None
            r.s.settimeout(10)
            if t == MSG["SLEEP"]:
                got_sleep = True
                retry = struct.unpack(">I", payload[:4])[0]
                break
        check(got_sleep and retry == 60000, "the source is told SLEEP for 60 s at high water")
        t0 = time.monotonic()
        rows = sources(b)
        check(len(rows) == 1 and rows[0]["asleep"], f"its row says asleep ({rows})")
        # Its rest ends after retry_ms: the row says so, an event the test waits on.
        wait_for("the row stops saying asleep once retry_ms has passed",
                 lambda: not sources(b)[0]["asleep"], timeout=90, interval=1)
        rested = time.monotonic() - t0
        check(rested >= 59, f"not before the 60 s were over ({rested:.1f} s)")
        # Its rest is over, its last PUT 60 s old, the pool still full: it rests all the same
        # (eb-source-jitter waits for WAKE), and a resting source is no health alarm.
        row = sources(b)[0]
        check(row["health"] == "ok", f"its rest over, it is not silent: {row['health']}")
        row = wait_for("its last PUT 61 s old", lambda: [
            r for r in sources(b) if r["last_seen_ms"] >= 61000], timeout=30, interval=0.5)[0]
        check(row["health"] == "ok" and row["last_seen_ms"] >= 61000,
              f"nor while it waits for a WAKE with the pool full ({row['health']}, last seen "
              f"{row['last_seen_ms']} ms ago)")
        # Resuming into a pool still at high water: PUT_ACK with no credit, then SLEEP again.
        put(r)
        t, payload = r.recv()
        check(t == MSG["PUT_ACK"], f"its next PUT is acknowledged (got type {t})")
        credited = struct.unpack(">I", payload[:4])[0]
        t, payload = r.recv()
        check(t == MSG["SLEEP"] and struct.unpack(">I", payload[:4])[0] == 60000,
              f"and followed by a new SLEEP (got type {t}; credited {credited})")
        check(sources(b)[0]["asleep"], "its row says asleep again")
        # A PUT inside the new rest (already on its way, say) is not answered with another.
        put(r)
        t, _ = r.recv()
        check(t == MSG["PUT_ACK"], "a PUT during the rest is acknowledged")
        r.s.settimeout(1)
        try:
            t, _ = r.recv()
        except OSError:
            t = None
        check(t is None, f"and no second SLEEP follows it (got type {t})")
        check(b.alive(), "the broker is still running")
    finally:
        b.cleanup()


main(test)
