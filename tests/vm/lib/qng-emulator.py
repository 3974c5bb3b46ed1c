#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A ComScire QNG behind QEMU's usb-serial (an FTDI FT232): QEMU's chardev connects to the unix
socket SOCKET, and what the guest writes to the chip are the QNG's one-byte commands, answered
here, with random bytes streamed back while the device is started. The command values are the
ones sources/qng.h takes from the vendor's QWQNG library.

The scenario steers it by writing one word to STATEDIR/mode:
  good   stream random bytes (the first byte after each START has its high bits zero, as the
         device's invalid first byte does)
  bad    the generator has failed the device's own tests: the status word's bad-statistics bit
         is set, stays set after a clear, and nothing is streamed
  stuck  stream one byte value over and over, the status saying all is well
and reads what it did from STATEDIR/state, one "key=value" a line, rewritten as it changes:
connections, streamed (bytes), starts, stops, delimiters, statuses, bad_statuses (status words
sent with the bit set), clears.

usage: qng-emulator.py SOCKET STATEDIR [RATE]   (RATE: bytes a second while streaming, default
4096; a TCG guest is not starved by it)"""
import os
import select
import socket
import sys
import time

START, STOP, DELIMITER, STATUS, CLEAR_STATS = 0x96, 0xE0, 0x60, 0xB0, 0xC0
BAD_STATS = 0x0004
OUTPUT_ENABLED, STREAMING = 0x0001, 0x0002
INTERNAL_SERIAL = bytes([0x51, 0x57, 0x45, 0x42, 0x00, 0x2A])
CHUNK = 256


class Qng:
    def __init__(self, statedir, rate):
        self.statedir = statedir
        self.rate = rate
        self.streaming = False
        self.first = False
        self.bad = False
        self.mode = "good"
        self.counts = dict(connections=0, streamed=0, starts=0, stops=0, delimiters=0,
                           statuses=0, bad_statuses=0, clears=0)
        self.dirty = True

    def count(self, key, n=1):
        self.counts[key] += n
        self.dirty = True

    def read_mode(self):
        try:
            with open(os.path.join(self.statedir, "mode")) as f:
                mode = f.read().strip() or "good"
        except FileNotFoundError:
            mode = "good"
        if mode not in ("good", "bad", "stuck"):
            mode = "good"
        if mode != self.mode:
            self.mode = mode
            # Failing its tests, the device stops: the vendor's library sees a short read.
            if mode == "bad":
                self.bad = True
                self.streaming = False
            self.dirty = True

    def write_state(self):
        if not self.dirty:
            return
        path = os.path.join(self.statedir, "state")
        with open(path + ".tmp", "w") as f:
            f.write(f"mode={self.mode}\n")
            for k, v in self.counts.items():
                f.write(f"{k}={v}\n")
        os.replace(path + ".tmp", path)
        self.dirty = False

    def command(self, c):
        """The answer to one command byte, b"" for none."""
        if c == START:
            self.count("starts")
            if not self.bad:
                self.streaming = True
                self.first = True
        elif c == STOP:
            self.count("stops")
            self.streaming = False
        elif c == DELIMITER:
            self.count("delimiters")
            return INTERNAL_SERIAL
        elif c == STATUS:
            self.count("statuses")
            word = OUTPUT_ENABLED | (STREAMING if self.streaming else 0)
            if self.bad:
                word |= BAD_STATS
                self.count("bad_statuses")
            return word.to_bytes(4, "little")
        elif c == CLEAR_STATS:
            self.count("clears")
            self.bad = self.mode == "bad"
        return b""

    def stream(self, n):
        data = bytearray(b"\x5a" * n if self.mode == "stuck" else os.urandom(n))
        if self.first and n:
            data[0] &= 0x0F
            self.first = False
        self.count("streamed", n)
        return bytes(data)


def serve(conn, qng):
    conn.setblocking(False)
    # A small send buffer: what is in flight when the device is stopped is what the source must
    # drain, as on the real chip's FIFO.
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    out = b""
    budget, last = 0.0, time.monotonic()
    while True:
        qng.read_mode()
        qng.write_state()
        now = time.monotonic()
        budget = min(budget + (now - last) * qng.rate, CHUNK * 4)
        last = now
        if qng.streaming and budget >= CHUNK and len(out) < CHUNK:
            out += qng.stream(CHUNK)
            budget -= CHUNK
        r, w, _ = select.select([conn], [conn] if out else [], [], 0.02)
        if r:
            try:
                data = conn.recv(4096)
            except (ConnectionResetError, BlockingIOError):
                data = b""
            if not data:
                return
            for c in data:
                answer = qng.command(c)
                if c == STOP:
                    # Stream bytes not yet handed to the socket never leave the device.
                    out = b""
                out += answer
        if w and out:
            try:
                sent = conn.send(out)
            except BlockingIOError:
                sent = 0
            except (BrokenPipeError, ConnectionResetError):
                return
            out = out[sent:]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    path, statedir = sys.argv[1], sys.argv[2]
    rate = int(sys.argv[3]) if len(sys.argv) == 4 else 4096
    qng = Qng(statedir, rate)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    qng.write_state()
    while True:
        conn, _ = srv.accept()
        qng.count("connections")
        qng.streaming = False
        with conn:
            serve(conn, qng)


if __name__ == "__main__":
    main()
