#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Broker chaining on one machine. A downstream broker with an [upstream] section draws from an
upstream broker, over TLS as a sink user there, whenever its level is below the upstream low
water; a sink on the downstream drains it and it refills from the upstream. Every bit the
downstream credits is one the upstream handed out as full entropy: the downstream's bits in
equal the upstream's bits out, exactly, less the first 1024 bytes, which its health tests take
as their start-up test. Then two brokers configured to draw from each other
(A -> B -> A): the cycle is refused, with one clear line, and no bit goes round. And a broker
drawing as a user not configured as a downstream broker is refused and gets nothing."""
import json
import os
import signal
import time

from eblib import Broker, check, draw, main, prog, run, wait_for

CAP_DOWN = 131072  # bits; the upstream low water (50 %) is 65536
DRAW_BITS = 16384


# The downstream health-tests the upstream's bytes as a source's samples (SP 800-90B start-up
# test: the first 1024 are tested, not credited).
STARTUP_BITS = 8 * 1024


def settled_totals(up, down):
    """(upstream bits out, downstream bits in) once they agree and stay so for a moment: a
    DATA may be on its way between the two when asked."""
    last = None
    deadline = time.time() + 30
    while time.time() < deadline:
        a, b = up.status()["bits_out"], down.status()["bits_in"]
        check(b <= a, f"the downstream never credits more than the upstream handed out ({b} <= {a})")
        if a - b == STARTUP_BITS and last == (a, b):
            return a, b
        last = (a, b)
        time.sleep(0.3)
    check(False, f"the totals settle (last: upstream out {last[0]}, downstream in {last[1]})")


def chain():
    up = Broker({"src": {"role": "source", "unix-uid": os.getuid(), "key": False},
                 "edge": {"role": "sink", "downstream-broker": "yes"}, "admin": {"role": "admin"}},
                capacity=1 << 21)
    down = None
    try:
        up.start()
        data = os.path.join(up.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(128 * 1024))
        p = run([prog("eb-source-file"), "-b", up.unix, "--credit-per-byte=8",
                 "--max-credit-per-byte=8", data])
        check(p.returncode == 0, f"the upstream is fed ({p.stderr.decode().strip()[-200:]})")
        filled = up.status()
        check(filled["bits_in"] > 0 and filled["bits_out"] == 0,
              f"the upstream holds {filled['pool_bits']} bits and has handed out none")

        down = Broker({"sink": {"role": "sink"}, "admin": {"role": "admin"}},
                      capacity=CAP_DOWN, activate=False,
                      broker_extra=f"""
