#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""STATUS version 1 (docs/protocol.md 3.10, 3.11) lets an outsider check the level to the bit:
after every PUT of a sequence whose credit is not whole bits a byte (7.5, 7, 5.3 ... bits a
byte, so blocks are cut inside bytes and credit is dropped), bits_in - carried - dropped is 576
per 512 bits of level, and carried and dropped are exactly what protocol.md's rule gives when
worked out here byte by byte from the PUTs alone. An empty STATUS_REQ still gets the 52-byte
STATUS; eb-brokerctl status --json shows the same carried and dropped."""
import json
import os
import struct

from eblib import MSG, ROLE_SOURCE, Broker, Raw, check, main, prog, run

ROLE_ADMIN = 0x04
BLOCK_CREDIT = 576


class Model:
    """protocol.md 3.11 worked out byte by byte: the first x bytes of an input of len bytes
    credited c carry floor(x * c / len) bits; a block is cut at the first byte where the
    accumulator reaches 576, what that byte brings beyond is dropped."""

    def __init__(self):
        self.carried = self.dropped = self.blocks = 0

    def add(self, n, c):
        prev = 0
        for i in range(1, n + 1):
            f = i * c // n
            self.carried += f - prev
            prev = f
            if self.carried >= BLOCK_CREDIT:
                self.dropped += self.carried - BLOCK_CREDIT
                self.carried = 0
                self.blocks += 1


def status(r, version):
    r.send(MSG["STATUS_REQ"], struct.pack(">B3x", 1) if version else b"")
    while True:
        t, p = r.recv()
        if t != MSG["SLEEP"] and t != MSG["WAKE"]:
            break
    check(t == MSG["STATUS"], f"STATUS answers STATUS_REQ version {version} (got {t})")
    check(len(p) == (68 if version else 52), f"STATUS version {version} is {len(p)} bytes")
    f = struct.unpack(">5Q3I", p[:52])
    st = dict(zip(("pool_bits", "capacity_bits", "bits_in", "bits_out", "bytes_drbg",
                   "sources", "sinks", "uptime_s"), f))
    if version:
        st["carried"], st["dropped"] = struct.unpack(">QQ", p[52:])
    return st


def put(r, n, credit):
    r.send(MSG["PUT"], struct.pack(">II", credit, n) + os.urandom(n))
    while True:
        t, p = r.recv()
        if t == MSG["PUT_ACK"]:
            return struct.unpack(">II", p)[0]
        check(t in (MSG["SLEEP"], MSG["WAKE"]), f"PUT answered with PUT_ACK (got {t})")


def test():
    me = os.getuid()
    b = Broker({"local": {"role": "source, admin", "unix-uid": me, "key": False,
                          "max-credit-per-byte": 8},
                "admin": {"role": "admin"}})
    try:
        b.start()
        r = Raw(b.sock)
        t, _ = r.hello(ROLE_SOURCE | ROLE_ADMIN)
        check(t == MSG["WELCOME"], "a local source and admin is welcomed")
        st = status(r, 1)
        check(st["carried"] == 0 and st["dropped"] == 0 and st["bits_in"] == 0,
              "a new broker has carried and dropped nothing")
        old = status(r, 0)
        check(old["pool_bits"] == st["pool_bits"], "the empty STATUS_REQ still gets version 0")

        m = Model()
        base_pool = st["pool_bits"]
        # (bytes, credit): 7.5, 7, 5.3, 6.1, 7.99, 1.5 ... bits a byte, and whole ones between.
        seq = [(80, 600), (100, 700), (33, 175), (1000, 6100), (7, 50), (4096, 32730),
               (999, 1500), (64, 512), (577, 4400), (3, 23), (2048, 16383), (10, 79)]
        for i in range(3):
            for n, c in seq:
                credited = put(r, n, c)
                check(credited == c, f"a PUT of {n} bytes claiming {c} bits is credited "
                                     f"in full ({credited})")
                m.add(n, credited)
                st = status(r, 1)
                blocks = (st["pool_bits"] - base_pool) // 512
                check(st["carried"] == m.carried and st["dropped"] == m.dropped,
                      f"after {n} bytes at {c} bits: carried {st['carried']} and dropped "
                      f"{st['dropped']}, as worked out from the PUTs ({m.carried}, {m.dropped})")
                check(st["bits_in"] - st["carried"] - st["dropped"] == BLOCK_CREDIT * blocks
                      and blocks == m.blocks,
                      f"bits_in {st['bits_in']} - carried - dropped is 576 x the {blocks} "
                      f"blocks of level")
        check(m.dropped > 0, f"the sequence dropped credit at cuts ({m.dropped} bits)")

        p = run([prog("eb-brokerctl"), "-b", b.tcp, "-u", "admin", "-k", b.keys["admin"],
                 "status", "--json"], timeout=30)
        check(p.returncode == 0, f"eb-brokerctl status --json ({p.stderr.decode().strip()})")
        j = json.loads(p.stdout)
        check(j.get("carried_bits") == m.carried and j.get("dropped_bits") == m.dropped,
              f"eb-brokerctl shows carried {j.get('carried_bits')} and dropped "
              f"{j.get('dropped_bits')}")
        p = run([prog("eb-brokerctl"), "-b", b.tcp, "-u", "admin", "-k", b.keys["admin"],
                 "status"], timeout=30)
        check(f"{m.carried} bits carried toward the next block, {m.dropped} dropped"
              in p.stdout.decode(), "and says them in words")
        r.close()
    finally:
        b.cleanup()


if __name__ == "__main__":
    main(test)
