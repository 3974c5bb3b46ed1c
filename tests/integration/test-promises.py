#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Four promises of the docs, each held to:
- docs/decisions.md, "The broker's own continuous test": a PUT that starts as the previous PUT
  of the same session did gets no credit, with one log line per session; other sessions, and
  PUTs that start otherwise, are credited as before;
- eb-brokerd.conf(5) max-credit-per-byte= below 8 (4, as the package's drop-in gives local
  sources) caps what a source claiming 8 bits per byte is credited: 4 per byte;
- eb-brokerd(8): WATCHDOG=1 is sent as WatchdogSec= (WATCHDOG_USEC) asks;
- eb-brokerd.conf(5) seed-save-interval-sec=: the seed file is rewritten that often."""
import os
import re
import struct

from eblib import (ME, MSG, ROLE_SOURCE, Broker, Failure, Notify, Raw, check, main, prog, run,
                   wait_for)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def put(raw, data, credit):
    """A PUT claiming credit bits; the bits the PUT_ACK says were credited."""
    raw.send(MSG["PUT"], struct.pack(">II", credit, len(data)) + data)
    t, p = raw.recv()
    if t != MSG["PUT_ACK"]:
        raise Failure(f"PUT answered with type {t}: {p!r}")
    return struct.unpack(">II", p)[0]


def source(b):
    r = Raw(b.sock)
    t, p = r.hello(ROLE_SOURCE)
    if t != MSG["WELCOME"]:
        raise Failure(f"the local source is not welcome: {t} {p!r}")
    return r


def test_same_start(b):
    first = source(b)
    a = os.urandom(64)
    check(put(first, a, 512) == 512, "a fresh PUT is credited in full")
    before = b.read_log().count("repeats itself")
    check(put(first, a[:32] + os.urandom(32), 512) == 0,
          "a PUT that starts as the session's previous one did (32 bytes) gets no credit")
    check(b.wait_log("data from user local repeats itself; crediting none of it"),
          "and one log line says so")
    check(put(first, os.urandom(64), 512) == 512, "a PUT that starts otherwise is credited again")
    c = os.urandom(64)
    check(put(first, c, 512) == 512, "as is the next")
    check(put(first, c[:32] + os.urandom(40), 576) == 0, "the same start again: no credit")
    # Another session's PUT is not this session's previous one.
    second = source(b)
    check(put(second, c[:32] + os.urandom(32), 512) == 512,
          "another session's PUT starting the same way is credited: the rule is per session")
    # Each line is written as its PUT is handled, before the PUT_ACK the test waited for.
    check(b.read_log().count("repeats itself") == before + 1,
          f"one line per session, not per PUT ({b.read_log().count('repeats itself') - before})")
    first.close()
    second.close()


def test_credit_cap(b):
    with open(os.path.join(ROOT, "etc", "50-local-units.conf")) as f:
        shipped = re.search(r"\[user local-sources\][^\[]*?max-credit-per-byte\s*=\s*(\d+)",
                            f.read())
    check(shipped and shipped.group(1) == "4",
          "the package's drop-in caps local sources at 4 bits per byte")
    r = source(b)
    check(put(r, os.urandom(64), 512) == 256,
          "a source with max-credit-per-byte = 4 claiming 8 per byte is credited 4 per byte")
    r.close()
    data = os.path.join(b.tmp, "noise")
    with open(data, "wb") as f:
        f.write(os.urandom(8192))
    p = run([prog("eb-source-file"), "-b", b.unix, "--credit-per-byte=8",
             "--max-credit-per-byte=8", data], timeout=60)
    m = re.search(r"Donated 8192 bytes .*?, (\d+) bits credited of (\d+) claimed",
                  p.stderr.decode())
    # Its own start-up health test holds back some claims; the broker's cap takes the rest.
    check(p.returncode == 0 and m and int(m.group(1)) == 8192 * 4 < int(m.group(2)),
          f"eb-source-file claiming 8 bits per byte: 4 per byte credited "
          f"({m.group(0) if m else p.stderr.decode().strip()})")


def test_watchdog():
    b = Broker({"admin": {"role": "admin"}}, broker_extra="seed-save-interval-sec = 1")
    n = Notify(os.path.join(b.tmp, "notify"))
    # WatchdogSec=2s, as systemd would pass it; the broker pings at half of it.
    b.env = {"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": "2000000"}
    try:
        b.start()
        b.status()  # systemd-socket-activate starts the broker at the first connection
        check(n.wait(lambda m: "READY=1" in m) is not None, "the broker says READY=1")
        # Every datagram for 6 s: a 2 s watchdog wants a ping at least every 2 s.
        mark = len(n.msgs)
        n.wait(lambda m: False, timeout=6, start=mark)
        pings = sum("WATCHDOG=1" in m for m in n.msgs[mark:])
        check(pings >= 3, f"WATCHDOG=1 at the interval WatchdogSec= asks ({pings} in 6 s of a "
              "2 s watchdog)")

        # The same broker saves its seed every second (seed-save-interval-sec = 1).
        wait_for("the seed file", lambda: os.path.exists(b.seed), timeout=20)
        with open(b.seed, "rb") as f:
            first = f.read()
        stamp = os.stat(b.seed).st_mtime_ns
        wait_for("the seed file to be rewritten",
                 lambda: os.stat(b.seed).st_mtime_ns != stamp, timeout=20)
        with open(b.seed, "rb") as f:
            second = f.read()
        check(len(second) == len(first) and second != first,
              "seed-save-interval-sec = 1: the seed file is rewritten, with new content")
    finally:
        b.cleanup()
        n.close()


def test():
    b = Broker({"local": {"role": "source", "unix-uid": ME, "key": False}}).start()
    try:
        test_same_start(b)
    finally:
        b.cleanup()
    b = Broker({"local": {"role": "source", "unix-uid": ME, "key": False,
                          "max-credit-per-byte": 4}}).start()
    try:
        test_credit_cap(b)
    finally:
        b.cleanup()
    test_watchdog()


if __name__ == "__main__":
    main(test)
