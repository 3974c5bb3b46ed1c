#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-proxy-knuth end to end: Algorithm M and B donate X's bytes reordered, credited at X's
claim for the X bytes that came out and never for Y; a constant X is credited nothing whatever
Y is; the wrong number of inputs is a usage error."""
import collections
import os
import re

from eblib import Broker, check, main, prog, run


def proxy(b, *args):
    p = run([prog("eb-proxy-knuth"), "-b", b.unix, *args], timeout=60,
            env=dict(os.environ, EB_LOG_TARGET="console"))
    err = p.stderr.decode(errors="replace")
    m = re.search(r"donated (\d+) bytes, (\d+) bits credited of (\d+) claimed", err)
    return p.returncode, err, (tuple(int(x) for x in m.groups()) if m else None)


def test():
    # Capacity above what is donated here, so the broker never says SLEEP.
    b = Broker({"src": {"role": "source", "unix-uid": os.getuid(), "key": False,
                        "max-credit-per-byte": 8}}, capacity=1 << 24).start()
    try:
        n = 256 * 1024
        x, y, zeros = (os.path.join(b.tmp, f) for f in ("x", "y", "zeros"))
        xdata = os.urandom(n)
        with open(x, "wb") as f:
            f.write(xdata)
        with open(y, "wb") as f:
            f.write(os.urandom(n))
        with open(zeros, "wb") as f:
            f.write(bytes(n))

        for alg, inputs in (("m", [x, y]), ("b", [x])):
            raw = os.path.join(b.tmp, f"raw-{alg}")
            rc, err, got = proxy(b, "--algorithm", alg, "--credit-per-byte", "2",
                                 "--max-credit-per-byte", "2", "--dump-raw", raw, *inputs)
            check(rc == 0 and got is not None, f"algorithm {alg}: exits 0 ({err.strip()[-300:]!r})")
            sent, credited, claimed = got
            with open(raw, "rb") as f:
                out = f.read()
            # The table keeps 256 X bytes (and B's register one more) that never come out.
            left = 256 if alg == "m" else 257
            check(len(out) == n - left, f"algorithm {alg}: {len(out)} bytes came out of {n}")
            cx, co = collections.Counter(xdata), collections.Counter(out)
            check(all(co[v] <= cx[v] for v in co) and sum((cx - co).values()) == left,
                  f"algorithm {alg}: the output is X's bytes reordered, nothing made up")
            check(out != xdata[:len(out)], f"algorithm {alg}: and the order did change")
            check(0 < credited <= claimed <= 2 * len(out),
                  f"algorithm {alg}: credit {credited} <= claim {claimed} <= 2 bits x "
                  f"{len(out)} X bytes out")
            # The start-up test withholds the first 1024 samples' credit, and its block.
            check(claimed >= 2 * (len(out) - 8192),
                  f"algorithm {alg}: and all of it after the start-up test ({claimed})")

        # Y's entropy is never credited: a constant X is a constant output.
        rc, err, got = proxy(b, "-a", "m", "--credit-per-byte", "2", "--max-credit-per-byte",
                             "2", zeros, y)
        check(rc == 0 and got is not None and got[1] == 0,
              f"a constant X shuffled by a random Y is credited nothing ({got})")
        check("Health test failed" in err and err.count("Health test failed") == 1,
              "and the health tests say so, once")

        # Without a claim nothing is credited, though the bytes are mixed in.
        rc, err, got = proxy(b, "-a", "b", x)
        check(rc == 0 and got is not None and got[1] == 0 and got[0] > 0,
              f"no --credit-per-byte: mixed in, credited nothing ({got})")

        for args, what in ((["-a", "m", x], "algorithm m with one input"),
                           (["-a", "b", x, y], "algorithm b with two inputs"),
                           (["-a", "q", x], "an unknown algorithm"),
                           ([x, y], "no --algorithm"),
                           (["-a", "m", "--table-size", "257", x, y], "a table of 257"),
                           (["-a", "m", "-", "-"], "X and Y both standard input")):
            rc, err, _ = proxy(b, *args)
            check(rc == 2, f"{what} is a usage error (exit {rc}: {err.strip()!r})")
    finally:
        b.cleanup()


main(test)
