#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A sink with a quota of 8192 bits an hour asks for 1 byte of full entropy at a time, as fast as
it can for 5 s, from a full pool. The pool spends a whole 512-bit block on each answer however
small: the quota must be charged what the pool spends, so the pool falls by at most the quota (16
blocks), not by 64 times it as when each byte was charged 8 bits."""
import struct
import time

from attacklib import (MSG, ROLE_SINK, Legit, Raw, Window, check, expect, legit_during, main,
                       need_root, run_attacker, start_broker)

QUOTA = 8192
SLACK = 1024
DRAIN_S = 5
CAPACITY = 1048576
BLOCK = 512


def drain(report, b):
    r = Raw(b.sock, uid=1001)
    try:
        t, _ = r.hello(ROLE_SINK)
        if t != MSG["WELCOME"]:
            report["refused"] = t
            return
        t0 = time.monotonic()
        counts = {}
        bits = 0
        while time.monotonic() - t0 < DRAIN_S:
            r.send(MSG["GET"], struct.pack(">IB3x", 8, 0))  # 1 byte, full entropy
            t, payload = r.recv()
            if t is None:
                break
            counts[t] = counts.get(t, 0) + 1
            if t == MSG["DATA"]:
                bits += struct.unpack(">I", payload[:4])[0]
            elif t in (MSG["QUOTA"], MSG["EMPTY"]):
                # Told to wait: greed asks again soon anyway, bounded by the window.
                time.sleep(min(0.05, struct.unpack(">I", payload[:4])[0] / 1000))
        report.update(answers=dict(counts), bits=bits, data=counts.get(MSG["DATA"], 0))
    finally:
        r.close()


def test():
    # Its raw peer connects as another uid.
    need_root("to connect as uid 1001")
    b = start_broker(users={"greedy": {"role": "sink", "unix-uid": 1001, "key": False,
                                       "quota-bits-per-hour": QUOTA}},
                     capacity=CAPACITY, prime_bytes=CAPACITY // 8 + 32 * 1024)
    try:
        legit = Legit(b)
        # A full pool puts sources to rest (SLEEP, by design): the sinks and the admin are
        # the clients to time here.
        which = ("sink-tls", "sink-unix", "admin-status")
        legit.round("no attack", which=which)
        st0 = b.status()
        print(f"# pool before the drain: {st0['pool_bits']} of {st0['capacity_bits']} bits")
        check(st0["pool_bits"] >= CAPACITY - 4096, "the pool is full before the drain")
        w = Window(b, "quota-blocks").begin()
        t, report = run_attacker(drain, b)
        legit_during(t, legit, w, "quota-blocks", every=1.0, which=which)
        w.end()
        check("exception" not in report and "refused" not in report,
              f"the greedy sink drew ({report})")
        st1 = b.status()
        fell = st0["pool_bits"] - st1["pool_bits"]
        # The legitimate sinks draw 32 bytes a time, half a block each.
        legit_cost = (st1["bits_out"] - st0["bits_out"] - report["bits"]) * 2
        print(f"# quota-blocks: {report['data']} 1-byte answers in {DRAIN_S} s, answers "
              f"{report['answers']}; pool {st0['pool_bits']} -> {st1['pool_bits']} bits "
              f"(fell {fell}; the legitimate sinks' share {legit_cost})")
        expect(fell - legit_cost <= QUOTA + SLACK,
               f"the pool falls by at most the quota + {SLACK} bits for the 1-byte sink "
               f"({fell - legit_cost} bits)")
        expect(report["data"] <= (QUOTA + SLACK) // BLOCK,
               f"the 1-byte sink got at most a block's answer per 512 bits of quota "
               f"({report['data']} answers)")
        w.check_cpu()
        w.check_log(50)
        w.check_rss(16 * 1024)
        expect(b.alive(), "the broker is still running")
        legit.summary("quota-blocks")
    finally:
        b.cleanup()


main(test)
