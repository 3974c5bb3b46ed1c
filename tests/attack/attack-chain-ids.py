#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A sink of a broker that draws from an upstream says HELLO with 16 made-up broker ids, as a
broker drawing through this one would. Those ids went into the path this broker tells its
upstream: 16 of them and its own make 17, more than a HELLO carries, and the broker stopped
drawing, still so after the sink left. Ids are taken only from a user configured as a
downstream broker: the sink is refused, and the broker refills from its upstream whenever a
legitimate sink drains it, while the sink tries and after it has gone.

A downstream broker's ids are budgeted too (issue 31, item 4): one with 15 made-up ids filled the
path, and a second downstream broker was refused 5 times of 5 ("chain too deep"). The user
holding the most ids now makes way for one that would hold fewer: the second is welcomed each
time, the first ended, and refused while it would hold more."""
import os
import struct
import time

from attacklib import (MSG, PRE_FIX, ROLE_SINK, Legit, Raw, Window, check, expect, main,
                       need_root, start_broker)
from eblib import Broker, draw, prog, run, wait_for

CAP_DOWN = 131072  # bits; the upstream low water (50 %) is 65536
DRAIN = 6144  # bytes: 49152 bits, more than the level above low water


def hello_with_ids(r, n):
    kind = b"eb-brokerd upstream draw"
    ids = b"".join(os.urandom(8) for _ in range(n))
    r.send(MSG["HELLO"], struct.pack(">HBBIH", 1, ROLE_SINK, 0, 0, len(kind)) + kind +
           bytes([n]) + ids)
    return r.recv()


def refills(up, down, what):
    """Drains the downstream below its upstream low water with a legitimate sink, then waits
    for it to refill from the upstream; returns whether it did, and how long it took."""
    out0 = up.status()["bits_out"]
    p = draw(down, "sink", DRAIN)
    check(p.returncode == 0 and len(p.stdout) == DRAIN,
          f"a legitimate sink drew {DRAIN} bytes {what} ({p.stderr.decode().strip()[-200:]})")
    t0 = time.monotonic()
    deadline = t0 + 20
    while time.monotonic() < deadline:
        if up.status()["bits_out"] > out0 and down.status()["pool_bits"] >= CAP_DOWN // 2:
            return True, time.monotonic() - t0
        time.sleep(0.2)
    return False, time.monotonic() - t0


def test():
    need_root("to connect as uid 1001")
    # The user a downstream broker draws as; a broker before the fix knows no such key.
    edge = {"role": "sink"} if PRE_FIX else {"role": "sink", "downstream-broker": "yes"}
    up = Broker({"src": {"role": "source", "unix-uid": os.getuid(), "key": False},
                 "edge": edge, "admin": {"role": "admin"}}, capacity=1 << 21)
    down = None
    try:
        up.start()
        data = os.path.join(up.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(192 * 1024))
        p = run([prog("eb-source-file"), "-b", up.unix, "--credit-per-byte=8",
                 "--max-credit-per-byte=8", data])
        check(p.returncode == 0, f"the upstream is fed ({p.stderr.decode().strip()[-200:]})")
        # Drawing needs the broker running before anyone connects: not socket-activated.
        down = start_broker(users={"tenant": {"role": "sink", "unix-uid": 1001, "key": False},
                                   "below": {"role": "sink", "unix-uid": 1003, "key": False},
                                   "below2": {"role": "sink", "unix-uid": 1004, "key": False}},
                            user_keys={"below": "downstream-broker = yes",
                                       "below2": "downstream-broker = yes"},
                            capacity=CAP_DOWN, activate=False, prime_bytes=0, extra=f"""
