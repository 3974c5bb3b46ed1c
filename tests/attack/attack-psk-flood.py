#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A flood of TLS 1.3 ClientHellos each offering thousands of PSK identities, one connection
each: the broker's memory must not grow with the identities offered (each one used to leave a
record behind), and the legitimate clients are served meanwhile.

Before the flood (whose refusals fill the broker's rate-limited log), one identity of 65 bytes
whose first 64 are a configured 64-character user's name: it must be refused as an unknown (too
long) identity, not cut to 64 bytes and taken for that user (which makes the broker look up the
user's key and log "wrong key")."""
import os
import socket
import time

from attacklib import (ATTACKER, Legit, Window, attacker_connect, check, client_hello, expect,
                       handshake_records, legit_during, main, run_attacker, start_broker)

HELLOS = 500
IDENTITIES = 9000  # one byte each: 7 bytes on the wire with the obfuscated age
# The extensions of a ClientHello are one u16-length block, so pre_shared_key gets at most
# 64 KiB: 9000 identities (63000 bytes) leave room for 40 binders of 48 bytes (SHA-384), not
# one per identity. A server reads the identities first and never reaches the binders when
# none names a user; the records (16 KiB each) carry a ClientHello of about 65 KiB.
BINDERS = 40
MAX_SECONDS = 60
PACE_PER_S = 50  # a flood a fixed broker handles well within its CPU bound
LONG_USER = "a" * 64


def flood(report, b):
    ids = [bytes([0x41 + i % 26]) for i in range(IDENTITIES)]
    binders = [os.urandom(48) for _ in range(BINDERS)]
    msg = client_hello(ids, binders)
    report["hello_bytes"] = len(msg)
    wire = handshake_records(msg)
    t0 = time.monotonic()
    sent = failed = 0
    while sent < HELLOS and time.monotonic() - t0 < MAX_SECONDS:
        # Paced: HELLOS / PACE_PER_S seconds in all, however fast the broker is.
        ahead = sent / PACE_PER_S - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)
        try:
            with attacker_connect(b, timeout=5) as s:
                s.sendall(wire)
                s.shutdown(socket.SHUT_WR)
                while s.recv(4096):  # the broker's alert, then its close
                    pass
        except OSError:
            failed += 1
        sent += 1
    report["sent"] = sent
    report["errors"] = failed
    report["seconds"] = time.monotonic() - t0


def test():
    b = start_broker(users={LONG_USER: {"role": "sink"}})
    try:
        legit = Legit(b)
        legit.round("no attack")
        # First, while the broker's log is not rate-limited by the flood that follows (its
        # refusals of unauthenticated peers are held to 20 lines per 10 s).
        # 64 bytes of a user's name and one more.
        before = len(b.read_log())
        s = attacker_connect(b)
        port = s.getsockname()[1]
        s.sendall(handshake_records(client_hello([LONG_USER.encode() + b"a"],
                                                 [os.urandom(48)])))
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass
        s.close()
        peer = f"{ATTACKER}:{port}"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and peer not in b.read_log()[before:]:
            time.sleep(0.05)
        lines = [l for l in b.read_log()[before:].splitlines() if peer in l]
        print(f"# the broker on the 65-byte identity: {lines}")
        expect(any("Refusing" in l for l in lines), "the 65-byte identity is refused")
        expect(not any(f'wrong key for user "{LONG_USER}"' in l for l in lines),
               "it is not cut to the 64-character user's name (no 'wrong key for user')")
        expect(any("unknown" in l or "too long" in l for l in lines),
               "the refusal says the identity is unknown or too long")
        w = Window(b, "psk-flood").begin()
        t, report = run_attacker(flood, b)
        legit_during(t, legit, w, "psk-flood")
        w.end()
        check("exception" not in report, f"the attacker ran ({report})")
        print(f"# {report['sent']} ClientHellos of {report['hello_bytes']} bytes with "
              f"{IDENTITIES} identities each in {report['seconds']:.1f} s "
              f"({report['errors']} connection errors)")
        w.check_rss(32 * 1024)
        w.check_cpu()
        w.check_log(100)
        expect(b.alive(), "the broker is still running")
        legit.round("after psk-flood")

        legit.summary("psk-flood")
    finally:
        b.cleanup()


main(test)
