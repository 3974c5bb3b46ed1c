#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A source donates over TLS, the pool level shows in eb-brokerctl, sinks draw exactly N bytes
over TLS and over unix, and nothing comes out that was not credited in."""
import os

from eblib import ME, Broker, check, donate, draw, main, prog, run


def test():
    b = Broker({
        "alice": {"role": "source"},
        "bob": {"role": "sink"},
        "admin": {"role": "admin"},
        "local": {"role": "sink", "unix-uid": ME, "key": False},
    }).start()
    try:
        data = os.path.join(b.tmp, "noise")
        with open(data, "wb") as f:
            # Less than high water (90 % of 1 Mbit) at 8 bits per byte: the file source
            # obeys SLEEP, and a full pool would keep it waiting for a WAKE.
            f.write(os.urandom(64 * 1024))
        st0 = b.status()
        check(st0["pool_bits"] == 0, "a new broker's pool is empty")
        check(st0["capacity_bits"] == 1048576, "capacity is the configured 1048576 bits")
        check("Broker ready" in b.read_log(), "the broker logs that it is ready")

        p = donate(b, "alice", data)
        check(p.returncode == 0, f"eb-source-file exits 0 ({p.stderr.decode().strip()[-200:]})")
        st1 = b.status()
        check(st1["bits_in"] > 0, f"the pool was credited ({st1['bits_in']} bits)")
        check(st1["pool_bits"] > 0 and st1["pool_bits"] <= st1["bits_in"],
              f"the level ({st1['pool_bits']}) is no more than what came in ({st1['bits_in']})")

        p = draw(b, "bob", 10000)
        check(p.returncode == 0, "eb-sink-file over TLS exits 0")
        check(len(p.stdout) == 10000, f"it wrote exactly 10000 bytes (wrote {len(p.stdout)})")

        out = os.path.join(b.tmp, "out")
        p = run([prog("eb-sink-file"), "-b", b.unix, "--bytes", "4096", "-o", out,
                 "--timeout", "20"])
        check(p.returncode == 0, "eb-sink-file over unix (SO_PEERCRED user) exits 0")
        check(os.path.getsize(out) == 4096, "it wrote exactly 4096 bytes to -o")
        check((os.stat(out).st_mode & 0o777) == 0o600, "the output file is mode 0600")

        st2 = b.status()
        check(st2["bits_out"] == (10000 + 4096) * 8,
              f"bits_out counts exactly what was delivered ({st2['bits_out']})")
        check(st2["bits_out"] + 64 <= st2["bits_in"],
              "credited bits out never exceed credited bits in")
        check(st2["pool_bits"] < st1["pool_bits"], "drawing lowered the pool level")

        # Ask for more than the pool holds: the sink must wait, then fail with a timeout,
        # having written only what the broker vouched for.
        big = st2["pool_bits"] // 8 + 100000
        p = run([prog("eb-sink-file"), "-b", b.unix, "--bytes", str(big), "--timeout", "2"])
        check(p.returncode == 1, "a sink asking for more than the pool can give exits 1")
        check(len(p.stdout) < big, "and does not pretend to have written it all")
        st3 = b.status()
        check(st3["bits_out"] == st2["bits_out"] + len(p.stdout) * 8,
              "everything it did write was counted as full entropy")
    finally:
        b.cleanup()


main(test)
