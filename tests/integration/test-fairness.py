#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Sinks waiting on an empty pool are served in order, small first-boot requests before large
ones, each GET answered exactly once, and every bit delivered is counted."""
import os
import socket
import struct
import threading
import time

from eblib import MSG, ROLE_SINK, ROLE_SOURCE, Broker, Raw, check, main


def test():
    b = Broker({
        "admin": {"role": "admin"},
        "src": {"role": "source", "unix-uid": 1001, "key": False},
        "local": {"role": "sink", "unix-uid": 0, "key": False},
    }).start()
    try:
        # Four small requests and one large one, all waiting on an empty pool.
        sinks = []
        for _ in range(4):
            r = Raw(b.sock)
            check(r.hello(ROLE_SINK)[0] == MSG["WELCOME"], "a sink is welcomed")
            sinks.append(r)
        big = Raw(b.sock)
        big.hello(ROLE_SINK)
        big.send(MSG["GET"], struct.pack(">IB3x", 65536 * 8, 0))
        time.sleep(0.05)
        for r in sinks:
            r.send(MSG["GET"], struct.pack(">IB3x", 256, 0))
        time.sleep(0.05)

        # Just enough for the small ones (4 x 512 bits) and not for a 512-byte partial answer.
        src = Raw(b.sock, uid=1001)
        src.hello(ROLE_SOURCE)
        data = os.urandom(4 * 72 + 8)
        src.send(MSG["PUT"], struct.pack(">II", len(data) * 8, len(data)) + data)
        t, _ = src.recv()
        check(t == MSG["PUT_ACK"], "the donation is acknowledged")

        for i, r in enumerate(sinks):
            t, payload = r.recv()
            check(t == MSG["DATA"], f"small sink {i} is served")
            bits, n = struct.unpack(">II", payload[:8])
            check(bits == 256 and n == 32, f"with exactly 32 bytes carrying 256 bits")
        t, payload = big.recv()
        check(t == MSG["EMPTY"], "the large request, which the rest cannot back, gets EMPTY")

        # Each GET was answered once: nothing more arrives for anyone.
        for r in sinks + [big]:
            r.s.settimeout(0.3)
            try:
                extra = r.s.recv(1)
            except socket.timeout:
                extra = None
            check(extra is None, "no second answer to the same GET")
        st = b.status()
        check(st["bits_out"] == 4 * 256, f"bits_out counts exactly what was delivered ({st['bits_out']})")
        check(st["bits_out"] + 4 * 64 <= st["bits_in"], "and never more than came in, less overhead")
    finally:
        b.cleanup()


main(test)
