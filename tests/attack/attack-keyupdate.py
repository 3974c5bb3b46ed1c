#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A KeyUpdate flood (issue 21, item 1): a guest holding any user's key (a sink's is enough)
completes the handshake, says HELLO, then sends TLS 1.3 KeyUpdate messages, each in a record of
its own, 600,000 of them. OpenSSL handles post-handshake messages inside SSL_read_ex() for as
long as they arrive, so a broker that bounds its reads in calls, not records, stayed inside one
read for the whole flood while an admin's status timed out. docs/protocol.md 1.1 allows a client
a few post-handshake messages per session: the session must end within them, and the legitimate
clients are served throughout. Our own OpenSSL peer (tls-peer.c) floods: s_client cannot bind
the broker's PSK to SHA-384."""
import os
import subprocess
import sys
import threading
import time

from attacklib import (ATTACKER, SANITIZED, Legit, Window, check, expect, legit_during, main,
                       start_broker)

# Made by the flooder before it sends them: under AddressSanitizer 600,000 take it minutes.
KEYUPDATES = 100000 if SANITIZED else 600000
FLOODERS = 2
POST_HANDSHAKE_MAX = 8  # shared/conn.h's EB_CONN_POST_HANDSHAKE_MAX, as docs/protocol.md says


def test():
    peer = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.environ.get("EB_BUILD_DIR", "build"), "tests", "attack-tls-peer")
    check(os.access(peer, os.X_OK), f"the TLS peer {peer} is built")
    b = start_broker(users={"guest": {"role": "sink"}})
    try:
        legit = Legit(b)
        legit.round("no attack")
        w = Window(b, "keyupdate flood").begin()
        outs = []

        def flood(report):
            p = subprocess.run([peer, "127.0.0.1", str(b.port), "guest", b.keys["guest"],
                                f"keyupdate={KEYUPDATES}", ATTACKER],
                               capture_output=True, timeout=170)
            outs.append((p.returncode, p.stdout.decode(errors="replace"),
                         p.stderr.decode(errors="replace")))

        threads = [threading.Thread(target=flood, args=({},), daemon=True)
                   for _ in range(FLOODERS)]
        for t in threads:
            t.start()
        # The flood is under way once a peer is welcomed; then the legitimate rounds.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "connected as sink" not in b.read_log()[w.log0:]:
            time.sleep(0.02)
        for t in threads:
            legit_during(t, legit, w, "keyupdate flood", every=0.5)
        w.end()
        for rc, out, err in outs:
            print(f"# flooder: {out.strip()!r} {err.strip()[-200:]!r}")
            check(rc == 0 and "welcome" in out, "the flooder was welcomed")
            sent, total = (int(x) for x in out.split("bytes ")[1].split()[0:3:2])
            # docs/protocol.md 1.1: a session ends past 8 post-handshake messages. The socket
            # buffers may have taken the whole flood (a few MB) before the end reached the peer:
            # what tells is that the session is closed, not open, once the flood is sent.
            expect("close: closed" in out,
                   f"the broker ends a session that floods KeyUpdates (the peer wrote {sent} of "
                   f"{total} bytes, {out.strip().splitlines()[-1]})")
        lines = [l for l in b.read_log()[w.log0:].splitlines() if "post-handshake" in l]
        print(f"# the broker on the flood: {lines[:2]}")
        expect(any("KeyUpdate" in l and "guest" in l for l in lines),
               "the broker says why it ended the session, naming the user")
        # The figure itself (docs/protocol.md 1.1): 8 KeyUpdates in a session are allowed, the
        # 9th ends it. A session left open is seen by the peer's read timing out (10 s).
        for n, want in ((POST_HANDSHAKE_MAX, "open"), (POST_HANDSHAKE_MAX + 1, "closed")):
            p = subprocess.run([peer, "127.0.0.1", str(b.port), "guest", b.keys["guest"],
                                f"keyupdate={n}", ATTACKER], capture_output=True, timeout=60)
            out = p.stdout.decode(errors="replace")
            print(f"# {n} KeyUpdates: {out.split('close: ')[-1].strip()!r}")
            expect(p.returncode == 0 and f"close: {want}" in out,
                   f"after {n} KeyUpdates the session is {want} ({out.strip()!r})")
        w.check_cpu()
        w.check_log(20)
        expect(b.alive(), "the broker is still running")
        legit.round("after keyupdate flood")
        legit.summary("keyupdate flood")
    finally:
        b.cleanup()


main(test)