[upstream]
broker = {up.tcp}
user = edge
key-file = {up.keys['edge']}
low-water-percent = 50
draw-bits = {DRAW_BITS}
""")
        down.start()
        check(down.wait_log(f"Drawing from upstream {up.tcp} as user edge", 20),
              "the downstream says it draws from the upstream:\n" + down.read_log() +
              "\nupstream:\n" + up.read_log())
        wait_for("the downstream fills to its upstream low water from the upstream",
                 lambda: down.status()["pool_bits"] >= CAP_DOWN // 2)
        out0, in0 = settled_totals(up, down)
        check(in0 >= CAP_DOWN // 2, f"the downstream credited {in0} bits, all from upstream")

        # A sink drains the downstream below its upstream low water; it refills from upstream.
        n = 6144  # bytes: 49152 bits, more than the level above low water
        p = draw(down, "sink", n)
        check(p.returncode == 0 and len(p.stdout) == n,
              f"a sink on the downstream drew {n} bytes ({p.stderr.decode().strip()[-200:]})")
        wait_for("the downstream refills from the upstream",
                 lambda: up.status()["bits_out"] > out0 and
                 down.status()["pool_bits"] >= CAP_DOWN // 2)
        out1, in1 = settled_totals(up, down)
        ds = down.status()
        print(f"# upstream: bits_in {up.status()['bits_in']}, bits_out {out1}; downstream: "
              f"bits_in {in1}, bits_out {ds['bits_out']}, pool {ds['pool_bits']}")
        check(in1 == out1 - STARTUP_BITS,
              f"downstream credited {in1} bits = upstream handed out {out1} less the start-up "
              f"test's {STARTUP_BITS}")
        check(ds["bits_out"] == 8 * n, f"the downstream's sink got {8 * n} bits")
        check(ds["bits_out"] <= in1, "the downstream handed out no more than it credited")
        # The history names the draw as a source, as the sessions table does: every bit the
        # downstream credited came through it.
        def upstream_row():
            p = run([prog("eb-brokerctl"), "-b", down.tcp, "-u", "admin", "-k",
                     down.keys["admin"], "history", "--json"], check=True)
            rows = [r for r in json.loads(p.stdout)["sources"]
                    if r["user"] == "edge" and r["kind"] == "upstream"]
            return rows and rows[0]["day_bits"] == down.status()["bits_in"] and rows[0]
        wait_for("the upstream's draw in the history's sources", upstream_row)

        # A reload keeps the upstream client made at start, and says so.
        with open(down.conf) as f:
            conf = f.read()
        with open(down.conf, "w") as f:
            f.write(conf.replace("user = edge", "user = other"))
        down.proc.send_signal(signal.SIGHUP)
        check(down.wait_log("[upstream] broker= or user= changed; they take effect at the next "
                            "restart", 20), "a reload keeps [upstream]'s user")
        check(down.alive(), "the downstream carries on after the reload")

        # A stop joins the upstream thread, connected or not, and exits cleanly.
        t0 = time.monotonic()
        rc = down.stop()
        check(rc == 0, f"the downstream stops on SIGTERM with 0 (got {rc}) in "
              f"{time.monotonic() - t0:.1f} s")
    finally:
        if down:
            down.cleanup()
        up.cleanup()


CYCLE_LINE = "would make this broker draw from itself through a cycle"


def cycle():
    # Not socket-activated: a broker that draws must run before anyone connects to it.
    a = Broker({"peer": {"role": "sink", "downstream-broker": "yes"}, "admin": {"role": "admin"}},
               capacity=65536, activate=False)
    b = Broker({"peer": {"role": "sink", "downstream-broker": "yes"}, "admin": {"role": "admin"}},
               capacity=65536,
               keys={"peer": a.keys["peer"]}, activate=False)
    # Each draws from the other as user peer, known to both by one key. Debug lines show the
    # retries that must not repeat the warning.
    for me, other in ((a, b), (b, a)):
        with open(me.conf, "a") as f:
            f.write(f"[upstream]\nbroker = {other.tcp}\nuser = peer\n"
                    f"key-file = {a.keys['peer']}\n")
        me.log_target = "console"
    os.environ["EB_LOG_LEVEL"] = "debug"
    try:
        a.start()
        # A's first try finds nothing listening; B then draws from A, and A's next try, with
        # B's id among those A serves, is one B refuses.
        check(a.wait_log("Upstream: cannot connect", 20), "A cannot reach B before B starts")
        b.start()
        wait_for("the cycle is refused with its line",
                 lambda: CYCLE_LINE in a.read_log() + b.read_log())
        wait_for("the refused side tried again",
                 lambda: "again: chain" in a.read_log() + b.read_log(), timeout=40)
        # Normally one broker refuses: the one whose link would close the cycle. Should both
        # links complete HELLO at the same instant, each broker refuses the other's second
        # HELLO, once: never more than one line per broker, however often the other retries.
        per = [[l for l in x.read_log().splitlines() if CYCLE_LINE in l] for x in (a, b)]
        lines = per[0] + per[1]
        print("# " + "\n# ".join(lines))
        check(len(lines) >= 1 and all(len(p) <= 1 for p in per),
              f"one line says it, in the broker that refused ({[len(p) for p in per]})")
        # The refused side says once, in its own log, what it was told.
        told = [[l for l in x.read_log().splitlines()
                 if "Upstream:" in l and "cycle" in l and "again" not in l] for x in (a, b)]
        print("# " + "\n# ".join(told[0] + told[1]))
        check(all(len(t) == len(p) for t, p in zip(told[::-1], per)),
              f"the refused broker logs the refusal once ({[len(t) for t in told]})")
        check("contains this broker" in lines[0], "the line names the broker in the chain")
        sa, sb = a.status(), b.status()
        check(sa["bits_in"] == 0 and sb["bits_in"] == 0 and sa["bits_out"] == 0 and
              sb["bits_out"] == 0, "nothing went round the cycle")
        check(a.alive() and b.alive(), "both brokers keep running")
        check(a.stop() == 0 and b.stop() == 0, "both stop on SIGTERM with 0")
    finally:
        del os.environ["EB_LOG_LEVEL"]
        a.cleanup()
        b.cleanup()


def not_a_broker():
    """A broker drawing as a user that is not configured downstream-broker = yes: the upstream
    refuses its HELLO, which carries broker ids, and hands it nothing (docs/security.md: ids are
    taken only from a downstream broker's user)."""
    up = Broker({"src": {"role": "source", "unix-uid": os.getuid(), "key": False},
                 "plain": {"role": "sink"}, "admin": {"role": "admin"}}, capacity=1 << 20)
    down = None
    try:
        up.start()
        data = os.path.join(up.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(32 * 1024))
        p = run([prog("eb-source-file"), "-b", up.unix, "--credit-per-byte=8",
                 "--max-credit-per-byte=8", data])
        check(p.returncode == 0, f"the upstream is fed ({p.stderr.decode().strip()[-200:]})")
        down = Broker({"sink": {"role": "sink"}, "admin": {"role": "admin"}},
                      capacity=CAP_DOWN, activate=False,
                      broker_extra=f"""
[upstream]
broker = {up.tcp}
user = plain
key-file = {up.keys['plain']}
low-water-percent = 50
draw-bits = {DRAW_BITS}
""")
        down.start()
        check(up.wait_log("user plain sent the broker ids of a chained broker but is not one", 20),
              "the upstream refuses a broker drawing as a plain sink user, saying why:\n" +
              up.read_log()[-1500:])
        check(down.wait_log("not a broker", 20),
              "the downstream is told why:\n" + down.read_log()[-1500:])
        su, sd = up.status(), down.status()
        check(su["bits_out"] == 0 and sd["bits_in"] == 0,
              f"nothing was handed out (upstream out {su['bits_out']}, downstream in "
              f"{sd['bits_in']})")
    finally:
        if down:
            down.cleanup()
        up.cleanup()


def test():
    chain()
    not_a_broker()
    cycle()


main(test)
