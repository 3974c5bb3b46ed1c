#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The session limits as a client meets them: a network connection over max-sessions is closed
before its handshake and the client says the broker is busy (and may try again), not that its
key was refused; a stalled handshake older than a second gives its slot to a new one when all of
max-handshakes are taken; a local peer over max-local-sessions gets ERROR(BUSY), and a real
client racing that refusal reads it; a quota smaller than a pool block still seeds the DRBG."""
import os
import socket
import struct
import time

from eblib import ME, MSG, Broker, Raw, check, main, prog, run, wait_for

ERR_BUSY = 8


def idle_tcp(port, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        socks.append(s)
    return socks


def status_cmd(b):
    return run([prog("eb-brokerctl"), "-b", b.tcp, "-u", "admin", "-k", b.keys["admin"],
                "status", "--json"])


def busy_close(b):
    # max-sessions = 2, both held by idle TLS connections that never say a word.
    # The broker accepts in the order the kernel queued the connections: these two first.
    socks = idle_tcp(b.port, 2)
    try:
        before = b.read_log()
        p = status_cmd(b)
        err = p.stderr.decode()
        check(p.returncode != 0, "a third network session is refused at max-sessions")
        check("busy" in err and "refused user" not in err,
              f"the client says the broker is busy, not that its key was refused ({err.strip()})")
        check(b.wait_log("max-sessions reached"), "the broker says which limit it reached")
        check(b.read_log()[len(before):].count("Refusing") == 1, "one refusal, one log line")
    finally:
        for s in socks:
            s.close()
    # Their slots come back as soon as they close.
    wait_for("once the idle connections close, the admin is served again",
             lambda: status_cmd(b).returncode == 0, timeout=10, interval=0.05)


def eviction(b):
    # max-handshakes = 2: two stalled handshakes hold them, and are older than a second by the
    # time a real client comes; it gets in, and the oldest stalled one is closed.
    socks = idle_tcp(b.port, 2)
    try:
        time.sleep(1.2)  # the eviction age is what is tested: the only way is to let it pass
        t0 = time.monotonic()
        p = status_cmd(b)
        check(p.returncode == 0, "a real client is served while stalled handshakes fill max-handshakes")
        print(f"latency eb-brokerctl with max-handshakes taken: "
              f"{(time.monotonic() - t0) * 1000:.0f} ms")
        check(b.wait_log("its TLS handshake stalled while others wait"),
              "the oldest stalled handshake is closed to make room, and the log says so")
        socks[0].settimeout(5)
        try:
            closed = socks[0].recv(1) == b""
        except (ConnectionResetError, socket.timeout):
            closed = True
        check(closed, "the oldest stalled connection is the one closed")
    finally:
        for s in socks:
            s.close()


def local_busy(b):
    held = [Raw(b.sock), Raw(b.sock)]
    try:
        for r in held:
            t, _ = r.hello(1)
            check(t == MSG["WELCOME"], "a local session within max-local-sessions is welcomed")
        extra = Raw(b.sock)
        t, payload = extra.recv()
        check(t == MSG["ERROR"] and struct.unpack(">H", payload[:2])[0] == ERR_BUSY,
              "a local peer over max-local-sessions gets ERROR(BUSY) before it says a word")
        check(extra.closed(), "and is closed")
        # A real client whose HELLO races the refusal must still read the ERROR, not a reset:
        # the broker lingers after it. It says busy and tries again, not that it was refused.
        for i in range(5):
            p = run([prog("eb-sink-file"), "-b", b.unix, "--bytes", "32", "--timeout", "2"])
            err = p.stderr.decode()
            check(p.returncode != 0 and "busy" in err and "refused" not in err,
                  f"eb-sink-file over a full local socket says the broker is busy, run {i + 1} "
                  f"({err.strip().splitlines()[-1] if err.strip() else 'no message'})")
    finally:
        for r in held:
            r.s.close()


def drbg_small_quota(b):
    """A quota smaller than one pool block never pays for one: its user's GETs get QUOTA, an
    hour, in full-entropy mode and for a DRBG seed alike, whatever the pool holds; once another
    user has seeded the DRBG, its DRBG-mode GETs are served with no reseed to pay for."""
    src = Raw(b.sock)
    t, _ = src.hello(3)
    check(t == MSG["WELCOME"], "root over unix is a source and a sink")
    data = os.urandom(4096)
    src.send(MSG["PUT"], struct.pack(">II", 8 * len(data), len(data)) + data)
    t, _ = src.recv()
    check(t == MSG["PUT_ACK"], "its PUT fills the pool")
    tiny = Raw(b.sock, uid=1000)
    t, _ = tiny.hello(2)
    check(t == MSG["WELCOME"], "a sink with a 256-bit hourly quota is welcomed")
    for mode, what in ((1, "its DRBG-mode GET, which would seed the DRBG"),
                       (0, "its 1-byte full-entropy GET")):
        tiny.send(MSG["GET"], struct.pack(">IB3x", 8 if mode == 0 else 128, mode))
        t, payload = tiny.recv()
        check(t == MSG["QUOTA"] and struct.unpack(">I", payload[:4])[0] == 3600000,
              f"{what} gets QUOTA, retry in an hour (got type {t}, {payload.hex()})")
    src.send(MSG["GET"], struct.pack(">IB3x", 128, 1))
    t, _ = src.recv()
    check(t == MSG["DATA"], "a user with no quota seeds the DRBG")
    tiny.send(MSG["GET"], struct.pack(">IB3x", 1024, 1))
    t, payload = tiny.recv()
    check(t == MSG["DATA"], f"then the small quota's DRBG-mode GET is served (got type {t})")


def test():
    b = Broker({"admin": {"role": "admin"},
                "local": {"role": "source, sink", "unix-uid": ME, "key": False}},
               broker_extra="max-sessions = 2\nmax-local-sessions = 2\n"
                            "hello-timeout-sec = 60\n").start()
    try:
        busy_close(b)
        local_busy(b)
    finally:
        b.cleanup()

    b = Broker({"admin": {"role": "admin"},
                "local": {"role": "source, sink", "unix-uid": ME, "key": False},
                "tiny": {"role": "sink", "unix-uid": 1000, "key": False,
                         "quota-bits-per-hour": 256}},
               broker_extra="max-handshakes = 2\nhello-timeout-sec = 60\n").start()
    try:
        eviction(b)
        drbg_small_quota(b)
    finally:
        b.cleanup()


if __name__ == "__main__":
    main(test)
