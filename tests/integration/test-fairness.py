#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Sinks waiting on an empty pool are served in order: small first-boot requests before large
ones, then first come, first served, and a sink that was answered and asks again queues behind
those already waiting. Each GET is answered exactly once, and every bit delivered is counted.

Each assertion is built so that another order gives another outcome: the pool is given fewer
blocks than the waiting sinks want, so who gets DATA and who gets EMPTY shows the order."""
import os
import socket
import struct
import time

from eblib import ME, MSG, ROLE_SINK, ROLE_SOURCE, Broker, Raw, check, main

# GETs are sent this far apart, so that the broker reads them in the order they were sent; all of
# a round fits well inside the 250 ms a GET waits before EMPTY.
GAP = 0.01


def get(r, nbytes):
    r.send(MSG["GET"], struct.pack(">IB3x", nbytes * 8, 0))


def put_blocks(src, n):
    """Donates exactly n pool blocks: each is made of 576 credited bits (512 + 64), and the 64
    bits over stay in the pool's accumulator, short of a block."""
    data = os.urandom(n * 72 + 8)
    src.send(MSG["PUT"], struct.pack(">II", len(data) * 8, len(data)) + data)
    t, _ = src.recv()
    check(t == MSG["PUT_ACK"], f"the donation of {n} blocks is acknowledged")


def answer(r):
    t, payload = r.recv()
    if t == MSG["DATA"]:
        bits, n = struct.unpack(">II", payload[:8])
        check(bits == 256 and n == 32, f"DATA carries exactly 32 bytes and 256 bits ({n}, {bits})")
        return "DATA"
    check(t == MSG["EMPTY"], f"the answer is DATA or EMPTY (got type {t})")
    return "EMPTY"


def sink(b):
    r = Raw(b.sock)
    check(r.hello(ROLE_SINK)[0] == MSG["WELCOME"], "a sink is welcomed")
    return r


def test():
    b = Broker({
        "admin": {"role": "admin"},
        "src": {"role": "source", "unix-uid": 1001, "key": False},
        "local": {"role": "sink", "unix-uid": ME, "key": False},
    }).start()
    try:
        src = Raw(b.sock, uid=1001)
        check(src.hello(ROLE_SOURCE)[0] == MSG["WELCOME"], "the source is welcomed")
        big = sink(b)
        small = [sink(b) for _ in range(10)]

        # Round 1: the large request comes first, then ten small ones, on an empty pool. Eight
        # blocks are donated: enough for a 512-byte partial answer to the large one, or for eight
        # of the small ones. Small first and then in order of arrival means: the first eight
        # small ones get DATA; the last two, and the large one, get EMPTY.
        get(big, 65536)
        time.sleep(2 * GAP)
        for r in small:
            get(r, 32)
            time.sleep(GAP)
        put_blocks(src, 8)
        got = [answer(r) for r in small]
        served = [i for i, a in enumerate(got) if a == "DATA"]
        check(served == list(range(8)),
              f"the first eight small requests, in the order they came, are served ({served})")
        t, payload = big.recv()
        check(t == MSG["EMPTY"],
              "the large request, first to come but not small, waits behind them and gets EMPTY")

        # Round 2: the sink served first asks again while another waits. Sink 8 asks, then sink 0
        # (served in round 1); one block goes to sink 8. Sink 8 asks again at once; the next block
        # goes to sink 0, which was waiting, not to sink 8, which queued again behind it.
        get(small[8], 32)
        time.sleep(GAP)
        get(small[0], 32)
        time.sleep(GAP)
        put_blocks(src, 1)
        check(answer(small[8]) == "DATA", "the sink that waited longest is served first")
        get(small[8], 32)
        time.sleep(GAP)
        put_blocks(src, 1)
        check(answer(small[0]) == "DATA",
              "the next block goes to the sink already waiting, not to the one just served")
        check(answer(small[8]) == "EMPTY",
              "the sink served and asking again queued behind it, and gets EMPTY")

        # Each GET was answered once: nothing more arrives for anyone.
        for r in small + [big]:
            r.s.settimeout(0.3)
            try:
                extra = r.s.recv(1)
            except socket.timeout:
                extra = None
            check(extra is None, "no second answer to the same GET")
        st = b.status()
        check(st["bits_out"] == 10 * 256,
              f"bits_out counts exactly what was delivered ({st['bits_out']})")
        check(st["bits_out"] + 10 * 64 <= st["bits_in"],
              "and never more than came in, less overhead")
    finally:
        b.cleanup()


main(test)
