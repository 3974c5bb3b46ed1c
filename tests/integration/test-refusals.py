#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every kind of bad peer is refused with one clear log line, and the broker keeps serving
everyone else: wrong key, unknown user, an unmapped unix peer, a sink that PUTs, a source
that GETs, a role not granted, plaintext on the TLS port, malformed and oversized frames."""
import os
import socket
import struct

from eblib import MSG, ROLE_SINK, ROLE_SOURCE, Broker, Raw, check, donate, draw, main, write_key


def refused_once(b, before, needle, what):
    new = b.read_log()[len(before):]
    lines = [l for l in new.splitlines() if needle in l]
    check(len(lines) == 1, f"{what}: one log line containing '{needle}' (got {len(lines)}: {lines})")


def still_serving(b, what):
    p = draw(b, "bob", 512)
    check(p.returncode == 0 and len(p.stdout) == 512, f"after {what}, the broker still serves a sink")


def test():
    b = Broker({
        "alice": {"role": "source"},
        "bob": {"role": "sink"},
        "admin": {"role": "admin"},
        "rawsink": {"role": "sink", "unix-uid": 1000, "key": False},
        "rawsource": {"role": "source", "unix-uid": 1001, "key": False},
    }).start()
    try:
        data = os.path.join(b.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(128 * 1024))
        check(donate(b, "alice", data).returncode == 0, "alice donates")

        # Wrong key: alice's name with another key.
        bad = os.path.join(b.tmp, "bad.key")
        write_key(bad)
        before = b.read_log()
        b.keys["alice-badkey"] = bad
        p = donate(b, "alice", data, uri=None, extra=("-k", bad))
        check(p.returncode != 0, "a source with the wrong key is refused")
        check(b.wait_log('wrong key for user "alice"'), "the broker names the wrong key")
        refused_once(b, before, "Refusing", "wrong key")
        still_serving(b, "a wrong key")

        # Unknown user.
        before = b.read_log()
        from eblib import prog, run
        p = run([prog("eb-source-file"), "-b", b.tcp, "-u", "mallory", "-k", bad,
                 "--credit-per-byte=8", data])
        check(p.returncode != 0, "an unknown user is refused")
        check(b.wait_log('unknown user "mallory"'), "the broker names the unknown user")
        refused_once(b, before, "Refusing", "unknown user")
        check("mallory" in p.stderr.decode(), "the client's error names the user")
        still_serving(b, "an unknown user")

        # A role the user does not have, asked for at HELLO: bob is a sink.
        before = b.read_log()
        p = donate(b, "bob", data)
        check(p.returncode != 0, "a sink user connecting as a source is refused")
        refused_once(b, before, "Refusing", "role not granted")
        check("user bob asked for roles source but has only sink" in b.read_log(),
              "the log line names the user and both role sets")

        # A sink that PUTs after a proper HELLO.
        before = b.read_log()
        r = Raw(b.sock, uid=1000)
        t, _ = r.hello(ROLE_SINK)
        check(t == MSG["WELCOME"], "a raw sink over unix is welcomed (uid 1000 -> rawsink)")
        r.send(MSG["PUT"], struct.pack(">II", 64, 8) + os.urandom(8))
        t, payload = r.recv()
        check(t == MSG["ERROR"] and struct.unpack(">H", payload[:2])[0] == 4,
              "a sink's PUT is answered ERROR forbidden")
        check(r.closed(), "and the connection is closed")
        refused_once(b, before, "Refusing PUT", "sink PUT")
        still_serving(b, "a sink's PUT")

        # A source that GETs.
        before = b.read_log()
        r = Raw(b.sock, uid=1001)
        t, _ = r.hello(ROLE_SOURCE)
        check(t == MSG["WELCOME"], "a raw source over unix is welcomed (uid 1001 -> rawsource)")
        r.send(MSG["GET"], struct.pack(">IB3x", 256, 0))
        t, payload = r.recv()
        check(t == MSG["ERROR"], "a source's GET is answered ERROR")
        refused_once(b, before, "Refusing GET", "source GET")
        still_serving(b, "a source's GET")

        # An unmapped unix peer, and root is not special.
        before = b.read_log()
        r = Raw(b.sock, uid=1002)
        t, payload = r.recv()
        check(t == MSG["ERROR"], "an unmapped uid gets ERROR without saying a word")
        refused_once(b, before, "no [user] section maps uid 1002", "unmapped peer")
        before = b.read_log()
        r = Raw(b.sock)
        t, payload = r.recv()
        check(t == MSG["ERROR"], "root is refused too when no user maps uid 0")
        refused_once(b, before, "no [user] section maps uid 0", "root unmapped")

        # Plaintext on the TLS port.
        before = b.read_log()
        with socket.create_connection(("127.0.0.1", b.port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            try:
                s.recv(100)
            except OSError:
                pass
        check(b.wait_log("not TLS"), "plaintext on the TLS port is named as such")
        refused_once(b, before, "Refusing", "plaintext")
        still_serving(b, "plaintext on the TLS port")

        # Malformed frames: bad reserved bits, a truncated HELLO, an oversized length.
        for what, frame in [
            ("nonzero reserved", struct.pack(">BBHI", 1, 0, 7, 0)),
            ("unknown type", struct.pack(">BBHI", 99, 0, 0, 0)),
            ("oversized", struct.pack(">BBHI", 3, 0, 0, 1 << 24)),
        ]:
            before = b.read_log()
            r = Raw(b.sock, uid=1000)
            r.s.sendall(frame)
            t, _ = r.recv()
            check(t == MSG["ERROR"], f"a frame with {what} is answered ERROR")
            check(r.closed(), f"and the peer with {what} is closed")
            refused_once(b, before, "Closing", f"frame with {what}")
        before = b.read_log()
        r = Raw(b.sock, uid=1000)
        r.send(MSG["HELLO"], b"\x00\x01\x02")
        t, _ = r.recv()
        check(t == MSG["ERROR"], "a truncated HELLO is answered ERROR")
        refused_once(b, before, "malformed HELLO", "truncated HELLO")
        still_serving(b, "malformed frames")

        # An ERROR is never answered (protocol.md 3.9), even as the first frame, even malformed:
        # the broker closes without a word.
        for what, payload in [("an ERROR", struct.pack(">HH", 1, 3) + b"bye"),
                              ("a malformed ERROR", b"\x00")]:
            before = b.read_log()
            r = Raw(b.sock, uid=1000)
            r.send(MSG["ERROR"], payload)
            t, _ = r.recv()
            check(t is None, f"{what} as the first frame is not answered (got type {t})")
            check(b.wait_log("reported an error and leaves"), f"{what} is logged as a leave")
        still_serving(b, "an ERROR first")
        check(b.alive(), "the broker is still running")
    finally:
        b.cleanup()


main(test)
