#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A slow frame: an authenticated unix session sends HELLO, gets WELCOME, then 3 bytes of a
frame header, and goes silent. With frame-timeout-sec = 2 the broker closes it within 2 s (and
some slack), instead of holding its slot and buffers for ever. An authenticated session that
sent nothing after WELCOME is left alone: idle authenticated sessions stay (that is the
documented policy), and it is still served afterwards. Nor is a source whose frames each arrive
split across writes, each completing well within the timeout although some frame is always
half-received: the clock is per frame, from its own first byte."""
import select
import struct
import time

from attacklib import (MSG, ROLE_SINK, Legit, Raw, Window, check, expect, main, need_root,
                       start_broker)

FRAME_TIMEOUT = 2
SLACK = 5
SLOW = 20  # slow sessions at once


def still_open(r):
    """Whether r's connection is still open, without waiting: nothing to read and no EOF."""
    readable, _, _ = select.select([r.s], [], [], 0)
    if not readable:
        return True
    try:
        return r.s.recv(1, 0x40) != b""  # MSG_DONTWAIT
    except (BlockingIOError, InterruptedError):
        return True
    except OSError:
        return False


def streaming(b):
    """PUTs cut so that every write ends inside the next frame: some frame is always partial,
    yet each completes 0.3 s after its first byte. For 3 frame timeouts the session must stay."""
    r = Raw(b.sock, uid=1001)
    try:
        t, _ = r.hello(1)
        check(t == MSG["WELCOME"], "the streaming source is welcomed")
        frame = struct.pack(">BBHI", MSG["PUT"], 0, 0, 8 + 1000) + struct.pack(">II", 0, 1000) \
            + bytes(range(256)) * 3 + bytes(232)
        half = len(frame) // 2
        r.s.sendall(frame[:half])
        acked = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3 * FRAME_TIMEOUT:
            time.sleep(0.3)
            r.s.sendall(frame[half:] + frame[:half])  # the end of one, the start of the next
            t, _ = r.recv()
            if t != MSG["PUT_ACK"]:
                break
            acked += 1
        expect(t == MSG["PUT_ACK"] and still_open(r),
               f"a source streaming split frames stays open for {3 * FRAME_TIMEOUT} s "
               f"({acked} PUTs acknowledged)")
    finally:
        r.close()


def test():
    # Its raw peers connect as other uids.
    need_root("to connect as uid 1000 and 1001")
    b = start_broker(users={"rawsink": {"role": "sink", "unix-uid": 1000, "key": False},
                            "rawsource": {"role": "source", "unix-uid": 1001, "key": False}},
                     new_keys=f"frame-timeout-sec = {FRAME_TIMEOUT}")
    held = []
    try:
        legit = Legit(b)
        legit.round("no attack")
        idle = Raw(b.sock, uid=1000)
        held.append(idle)
        t, _ = idle.hello(ROLE_SINK)
        check(t == MSG["WELCOME"], "the idle session is welcomed")
        idle_since = time.monotonic()

        w = Window(b, "slow-frame").begin()
        slow = []
        for _ in range(SLOW):
            r = Raw(b.sock, uid=1000)
            held.append(r)
            t, _ = r.hello(ROLE_SINK)
            check(t == MSG["WELCOME"], "a slow session is welcomed")
            r.s.sendall(bytes([MSG["GET"], 0, 0]))  # 3 of a header's 8 bytes
            slow.append(r)
        t0 = time.monotonic()
        legit.round("slow-frame")
        deadline = t0 + FRAME_TIMEOUT + SLACK
        open_ = list(slow)
        while open_ and time.monotonic() < deadline:
            open_ = [r for r in open_ if still_open(r)]
            time.sleep(0.05)
        took = time.monotonic() - t0
        expect(not open_, f"the broker closes all {SLOW} slow sessions within "
               f"{FRAME_TIMEOUT} + {SLACK} s ({SLOW - len(open_)} closed in {took:.1f} s)")
        # The idle one has been idle for longer than the frame timeout, twice over.
        while time.monotonic() - idle_since < 2 * FRAME_TIMEOUT + 1:
            select.select([idle.s], [], [], 0.1)
        expect(still_open(idle), f"the idle authenticated session is still open after "
               f"{time.monotonic() - idle_since:.1f} s")
        idle.send(MSG["GET"], struct.pack(">IB3x", 256, 0))
        t, _ = idle.recv()
        expect(t in (MSG["DATA"], MSG["EMPTY"]), f"and is served when it asks (got {t})")
        w.end()
        w.check_cpu()
        w.check_log(SLOW + 20)
        w.check_rss(8 * 1024)
        streaming(b)
        expect(b.alive(), "the broker is still running")
        legit.summary("slow-frame")
    finally:
        for r in held:
            r.close()
        b.cleanup()


main(test)
