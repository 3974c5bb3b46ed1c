#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A session the broker ends (docs/protocol.md 1.1): a client that ends its side right after its
last request (close_notify over TLS, shutdown(SHUT_WR) over plain unix) is answered, and the
broker then sends close_notify and closes first, so that a balancer between them logs an orderly
close, not a client abort. With an empty pool the answer (EMPTY) comes after the client's end:
the broker used to drop the session at the client's close_notify, unanswered. A client that
keeps its side open is served as before, and eb-sink-file --bytes ends its session this way."""
import os
import socket
import struct
import subprocess
import time

from eblib import (BUILD, MSG, ROLE_SINK, Broker, Raw, check, donate, draw, main, prog,
                   wait_for)

TLS_PEER = os.path.join(BUILD, "tests", "attack-tls-peer")


def tls_last(b, user):
    """attack-tls-peer last: HELLO, a GET and close_notify; (answer type, how it ended, s)."""
    t0 = time.monotonic()
    p = subprocess.run([TLS_PEER, b.host, str(b.port), user, b.keys[user], "last"],
                       capture_output=True, text=True, timeout=30)
    took = time.monotonic() - t0
    out = dict(l.split(" ", 1) for l in p.stdout.splitlines() if " " in l)
    return out.get("answer"), out.get("close:"), took


def unix_last(b):
    """The same over plain unix: HELLO, GET, shutdown(SHUT_WR); (answer type, closed)."""
    r = Raw(b.sock)
    t, _ = r.hello(ROLE_SINK)
    check(t == MSG["WELCOME"], "the unix sink is welcome")
    r.send(MSG["GET"], struct.pack(">IB3x", 256, 0))
    r.s.shutdown(socket.SHUT_WR)
    t, _ = r.recv()
    closed = r.closed()
    r.close()
    return t, closed


def test():
    b = Broker({"sink": {"role": "sink", "unix-uid": os.getuid()},
                "donor": {"role": "source", "max-credit-per-byte": 8}})
    try:
        b.start()
        # An empty pool: the GET waits, and its answer, EMPTY, comes after the client's end.
        answer, how, _ = tls_last(b, "sink")
        check(answer == str(MSG["EMPTY"]), f"TLS: the GET sent with close_notify is answered "
              f"(EMPTY) though the pool is empty (answer {answer})")
        check(how == "close_notify", f"then the broker says close_notify and closes ({how})")
        t, closed = unix_last(b)
        check(t == MSG["EMPTY"] and closed, f"unix: the GET is answered ({t}), then closed")

        data = os.path.join(b.tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(64 * 1024))
        check(donate(b, "donor", data, credit=8).returncode == 0, "the pool is filled")
        answer, how, took = tls_last(b, "sink")
        check(answer == str(MSG["DATA"]) and how == "close_notify",
              f"TLS: DATA, then the broker's close_notify and close ({answer}, {how})")
        print(f"# a session ended by the broker took {took * 1000:.0f} ms, handshake included")
        t, closed = unix_last(b)
        check(t == MSG["DATA"] and closed, f"unix: DATA ({t}), then closed by the broker")

        # Old clients: the session stays open after DATA until the client ends it.
        r = Raw(b.sock)
        r.hello(ROLE_SINK)
        r.send(MSG["GET"], struct.pack(">IB3x", 256, 0))
        t, _ = r.recv()
        r.s.settimeout(0.5)
        try:
            still_open = r.s.recv(1) != b""
        except socket.timeout:
            still_open = True
        r.close()
        check(t == MSG["DATA"] and still_open, "a client that keeps its side open keeps its session")

        # eb-sink-file --bytes ends its session with its last GET: the broker closes, and
        # logs no error.
        before = len(b.read_log())
        p = draw(b, "sink", 100, extra=["-v"])
        check(p.returncode == 0 and len(p.stdout) == 100, "eb-sink-file draws 100 bytes")
        check(b.alive(), "the broker is still running")
        log = b.read_log()[before:]
        check("went away" not in log, f"and the broker saw an orderly end ({log.strip()[-300:]})")
    finally:
        b.cleanup()


main(test)
