#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Flow control as the broker promises it: EMPTY with a retry hint to a sink it cannot serve,
SLEEP to sources at high water, WAKE below low water, credit never past capacity, and QUOTA to
a sink whose hourly quota is spent."""
import os
import struct
import time

from eblib import ME, MSG, ROLE_SINK, ROLE_SOURCE, Broker, Raw, check, draw, main

CAPACITY = 65536


def put(r, n=4096):
    r.send(MSG["PUT"], struct.pack(">II", n * 8, n) + os.urandom(n))


def get(r, bits):
    r.send(MSG["GET"], struct.pack(">IB3x", bits, 0))
    return r.recv()


def test():
    b = Broker({
        "admin": {"role": "admin"},
        "rawsource": {"role": "source", "unix-uid": 1001, "key": False},
        "local": {"role": "sink", "unix-uid": ME, "key": False},
        "metered": {"role": "sink", "unix-uid": 1002, "key": False,
                    "quota-bits-per-hour": 8192},
        "nibbler": {"role": "sink", "unix-uid": 1003, "key": False,
                    "quota-bits-per-hour": 8192},
    }, capacity=CAPACITY,
       broker_extra="low-water-percent = 25\nhigh-water-percent = 90").start()
    try:
        sink = Raw(b.sock)
        t, _ = sink.hello(ROLE_SINK)
        check(t == MSG["WELCOME"], "a sink is welcomed")
        t0 = time.time()
        t, payload = get(sink, 256)
        waited = time.time() - t0
        check(t == MSG["EMPTY"], "a GET on an empty pool is answered EMPTY")
        retry = struct.unpack(">I", payload)[0]
        check(retry > 0, f"with a retry hint ({retry} ms)")
        check(0.2 <= waited < 2, f"after holding the request a moment ({waited:.2f} s)")

        src = Raw(b.sock, uid=1001)
        t, _ = src.hello(ROLE_SOURCE)
        check(t == MSG["WELCOME"], "a source is welcomed")
        credited, slept = 0, False
        for _ in range(64):
            put(src)
            t, payload = src.recv()
            if t == MSG["SLEEP"]:
                slept = True
                t, payload = src.recv()
            check_ack = t == MSG["PUT_ACK"]
            if not check_ack:
                break
            credited += struct.unpack(">II", payload)[0]
            if slept:
                break
        st = b.status()
        check(slept, f"the source is told to SLEEP (pool at {st['pool_bits']} of {CAPACITY})")
        check(st["pool_bits"] >= CAPACITY * 90 // 100, "only once the pool reached high water")

        # Donations while asleep are taken but never credited past capacity.
        full = b.status()["pool_bits"] == CAPACITY
        late = 0
        for _ in range(8):
            put(src)
            t, payload = src.recv()
            if t != MSG["PUT_ACK"]:
                break
            late += struct.unpack(">II", payload)[0]
        check(t == MSG["PUT_ACK"], "PUTs during SLEEP are still acknowledged")
        if full:
            check(late <= 576, f"a full pool credits them nothing beyond one partial block ({late} bits)")
        st = b.status()
        check(st["pool_bits"] <= CAPACITY, f"the level ({st['pool_bits']}) never exceeds capacity")
        check(st["bits_in"] <= CAPACITY * 9 // 8 + 8 * 4096 * 8,
              "credit stops where the pool has no room")

        # Draw below low water: the source is woken.
        want = (st["pool_bits"] - CAPACITY * 25 // 100) // 8 + 64
        p = draw(b, "local", want, uri=b.unix)
        check(p.returncode == 0 and len(p.stdout) == want, f"a sink draws {want} bytes")
        t, _ = src.recv()
        check(t == MSG["WAKE"], "the source is woken below low water")

        # Quota: 8192 bits an hour for 'metered'.
        m = Raw(b.sock, uid=1002)
        t, _ = m.hello(ROLE_SINK)
        t, payload = get(m, 8192)
        check(t == MSG["DATA"], "a metered sink gets its hour's quota")
        bits = struct.unpack(">I", payload[:4])[0]
        check(bits == 8192, f"exactly the quota ({bits} bits)")
        t, payload = get(m, 4096)
        check(t == MSG["QUOTA"], "the next GET is answered QUOTA")
        retry = struct.unpack(">I", payload)[0]
        check(retry > 60000, f"with a retry hint in minutes, not milliseconds ({retry} ms)")

        # The quota pays what the pool spends, a whole 64-byte block even for a 1-byte GET
        # (docs/security.md): 8192 bits an hour pay for 16 such GETs, not 1,024.
        for _ in range(64):  # the pool refilled first, so that only the quota can say no
            if b.status()["pool_bits"] >= 17 * 512 + 4096:
                break
            put(src)
            if src.recv()[0] == MSG["SLEEP"]:
                src.recv()
        n = Raw(b.sock, uid=1003)
        t, _ = n.hello(ROLE_SINK)
        answers = [get(n, 8)[0] for _ in range(17)]
        served = answers.index(MSG["QUOTA"]) if MSG["QUOTA"] in answers else len(answers)
        check(served == 16 and all(t == MSG["DATA"] for t in answers[:16]),
              f"1-byte GETs are charged a whole block each: 16 served, then QUOTA "
              f"({served} served: {answers})")
        check(b.alive(), "the broker is still running")
    finally:
        b.cleanup()


main(test)