[upstream]
broker = {up.tcp}
user = edge
key-file = {up.keys['edge']}
low-water-percent = 50
draw-bits = 16384
""")
        wait_for("the downstream fills to its upstream low water from the upstream",
                 lambda: down.status()["pool_bits"] >= CAP_DOWN // 2)
        ok, secs = refills(up, down, "before the attack")
        check(ok, "the downstream refills from its upstream before the attack")
        print(f"# chain-ids: refill before the attack took {secs:.1f} s")

        legit = Legit(down)
        w = Window(down, "chain-ids").begin()
        tenant = Raw(down.sock, uid=1001)
        t, payload = hello_with_ids(tenant, 16)
        print(f"# chain-ids: the sink's HELLO with 16 made-up ids was answered with type {t} "
              f"({payload[:80]!r})")
        if not PRE_FIX:
            # Refused as what it is, a user that is not a broker, and so with any number of
            # ids: not for a path too deep, which would let it in with fewer.
            expect(t == MSG["ERROR"] and b"not a broker" in payload,
                   "the sink's ids are refused because it is not a downstream broker")
            one = Raw(down.sock, uid=1001)
            t1, p1 = hello_with_ids(one, 1)
            expect(t1 == MSG["ERROR"] and b"not a broker" in p1,
                   f"and so is one made-up id from it ({t1}, {p1[:60]!r})")
            one.close()
        legit.round("chain-ids")
        ok, secs = refills(up, down, "while the sink with 16 ids is there")
        print(f"# chain-ids: refill with the sink there: {'yes' if ok else 'no'} in {secs:.1f} s")
        expect(ok, "the downstream refills from its upstream while the sink with 16 ids is "
               "connected")
        tenant.close()
        legit.round("chain-ids")
        ok, secs = refills(up, down, "after the sink left")
        print(f"# chain-ids: refill after the sink left: {'yes' if ok else 'no'} in {secs:.1f} s")
        expect(ok, "the downstream refills from its upstream after the sink left")
        expect("Not drawing from upstream" not in down.read_log(),
               "the downstream never stopped drawing")
        if not PRE_FIX:
            # A real downstream broker's ids count, within the bound: 15 and this broker's
            # own make 16, which fit; 16 would not, and that broker is refused at HELLO.
            below = Raw(down.sock, uid=1003)
            t, payload = hello_with_ids(below, 16)
            expect(t == MSG["ERROR"] and b"too deep" in payload,
                   f"a downstream broker with 16 ids is refused: chain too deep ({t}, "
                   f"{payload[:60]!r})")
            below.close()
            below = Raw(down.sock, uid=1003)
            t, _ = hello_with_ids(below, 15)
            expect(t == MSG["WELCOME"], f"one with 15 ids is welcomed (got type {t})")
            ok, secs = refills(up, down, "with a downstream broker of 15 ids")
            expect(ok, "and the downstream still refills, its path at 16 ids")
            # A second downstream broker (another user) with 1 id: the one holding 15 makes
            # way, each of 5 times; coming back with its 15 it is refused while the second is
            # there.
            welcomed = 0
            for i in range(5):
                t0 = time.monotonic()
                below2 = Raw(down.sock, uid=1004)
                t, payload = hello_with_ids(below2, 1)
                ms = (time.monotonic() - t0) * 1000
                print(f"# chain-ids: a second downstream broker with 1 id, beside one with 15: "
                      f"type {t} in {ms:.0f} ms ({payload[:60]!r})")
                welcomed += t == MSG["WELCOME"] and ms < 1000
                if t != MSG["WELCOME"]:
                    below2.close()
                    continue
                t, payload = below.recv()
                expect(t == MSG["ERROR"] and b"too deep" in payload,
                       f"the one with 15 ids was ended: chain too deep ({t}, {payload[:60]!r})")
                below.close()
                below = Raw(down.sock, uid=1003)
                t, _ = hello_with_ids(below, 15)
                expect(t == MSG["ERROR"], f"it is refused while the second is there (got type "
                       f"{t})")
                below2.close()

                # The second's session ends when the broker reads the close: until then 15 ids
                # do not fit, and the retry is what a downstream broker's back-off would do.
                def back_in():
                    nonlocal below
                    below.close()
                    below = Raw(down.sock, uid=1003)
                    return hello_with_ids(below, 15)[0] == MSG["WELCOME"]
                wait_for("with the second gone, 15 ids fit again", back_in, 10)
            print(f"# chain-ids: second downstream broker welcomed {welcomed} of 5")
            expect(welcomed == 5, f"a second downstream broker is welcomed within 1 s beside "
                   f"one holding 15 ids, 5 of 5 ({welcomed})")
            legit.round("chain-ids")
            below.close()
        w.end()
        w.check_cpu()
        w.check_log(50)
        expect(down.alive(), "the broker is still running")
        legit.summary("chain-ids")
    finally:
        if down:
            down.cleanup()
        up.cleanup()


main(test)
