#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A TLS session that the broker ends after an ERROR ends with a TLS close_notify alert before
the TCP FIN, as docs/protocol.md 1.1 and 3.9 promise: without it a client cannot tell the
broker's deliberate end from a truncation by someone on the path. Checked with our own OpenSSL
peer (tls-peer.c): OpenSSL 3.0's s_client binds a -psk to SHA-256 only, and the broker's PSK is
bound to SHA-384. Twice: a sink-only user's PUT (FORBIDDEN), and a frame of unknown type
(PROTOCOL), each repeated a few times while the legitimate clients are served."""
import os
import subprocess
import sys

from attacklib import ATTACKER, Legit, Window, check, expect, main, start_broker

ROUNDS = 5


def test():
    peer = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.environ.get("EB_BUILD_DIR", "build"), "tests", "attack-tls-peer")
    check(os.access(peer, os.X_OK), f"the TLS peer {peer} is built")
    b = start_broker(users={"sinkonly": {"role": "sink"}})
    try:
        legit = Legit(b)
        legit.round("no attack")
        w = Window(b, "close-notify").begin()
        for mode, code in (("put", 4), ("garbage", 1)):
            ends = []
            for _ in range(ROUNDS):
                p = subprocess.run([peer, "127.0.0.1", str(b.port), "sinkonly",
                                    b.keys["sinkonly"], mode, ATTACKER],
                                   capture_output=True, timeout=30)
                out = p.stdout.decode(errors="replace")
                check(p.returncode == 0 and f"error {code}\n" in out,
                      f"the {mode} session is welcomed, then answered ERROR {code} ({out!r}, "
                      f"{p.stderr.decode(errors='replace').strip()!r})")
                ends.append(out.strip().splitlines()[-1])
            print(f"# after ERROR {code} ({mode}): {ends}")
            expect(all(e == "close: close_notify" for e in ends),
                   f"each session ended by ERROR {code} ends with close_notify before the FIN "
                   f"({sum(e == 'close: close_notify' for e in ends)} of {ROUNDS})")
            legit.round(f"close-notify {mode}")
        w.end()
        w.check_cpu()
        w.check_log(4 * ROUNDS + 20)
        expect(b.alive(), "the broker is still running")
        legit.summary("close-notify")
    finally:
        b.cleanup()


main(test)
