#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Each row of docs/protocol.md 1.1's table of refusals before a session, driven by a real client
(openssl s_client, gnutls-cli) through a relay of the test's own that keeps every byte the broker
sends: the TLS alert record sent in the clear (content type 21) is read byte by byte, so the test
asserts the alert's description itself, not a tool's words for it; a refusal that sends nothing
is a connection on which the broker sent no byte at all (or, for the HELLO timeout, nothing after
its handshake flight). Rows: 70 for a TLS 1.2 ClientHello, 40 for a ClientHello with neither
suite, with no PSK, and with psk_ke alone; 47 for a wrong key; nothing at max-sessions, and
nothing after the handshake when no HELLO comes within hello-timeout-sec."""
import os
import socket
import subprocess
import threading
import time

from eblib import Broker, Failure, check, main, need

ALERT = 21
HANDSHAKE = 22
APPLICATION_DATA = 23


class Relay:
    """One connection at a time from a client to the broker; keeps the broker's bytes and says
    whether the broker closed its side."""

    def __init__(self, port):
        self.port = port
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(1)
        self.addr = self.ls.getsockname()
        self.server_bytes = b""
        self.closed_by_broker = threading.Event()
        self.thread = None

    def start(self):
        self.server_bytes = b""
        self.closed_by_broker.clear()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        c, _ = self.ls.accept()
        s = socket.create_connection(("127.0.0.1", self.port), timeout=30)

        def up():
            try:
                while True:
                    d = c.recv(65536)
                    if not d:
                        break
                    s.sendall(d)
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        t = threading.Thread(target=up, daemon=True)
        t.start()
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                self.server_bytes += d
                c.sendall(d)
        except OSError:
            pass
        self.closed_by_broker.set()
        try:
            c.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        t.join(30)
        c.close()
        s.close()

    def join(self):
        self.thread.join(60)
        check(not self.thread.is_alive(), "the relayed connection ended")

    def close(self):
        self.ls.close()


def records(data):
    """The TLS records in data, as (content type, body)."""
    out = []
    while len(data) >= 5:
        n = int.from_bytes(data[3:5], "big")
        if len(data) < 5 + n:
            raise Failure(f"a record cut short: {data[:5].hex()}")
        out.append((data[0], data[5:5 + n]))
        data = data[5 + n:]
    if data:
        raise Failure(f"bytes left over after the records: {data.hex()}")
    return out


def alert_of(data, what):
    """The description of the one alert the broker sent in the clear, which must be its last
    record."""
    recs = records(data)
    alerts = [body for ctype, body in recs if ctype == ALERT]
    check(len(alerts) == 1 and recs[-1][0] == ALERT,
          f"{what}: the broker ends with one alert record in the clear "
          f"(records: {[(t, len(b)) for t, b in recs]})")
    body = alerts[0]
    check(len(body) == 2 and body[0] == 2, f"{what}: a fatal alert ({body.hex()})")
    return body[1]


def drive(relay, cmd, what, stdin=b""):
    relay.start()
    p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    relay.join()
    return p


def test():
    need("openssl")
    need("gnutls-cli")
    b = Broker({"ossl": {"role": "sink", "key-hash": "sha256"}},
               broker_extra="hello-timeout-sec = 2\n")
    relay = None
    try:
        b.start()
        relay = Relay(b.port)
        with open(b.keys["ossl"]) as f:
            key = f.read().strip()
        target = f"127.0.0.1:{relay.addr[1]}"

        def s_client(*extra):
            return ["openssl", "s_client", "-connect", target, "-quiet", "-no_ign_eof",
                    "-nocommands", *extra]

        rows = [
            ("a TLS 1.2 ClientHello", s_client("-tls1_2", "-psk_identity", "ossl", "-psk", key),
             70),
            ("a ClientHello with neither suite",
             s_client("-tls1_3", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256",
                      "-psk_identity", "ossl", "-psk", key), 40),
            ("a ClientHello with no PSK (a certificate handshake)", s_client("-tls1_3"), 40),
            ("a ClientHello whose only key exchange mode is psk_ke",
             ["gnutls-cli", "--port", str(relay.addr[1]), "--pskusername", "ossl", "--pskkey",
              key, "--priority", "NORMAL:-VERS-ALL:+VERS-TLS1.3:-KX-ALL:+PSK", "127.0.0.1"], 40),
            ("a wrong key", s_client("-tls1_3", "-psk_identity", "ossl", "-psk", "00" * 32), 47),
        ]
        for what, cmd, want in rows:
            drive(relay, cmd, what)
            got = alert_of(relay.server_bytes, what)
            check(got == want, f"{what}: alert {want} (got {got})")

        # No HELLO within hello-timeout-sec: the handshake completes, then the broker closes
        # without a word. Its handshake flight is a ServerHello, a ChangeCipherSpec and two
        # encrypted records (OpenSSL writes EncryptedExtensions and Finished one a record); a
        # close_notify or an ERROR would be one more encrypted record after them.
        relay.start()
        p = subprocess.Popen(s_client("-tls1_3", "-psk_identity", "ossl", "-psk", key),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            t0 = time.monotonic()
            check(relay.closed_by_broker.wait(6),
                  "no HELLO: the broker closes the connection within 3x hello-timeout-sec (2 s)")
            waited = time.monotonic() - t0
        finally:
            p.kill()
            p.communicate()
        relay.join()
        recs = records(relay.server_bytes)
        kinds = [t for t, _ in recs]
        check(kinds[:1] == [HANDSHAKE] and ALERT not in kinds,
              f"no HELLO: a handshake, and no alert in the clear ({kinds})")
        check(kinds.count(APPLICATION_DATA) == 2,
              f"no HELLO: nothing after the handshake flight, neither close_notify nor ERROR "
              f"(records: {[(t, len(body)) for t, body in recs]})")
        check(waited >= 1.5, f"no HELLO: closed at hello-timeout-sec, not before ({waited:.1f} s)")
        check(b.wait_log("no HELLO within 2 s", timeout=10), "the broker logs why it closed")
    finally:
        if relay:
            relay.close()
        b.cleanup()

    # At max-sessions: the connection is closed before the ClientHello is answered, no byte sent.
    b = Broker({"ossl": {"role": "sink", "key-hash": "sha256"}},
               broker_extra="max-sessions = 1\nhello-timeout-sec = 60\n")
    relay = None
    idle = None
    try:
        b.start()
        with open(b.keys["ossl"]) as f:
            key = f.read().strip()
        idle = socket.create_connection(("127.0.0.1", b.port), timeout=5)
        # The broker accepts in the order the kernel queued the connections: this one first.
        relay = Relay(b.port)
        drive(relay, ["openssl", "s_client", "-connect", f"127.0.0.1:{relay.addr[1]}", "-quiet",
                      "-no_ign_eof", "-nocommands", "-tls1_3", "-psk_identity", "ossl", "-psk",
                      key], "at max-sessions")
        check(relay.server_bytes == b"",
              f"at max-sessions: no byte, no alert ({relay.server_bytes[:16].hex()})")
        check(b.wait_log("max-sessions reached"), "the broker says which limit it reached")
    finally:
        if idle:
            idle.close()
        if relay:
            relay.close()
        b.cleanup()


if __name__ == "__main__":
    main(test)
