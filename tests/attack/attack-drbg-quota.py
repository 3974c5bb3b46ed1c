#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A sink with a quota of 8192 bits an hour draws in DRBG mode as fast as it can for 5 s, from a
full pool. DRBG output is not counted as entropy, but the DRBG's reseeds take blocks from the
pool: they must be charged to the sink's quota, so the pool falls by at most the quota (plus a
reseed's worth of slack) and not by whatever the sink's greed costs."""
import struct
import threading
import time

from attacklib import (MSG, ROLE_SINK, Legit, Raw, Window, check, expect, legit_during, main,
                       need_root, run_attacker, start_broker)

QUOTA = 8192
SLACK = 2048
DRAIN_S = 5
CAPACITY = 1048576


def drain(report, b):
    r = Raw(b.sock, uid=1001)
    try:
        t, _ = r.hello(ROLE_SINK)
        if t != MSG["WELCOME"]:
            report["refused"] = t
            return
        t0 = time.monotonic()
        counts = {}
        got = 0
        while time.monotonic() - t0 < DRAIN_S:
            r.send(MSG["GET"], struct.pack(">IB3x", 524288, 1))  # 64 KiB, DRBG mode
            t, payload = r.recv()
            if t is None:
                break
            counts[t] = counts.get(t, 0) + 1
            if t == MSG["DATA"]:
                got += struct.unpack(">I", payload[4:8])[0]
            elif t in (MSG["QUOTA"], MSG["EMPTY"]):
                # Told to wait: greed asks again soon anyway, bounded by the window.
                time.sleep(min(0.05, struct.unpack(">I", payload[:4])[0] / 1000))
        report.update(answers={k: v for k, v in counts.items()}, bytes=got)
    finally:
        r.close()


def test():
    # Its raw peers connect as other uids.
    need_root("to connect as uid 1001")
    b = start_broker(users={"greedy": {"role": "sink", "unix-uid": 1001, "key": False,
                                       "quota-bits-per-hour": QUOTA}},
                     capacity=CAPACITY, prime_bytes=CAPACITY // 8 + 32 * 1024)
    try:
        legit = Legit(b)
        # A full pool puts sources to rest (SLEEP, by design): the source is not a client to
        # time here; the sinks and the admin are.
        which = ("sink-tls", "sink-unix", "admin-status")
        legit.round("no attack", which=which)
        st0 = b.status()
        print(f"# pool before the drain: {st0['pool_bits']} of {st0['capacity_bits']} bits")
        check(st0["pool_bits"] >= CAPACITY - 4096, "the pool is full before the drain")
        w = Window(b, "drbg-quota").begin()
        t, report = run_attacker(drain, b)
        legit_during(t, legit, w, "drbg-quota", every=1.0, which=which)
        w.end()
        check("exception" not in report and "refused" not in report,
              f"the greedy sink drew ({report})")
        st1 = b.status()
        fell = st0["pool_bits"] - st1["pool_bits"]
        # The legitimate sinks' full-entropy draws cost whole 512-bit blocks of 32 bytes each.
        legit_cost = (st1["bits_out"] - st0["bits_out"]) * 2
        print(f"# drbg-quota: {report['bytes']} DRBG bytes drawn in {DRAIN_S} s, answers "
              f"{report['answers']}; pool {st0['pool_bits']} -> {st1['pool_bits']} bits "
              f"(fell {fell}; the legitimate sinks' share {legit_cost})")
        expect(fell - legit_cost <= QUOTA + SLACK,
               f"the pool falls by at most the quota + {SLACK} bits for the DRBG sink "
               f"({fell - legit_cost} bits)")
        # DRBG output is the one thing a sink may take without limit: serving 64 KiB GETs
        # back to back is real work (about half a core here), not a spin, so the CPU is
        # shown, not judged; attack-stall and the floods judge it.
        w.check_cpu(bound=float("inf"))
        w.check_log(50)
        w.check_rss(16 * 1024)
        expect(b.alive(), "the broker is still running")
        legit.summary("drbg-quota")
    finally:
        b.cleanup()


main(test)
