#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Sessions that end after an ERROR must not stay counted: a sink that PUTs (answered
FORBIDDEN), a client that sends its own ERROR after WELCOME, and one that sends a malformed
frame after WELCOME. Repeated, they would make `eb-brokerctl status` drift upwards for ever;
after they close, its sources and sinks are back at the baseline."""
import os
import struct
import time

from attacklib import (MSG, ROLE_SINK, ROLE_SOURCE, Legit, Raw, Window, check, expect, main,
                       need_root, start_broker)

ROUNDS = 20  # of each kind


def forbidden_put(b):
    r = Raw(b.sock, uid=1000)
    t, _ = r.hello(ROLE_SINK)
    check(t == MSG["WELCOME"], "the sink is welcomed")
    r.send(MSG["PUT"], struct.pack(">II", 64, 8) + os.urandom(8))
    t, payload = r.recv()
    ok = t == MSG["ERROR"] and struct.unpack(">H", payload[:2])[0] == 4
    ok = ok and r.closed()
    r.close()
    return ok


def own_error(b):
    r = Raw(b.sock, uid=1001)
    t, _ = r.hello(ROLE_SOURCE)
    check(t == MSG["WELCOME"], "the source is welcomed")
    text = b"leaving"
    r.send(MSG["ERROR"], struct.pack(">HH", 1, len(text)) + text)
    ok = r.closed()
    r.close()
    return ok


def malformed(b):
    r = Raw(b.sock, uid=1000)
    t, _ = r.hello(ROLE_SINK)
    check(t == MSG["WELCOME"], "the sink is welcomed")
    r.send(MSG["GET"], b"\x00\x01")  # a GET is 8 bytes
    t, _ = r.recv()
    ok = t == MSG["ERROR"] and r.closed()
    r.close()
    return ok


def wait_counts(b, want, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        st = b.status()
        got = (st["sources"], st["sinks"])
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test():
    # Its raw peers connect as other uids.
    need_root("to connect as uid 1000 and 1001")
    b = start_broker(users={"rawsink": {"role": "sink", "unix-uid": 1000, "key": False},
                            "rawsource": {"role": "source", "unix-uid": 1001, "key": False}})
    try:
        legit = Legit(b)
        legit.round("no attack")
        st = b.status()
        base = (st["sources"], st["sinks"])
        print(f"# baseline: {base[0]} sources, {base[1]} sinks")
        w = Window(b, "status-drift").begin()
        for what, fn in (("a sink's PUT, answered FORBIDDEN", forbidden_put),
                         ("a client's own ERROR after WELCOME", own_error),
                         ("a malformed frame after WELCOME", malformed)):
            answered = sum(fn(b) for _ in range(ROUNDS))
            check(answered == ROUNDS, f"{what}: closed as the protocol says ({answered} of "
                  f"{ROUNDS})")
            got = wait_counts(b, base)
            expect(got == base, f"after {ROUNDS} x {what}, status shows {got[0]} sources and "
                   f"{got[1]} sinks, the baseline {base}")
            legit.round(what)
        w.end()
        w.check_cpu()
        w.check_log(3 * ROUNDS * 2 + 20)  # a refusal line each, a connect line each at most
        w.check_rss(8 * 1024)
        expect(b.alive(), "the broker is still running")
        legit.summary("status-drift")
    finally:
        b.cleanup()


main(test)
