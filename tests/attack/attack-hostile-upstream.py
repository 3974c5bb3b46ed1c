#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A hostile upstream broker (issue 21, items 8, 9 and 12): the broker that an [upstream]
section draws from is the attacker. Answering every GET with DATA of 0 bytes must not make the
downstream ask again at once (it burnt 58 % of a core); a flood of WAKE frames must not keep a
stopping downstream alive (it ran 15 s after SIGTERM), nor may one WAKE every 100 ms, each
within any timeout; DATA longer than asked is refused, not
credited; 64 KiB of zero bytes claimed at 8 bits a byte fail the health tests and earn nothing;
an upstream that ends every session with an ERROR is retried on a back-off, not in a loop; a
period-256 sequence (x -> 5x + 1 mod 256, which passes the RCT, the APT and the difference tests)
earns nothing either (issue 31, item 6); and an upstream whose bytes fail the health tests is
asked again only after a hold of 1 s, as one that sends nothing is: zeros were asked for
15,500-25,100 times in 5 s, 57 % of a core (item 5)."""
import os
import signal
import tempfile
import time

from attacklib import (HostileBroker, Window, check, downstream, expect, main, wait_for)

CPU_BOUND = 0.20  # the downstream does nothing but wait on its upstream
STOP_BOUND_S = 2.0  # "within a second", with a loaded machine's slack


def attack(mode, body):
    tmp = tempfile.mkdtemp(prefix="eb-attack-up-")
    os.chmod(tmp, 0o755)
    fake = HostileBroker(os.path.join(tmp, "hostile.sock"), mode)
    b = None
    try:
        b = downstream(tmp, fake.uri)
        body(fake, b)
    finally:
        if b:
            b.stop()
            b.cleanup()
        fake.close()


def zero_data(fake, b):
    wait_for("the downstream asks its upstream for data", lambda: fake.count("gets") > 0, 20)
    w = Window(b, "DATA of 0 bytes").begin()
    g0 = fake.count("gets")
    w.end()
    gets = fake.count("gets") - g0
    secs = w.t1 - w.t0
    print(f"# GETs to an upstream answering DATA of 0 bytes: {gets} in {secs:.1f} s")
    w.check_cpu(CPU_BOUND)
    expect(gets <= 2 * secs + 2, f"the downstream waits between GETs answered with nothing "
           f"({gets} GETs in {secs:.1f} s)")
    w.check_log(5)


def stop_under_wakes(fake, b):
    wait_for("the upstream sends WAKE", lambda: fake.count("wakes") > 0, 20)
    time.sleep(0.3)
    t0 = time.monotonic()
    b.proc.send_signal(signal.SIGTERM)
    try:
        b.proc.wait(30)
    except Exception:
        pass
    took = time.monotonic() - t0
    print(f"# downstream exit after SIGTERM under {fake.mode}: {took:.2f} s")
    expect(b.proc.poll() is not None and took < STOP_BOUND_S,
           f"the downstream stops within {STOP_BOUND_S} s of SIGTERM under {fake.mode} "
           f"({took:.2f} s)")


def long_data(fake, b):
    wait_for("the downstream asks its upstream for data", lambda: fake.count("gets") > 1, 20)
    st = b.status()
    print(f"# downstream after DATA 8x longer than asked: bits_in {st['bits_in']}")
    expect(st["bits_in"] == 0, f"DATA longer than asked is not credited ({st['bits_in']} bits)")
    expect(b.wait_log("for a GET of", 10),
           "the downstream says the upstream sent more than it asked for")


HOLD_S = 1.0  # the wait after a DATA the health tests refused (eb-brokerd.conf(5), [upstream])


def failing_rate(fake, b, what):
    """GETs answered with bytes that fail the health tests: at most 2 per hold (the thread may
    send one more GET before it hears of the hold), and the downstream idle meanwhile."""
    w = Window(b, what).begin()
    g0 = fake.count("gets")
    w.end()
    gets = fake.count("gets") - g0
    secs = w.t1 - w.t0
    print(f"# GETs to an upstream answering {what}: {gets} in {secs:.1f} s")
    expect(gets <= 2 * (secs / HOLD_S + 1), f"the downstream holds {HOLD_S} s between GETs "
           f"answered with {what} ({gets} GETs in {secs:.1f} s)")
    w.check_cpu(CPU_BOUND)


def zeros(fake, b):
    wait_for("the upstream has sent 2 DATA of zeros", lambda: fake.count("gets") > 1, 30)
    failing_rate(fake, b, "zeros")
    st = b.status()
    print(f"# downstream after {fake.count('gets')} DATA of zeros claimed at 8 bits a byte: "
          f"bits_in {st['bits_in']}")
    expect(st["bits_in"] == 0, f"zeros earn no credit ({st['bits_in']} bits)")
    lines = [l for l in b.read_log().splitlines() if "failed the" in l]
    expect(len(lines) == 1, f"one line says the upstream failed a health test ({lines})")


def periodic(fake, b):
    wait_for("the upstream has sent 2 DATA of x -> 5x + 1", lambda: fake.count("gets") > 1, 30)
    t = time.monotonic()
    st = b.status()
    ms = (time.monotonic() - t) * 1000
    print(f"# downstream after {fake.count('gets')} DATA of a period-256 sequence claimed at 8 "
          f"bits a byte: bits_in {st['bits_in']}; its admin status answered in {ms:.0f} ms")
    expect(st["bits_in"] == 0, f"a period-256 sequence earns no credit ({st['bits_in']} bits)")
    expect(ms < 1000, f"the downstream's admin status is answered within 1 s ({ms:.0f} ms)")
    expect(b.wait_log("failed the periodic health test", 10),
           "the downstream says the upstream failed the periodic test")
    failing_rate(fake, b, "a period-256 sequence")


def error_storm(fake, b):
    wait_for("the downstream connects to its upstream", lambda: fake.count("connections") > 0, 20)
    w = Window(b, "an ERROR storm").begin()
    c0 = fake.count("connections")
    w.end(8.0)
    n = fake.count("connections") - c0
    print(f"# connections to an upstream that ends every session with ERROR: {n} in "
          f"{w.t1 - w.t0:.1f} s")
    expect(n <= 6, f"the downstream backs off from an upstream that ends every session ({n})")
    w.check_cpu(CPU_BOUND)
    w.check_log(5)


def test():
    attack("zero-data", zero_data)
    attack("wake-flood", stop_under_wakes)
    attack("wake-trickle", stop_under_wakes)
    attack("long-data", long_data)
    attack("zeros", zeros)
    attack("periodic", periodic)
    attack("error-storm", error_storm)
    check(True, "done")


main(test)
