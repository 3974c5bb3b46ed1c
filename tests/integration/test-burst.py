#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A burst of frames far larger than what one wake-up of a session reads (16 rounds of its 1 KiB
buffer), written at once: every PUT is acknowledged after the source has stopped writing. The broker's
sockets are edge-triggered; a session whose budget runs out before its socket is drained must
come back for the rest by itself, since no new edge will come."""
import os
import struct
import socket

from eblib import ME, MSG, ROLE_SOURCE, Broker, Raw, check, main

FRAMES = 4000


def test():
    b = Broker({"local": {"role": "source", "unix-uid": ME, "key": False}}).start()
    try:
        src = Raw(b.sock)
        t, _ = src.hello(ROLE_SOURCE)
        check(t == MSG["WELCOME"], "the source is welcomed")
        src.s.settimeout(60)
        # Uncredited PUTs of 8 bytes: the pool's level, and so flow control, stay out of it.
        # The whole burst fits in the socket's buffer, so it is written in one go, before any
        # PUT_ACK is read: after the first wake-ups no new edge comes.
        frame = struct.pack(">BBHI", MSG["PUT"], 0, 0, 16) + struct.pack(">II", 0, 8)
        burst = b"".join(frame + os.urandom(8) for _ in range(FRAMES))
        src.s.sendall(burst)
        acks = []
        try:
            while len(acks) < FRAMES:
                t, _ = src.recv()
                if t is None:
                    break
                acks.append(t)
        except socket.timeout:
            pass
        check(len(acks) == FRAMES,
              f"all {FRAMES} PUTs of a {len(burst)}-byte burst are acknowledged ({len(acks)})")
        check(all(t == MSG["PUT_ACK"] for t in acks), "each with a PUT_ACK")
        check(b.alive(), "the broker is still running")
    finally:
        b.cleanup()


if __name__ == "__main__":
    main(test)
