#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""TLS stacks no one here wrote reach the broker as docs/protocol.md 1.1 tells them to: Debian's
gnutls-cli (GnuTLS 3.7, whose external PSKs are bound to SHA-256 alone) and openssl s_client
(-psk, SHA-256 too), each listing TLS_AES_256_GCM_SHA384 first, with a user whose key-hash is
sha256. Each does the handshake, then HELLO as a sink and a GET, written through the tool's
stdin, and must read WELCOME and a DATA of the bytes asked for from its stdout. A user whose key
is bound to SHA-384 offered with SHA-256, a wrong key and an unknown name are all refused with
the same alert (47) in both tools' words."""
import os
import struct
import subprocess
import time

from eblib import (MSG, ROLE_SINK, Broker, Failure, check, donate, main, need, prog, run,
                   wait_for, write_key)

GET_BITS = 256


def frame(mtype, payload):
    return struct.pack(">BBHI", mtype, 0, 0, len(payload)) + payload


HELLO = frame(MSG["HELLO"], struct.pack(">HBBIH", 1, ROLE_SINK, 0, 0, 3) + b"gnu")
GET = frame(MSG["GET"], struct.pack(">IB3x", GET_BITS, 0))


def read_frame(out, what):
    """The next frame the tool prints on its stdout, as (type, payload)."""
    hdr = out.read(8)
    if len(hdr) < 8:
        raise Failure(f"{what}: the stream ended before a frame")
    t, _, _, n = struct.unpack(">BBHI", hdr)
    payload = out.read(n)
    if len(payload) < n:
        raise Failure(f"{what}: the stream ended inside a frame")
    return t, payload


def session(cmd, what):
    """Runs cmd, a TLS client copying stdin to the broker and the broker to stdout; says HELLO,
    reads WELCOME, sends GET, reads DATA, then ends its input, which ends the session."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        p.stdin.write(HELLO)
        p.stdin.flush()
        t, payload = read_frame(p.stdout, what)
        check(t == MSG["WELCOME"] and payload[2] == ROLE_SINK,
              f"{what}: WELCOME as a sink (type {t})")
        p.stdin.write(GET)
        p.stdin.flush()
        t, payload = read_frame(p.stdout, what)
        check(t == MSG["DATA"], f"{what}: DATA for the GET (type {t})")
        bits, n = struct.unpack(">II", payload[:8])
        check(bits == GET_BITS and n == GET_BITS // 8 and len(payload) == 8 + n,
              f"{what}: DATA of {n} bytes carrying {bits} bits")
        p.stdin.close()
        p.wait(20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()


def refused(cmd):
    """The output of a client the broker refuses during the handshake."""
    p = run(cmd, input=b"", timeout=20)
    return p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


def hexkey(path):
    with open(path) as f:
        return f.read().strip()


def test():
    need("gnutls-cli")
    need("openssl")
    b = Broker({"gnu": {"role": "sink", "key-hash": "sha256"},
                "ossl": {"role": "sink"},
                "donor": {"role": "source", "max-credit-per-byte": 8}})
    try:
        b.start()
        data = os.path.join(b.tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(8192))
        donate(b, "donor", data, credit=8)
        gnu_key = hexkey(b.keys["gnu"])
        # GnuTLS 3.7 as protocol.md says: TLS 1.3 alone, and ECDHE/DHE-PSK only (psk_dhe_ke).
        prio = "NORMAL:-VERS-ALL:+VERS-TLS1.3:-KX-ALL:+ECDHE-PSK:+DHE-PSK"

        def gnutls(user, key, quiet=True):
            # Its informational lines go to stdout unless sent elsewhere; the alert is one.
            log = ["--logfile", os.devnull] if quiet else []
            return ["gnutls-cli", "--port", str(b.port), "--pskusername", user, "--pskkey", key,
                    "--priority", prio, *log, b.host]

        def s_client(user, key):
            return ["openssl", "s_client", "-connect", f"{b.host}:{b.port}", "-tls1_3", "-quiet",
                    "-no_ign_eof", "-nocommands", "-psk_identity", user, "-psk", key]

        session(gnutls("gnu", gnu_key), "gnutls-cli")
        session(s_client("gnu", gnu_key), "openssl s_client")

        other = os.path.join(b.tmp, "other.key")
        write_key(other)
        wrong = hexkey(other)
        cases = [("a key bound to SHA-384 offered with SHA-256", "ossl", hexkey(b.keys["ossl"])),
                 ("a wrong key", "gnu", wrong), ("an unknown name", "nobody", gnu_key)]
        for what, user, key in cases:
            out = refused(gnutls(user, key, quiet=False))
            check("Received alert [47]" in out, f"gnutls-cli, {what}: alert 47")
            out = refused(s_client(user, key))
            check("SSL alert number 47" in out, f"openssl s_client, {what}: alert 47")
        log = wait_for("the broker's refusals", lambda: (lambda l: l if l.count("Refusing") >= 6
                                                         else None)(b.read_log()))
        check('wrong key for user "gnu"' in log and 'unknown user "nobody"' in log
              and "key offered with the other hash" in log,
              "the broker's log says what it knows of each refusal")
    finally:
        b.cleanup()


main(test)
