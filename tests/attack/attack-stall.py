#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Stalled TLS handshakes: a peer sends the first byte of a TLS record (0x16) and holds the
connection; another sends a record header announcing 100 bytes and only 3 of them. Neither
may make the broker spin: the legitimate clients are served meanwhile, the broker's CPU stays
low, and each stalled connection is closed once hello-timeout-sec (3 here) has passed."""
import time

from attacklib import (Legit, Window, attacker_connect, check, expect, main, start_broker,
                       wait_closed)

HELLO_TIMEOUT = 3
SLACK = 4  # loaded CI: the timer fires late, the close reaches us later still


def test():
    b = start_broker(new_keys=f"hello-timeout-sec = {HELLO_TIMEOUT}")
    held = []  # closed at the end whatever happens; closing twice is harmless
    try:
        legit = Legit(b)
        legit.round("no attack")
        for attack, payload in (("stall-1-byte", b"\x16"),
                                ("stall-partial-record", b"\x16\x03\x01\x00\x64\x01\x00\x00")):
            w = Window(b, attack).begin()
            s = attacker_connect(b)
            held.append(s)
            t0 = time.monotonic()
            s.sendall(payload)
            # The legitimate clients while the stalled handshake is held (it is, for
            # hello-timeout-sec: the round starts at once).
            legit.round(attack)
            took = wait_closed(s, HELLO_TIMEOUT + SLACK - (time.monotonic() - t0))
            closed_after = None if took is None else time.monotonic() - t0
            w.end()
            expect(closed_after is not None,
                  f"the broker closes the {attack} connection within {HELLO_TIMEOUT} + {SLACK} s"
                  f" ({'still open' if closed_after is None else f'{closed_after:.1f} s'})")
            expect(closed_after is None or closed_after >= HELLO_TIMEOUT - 0.5,
                  f"and not before hello-timeout-sec ({closed_after})")
            s.close()
            w.check_cpu()
            w.check_log(20)
            w.check_rss(8 * 1024)
        check(b.alive(), "the broker is still running")
        legit.summary("stall")
    finally:
        for s in held:
            s.close()
        b.cleanup()


main(test)
