#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-sink-egd speaks the EGD protocol exactly, byte by byte, from a raw socket client: every
command, requests and replies split into pieces, 0 and 255 byte reads, unknown commands, a
client that never reads, a client that leaves mid-read, 1,000 clients at once, and writes that
are donated onward only when the sink's user may donate."""
import os
import resource
import selectors
import signal
import socket
import struct
import subprocess
import time

from eblib import ME, Broker, Failure, check, donate, main, need, prog

# Raw protocol helpers: each reads exactly what the protocol promises, and no more.


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(10)
    return s


def exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise Failure(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def level(s):
    s.sendall(b"\x00")
    return struct.unpack(">I", exact(s, 4))[0]


def read_nb(s, n):
    s.sendall(bytes([1, n]))
    m = exact(s, 1)[0]
    return exact(s, m) if m else b""


def read_block(s, n):
    s.sendall(bytes([2, n]))
    return exact(s, n)


def pid(s):
    s.sendall(b"\x04")
    n = exact(s, 1)[0]
    return exact(s, n)


def quiet(s, wait=0.3):
    """True when nothing arrives within wait seconds."""
    s.settimeout(wait)
    try:
        s.recv(1)
        return False
    except socket.timeout:
        return True
    finally:
        s.settimeout(10)


def closed(s, wait=5):
    s.settimeout(wait)
    try:
        while True:
            if s.recv(65536) == b"":
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
    finally:
        s.settimeout(10)


class Sink:
    """eb-sink-egd socket-activated the way eb-sink-egd.socket does it, with named fds."""

    def __init__(self, broker, name, extra=()):
        need("systemd-socket-activate")
        self.path = os.path.join(broker.tmp, name)
        self.log = os.path.join(broker.tmp, name + ".log")
        self.logf = open(self.log, "wb")
        env = dict(os.environ, EB_LOG_TARGET="console")
        self.proc = subprocess.Popen(
            ["systemd-socket-activate", "-l", self.path, "--fdname=egd-pool",
             prog("eb-sink-egd"), "-v", "-b", broker.unix, *extra],
            stdout=self.logf, stderr=self.logf, env=env)
        # The path appears at bind(), before listen(): up once a PID request is answered.
        deadline = time.time() + 10
        while True:
            try:
                with connect(self.path) as s:
                    s.settimeout(5)
                    if pid(s):
                        break
            except (OSError, Failure):
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                self.stop()
                raise Failure("eb-sink-egd did not come up: " + self.read_log())
            time.sleep(0.02)

    def read_log(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def wait_level(self, bits, timeout=10):
        deadline = time.time() + timeout
        with connect(self.path) as s:
            while time.time() < deadline:
                if level(s) >= bits:
                    return True
                time.sleep(0.05)
        return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()
        return self.proc.returncode


def noise(b, name, size):
    path = os.path.join(b.tmp, name)
    with open(path, "wb") as f:
        f.write(os.urandom(size))
    return path


def test_protocol(b):
    p = donate(b, "alice", noise(b, "noise1", 256 * 1024))
    check(p.returncode == 0, f"the broker is filled ({p.stderr.decode().strip()[-200:]})")
    sink = Sink(b, "egd-pool", ["--buffer-size", "4096", "--client-timeout", "2"])
    try:
        check(sink.wait_level(4096 * 8), "0x00 reports the buffer full: 32768 bits")
        s = connect(sink.path)
        check(pid(s) == str(sink.proc.pid).encode(),
              "0x04 answers a length byte and the sink's PID in ASCII")

        s.sendall(b"\x01\x00")
        check(exact(s, 1) == b"\x00" and quiet(s), "0x01 for 0 bytes answers a count of 0 and nothing more")
        d = read_nb(s, 255)
        check(len(d) == 255, "0x01 for 255 bytes answers 255 bytes when they are there")
        lv = level(s)
        check(lv % 8 == 0 and lv <= 4096 * 8, f"0x00 counts whole bytes in the buffer ({lv} bits)")

        s.sendall(b"\x02\x00")
        check(pid(s) == str(sink.proc.pid).encode(),
              "0x02 for 0 bytes sends nothing: the next reply comes next")
        d2 = read_block(s, 255)
        check(pid(s) == str(sink.proc.pid).encode(),
              "0x02 for 255 bytes streams exactly 255 bytes, no count byte")

        # Requests split byte by byte, replies read byte by byte.
        s.sendall(b"\x02")
        time.sleep(0.2)
        s.sendall(b"\x40")
        got = b"".join(exact(s, 1) for _ in range(64))
        check(len(got) == 64 and quiet(s), "a 0x02 request split in two is answered once, 64 bytes read one at a time")
        for part in (b"\x03", b"\x00", b"\x10", b"\x02", b"a", b"b"):
            s.sendall(part)
            time.sleep(0.05)
        check(quiet(s), "0x03 split into six pieces gets no reply")
        check(pid(s) == str(sink.proc.pid).encode(), "and the stream is still in step after it")

        # Pipelined: 100 requests in one send, 100 answers in order.
        s.sendall(b"\x01\x10" * 50 + b"\x02\x08" * 50)
        seen, counts = set(), set()
        for _ in range(50):
            m = exact(s, 1)[0]
            counts.add(m)
            seen.add(exact(s, m))
        check(counts == {16}, "each pipelined 0x01 for 16 bytes gets 16")
        for _ in range(50):
            seen.add(exact(s, 8))
        check(len(seen) == 100 and quiet(s), "100 pipelined requests get 100 distinct answers and nothing more")
        check(len({d, d2, got}) == 3, "no bytes are served twice")

        # Unknown commands close that connection, and only that one.
        for cmd in (b"\x05", b"\xff", b"\x80"):
            with connect(sink.path) as bad:
                bad.sendall(cmd + b"\x01\x10")
                check(closed(bad), f"unknown command {cmd.hex()} gets a clean close")
        check(len(read_nb(s, 32)) == 32, "the other clients are still served")

        # A client that pipelines blocking reads and never reads: bounded, then dropped.
        hog = connect(sink.path)
        hog.sendall(b"\x02\xff" * 2000)
        time.sleep(0.5)
        check(len(read_nb(s, 32)) == 32, "a client that never reads does not hold up the others")
        time.sleep(3.5)
        got = 0
        try:
            while True:
                chunk = hog.recv(65536)
                if not chunk:
                    break
                got += len(chunk)
        except (ConnectionResetError, socket.timeout):
            pass
        hog.close()
        check(0 < got < 2000 * 255 // 4,
              f"it was sent only what the socket holds ({got} bytes of {2000 * 255}), then dropped")

        # A request cut off mid-way, then a hang-up: a clean close.
        with connect(sink.path) as cut:
            cut.sendall(b"\x03\x00\x08\x10abc")
        check(len(read_nb(s, 8)) == 8, "a write cut off by a hang-up harms nobody")

        # 1,000 clients at once, each with a blocking read.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 1200:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
        many = [connect(sink.path) for _ in range(1000)]
        for c in many:
            c.sendall(b"\x02\x10")
        sel = selectors.DefaultSelector()
        bufs = {}
        for c in many:
            c.setblocking(False)
            sel.register(c, selectors.EVENT_READ)
            bufs[c] = b""
        deadline = time.time() + 60
        done = 0
        while done < 1000 and time.time() < deadline:
            for key, _ in sel.select(1):
                c = key.fileobj
                chunk = c.recv(64)
                if not chunk:
                    raise Failure("a client of the 1,000 was closed")
                bufs[c] += chunk
                if len(bufs[c]) >= 16:
                    sel.unregister(c)
                    done += 1
        check(done == 1000 and all(len(v) == 16 for v in bufs.values()),
              f"1,000 concurrent clients each got exactly 16 bytes ({done} done)")
        check(len(set(bufs.values())) == 1000, "and no two got the same bytes")
        for c in many:
            c.close()
        check(len(read_nb(s, 32)) == 32, "the sink still serves after them")
        s.close()
    finally:
        rc = sink.stop()
    log = sink.read_log()
    check(rc == 0, "eb-sink-egd exits 0 on SIGTERM")
    check("1 stalled" in log, "its log counts the client that never read as stalled")
    check("3 unknown command" in log, "and the three unknown commands")
    check("0 bytes of writes donated, 2 dropped" in log and "does not take this user as a source" in log,
          "writes from a sink-only user are read and dropped, and it says so")
    print("\n".join(l for l in log.splitlines() if "served" in l))


def test_empty(b):
    """A broker with nothing to give: 0x01 answers 0 at once, 0x02 waits and then streams,
    waiters are all served, and one that leaves mid-read costs nothing but its bytes."""
    sink = Sink(b, "egd-empty", ["--buffer-size", "1024"])
    try:
        s = connect(sink.path)
        check(level(s) == 0, "0x00 reports 0 bits when nothing is buffered")
        s.sendall(b"\x01\xff")
        check(exact(s, 1) == b"\x00" and quiet(s), "0x01 answers a count of 0 at once when nothing is there")
        waiters = [connect(sink.path) for _ in range(5)]
        for w in waiters:
            w.sendall(b"\x02\xff")
        leaver = connect(sink.path)
        leaver.sendall(b"\x02\xff")
        check(all(quiet(w, 0.2) for w in waiters), "0x02 blocks while there is nothing")
        check(pid(s) == str(sink.proc.pid).encode(), "a blocked reader does not block another client")
        time.sleep(0.2)
        leaver.close()
        time.sleep(0.2)
        p = donate(b, "alice", noise(b, "noise2", 16 * 1024))
        check(p.returncode == 0, "entropy arrives at the broker")
        got = [exact(w, 255) for w in waiters]
        check(all(len(g) == 255 for g in got) and len(set(got)) == 5,
              "then every blocked reader gets exactly its 255 bytes, each different")
        check(all(quiet(w, 0.1) for w in waiters), "and not a byte more")
        check(len(read_nb(s, 16)) == 16, "the sink goes on serving")
        for w in waiters:
            w.close()
        s.close()
    finally:
        rc = sink.stop()
    log = sink.read_log()
    check(rc == 0, "eb-sink-egd exits 0")
    check("1 gone mid-read" in log, "it counts the client that left during a blocking read")


def test_donate(b):
    """With a user that may also donate, 0x03 writes reach the broker's pool."""
    sink = Sink(b, "egd-donor", ["--buffer-size", "256"])
    try:
        before = b.status()["bits_in"]
        s = connect(sink.path)
        check(len(read_block(s, 16)) == 16, "the donating sink serves reads")
        data = os.urandom(200)
        for i in range(0, 200, 100):
            s.sendall(b"\x03" + struct.pack(">HB", 800, 100) + data[i:i + 100])
        check(pid(s) == str(sink.proc.pid).encode(), "writes get no reply")
        deadline = time.time() + 10
        while time.time() < deadline and b.status()["bits_in"] < before + 1600:
            time.sleep(0.1)
        after = b.status()["bits_in"]
        check(after - before == 1600, f"the broker credited the 200 written bytes ({after - before} bits)")
        s.close()
    finally:
        rc = sink.stop()
    log = sink.read_log()
    check(rc == 0 and "200 bytes of writes donated, 0 dropped" in log,
          "the sink logs 200 bytes of writes donated")


def test_big_buffer(b):
    """A buffer larger than one GET (64 KiB) is filled all the way, not just above the low water
    mark."""
    p = donate(b, "alice", noise(b, "noise4", 512 * 1024))
    check(p.returncode == 0, "the fourth broker is filled")
    sink = Sink(b, "egd-big", ["--buffer-size", "300000", "--low-water", "10"])
    try:
        check(sink.wait_level(300000 * 8, timeout=20), "a 300000 byte buffer fills to the brim")
        with connect(sink.path) as s:
            got = b"".join(read_block(s, 255) for _ in range(40))
            check(len(got) == 40 * 255, "and serves from it")
    finally:
        sink.stop()


def test():
    # uid 0 reaches the broker over unix as "local": a sink only, then a sink that may donate.
    b = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                "admin": {"role": "admin"},
                "local": {"role": "sink", "unix-uid": ME, "key": False}},
               capacity=8 * 1048576).start()
    try:
        test_protocol(b)
    finally:
        b.cleanup()
    b = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                "local": {"role": "sink", "unix-uid": ME, "key": False}}).start()
    try:
        test_empty(b)
    finally:
        b.cleanup()
    b = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                "admin": {"role": "admin"},
                "local": {"role": "source,sink", "unix-uid": ME, "key": False,
                          "max-credit-per-byte": 8}}).start()
    try:
        p = donate(b, "alice", noise(b, "noise3", 16 * 1024))
        check(p.returncode == 0, "the third broker is filled")
        test_donate(b)
    finally:
        b.cleanup()
    b = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                "local": {"role": "sink", "unix-uid": ME, "key": False}},
               capacity=8 * 1048576).start()
    try:
        test_big_buffer(b)
    finally:
        b.cleanup()


main(test)
