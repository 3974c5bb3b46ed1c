#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Failover: a sink draws from two brokers that know its user by the same key; the first is
SIGKILLed mid-stream and the sink finishes from the second with exactly N bytes, none served
twice, and no gap. The exact proof: the first broker is reached through a proxy that records every
DATA frame it forwards, so the output must be a whole-frame prefix of those frames followed by
exactly what the second broker counts as delivered. Also over TLS to both, a broker that comes
up only while the sink is already backing off, and one that never answers."""
import os
import signal
import socket
import struct
import subprocess
import threading
import time

from eblib import MSG, Broker, check, closed_port, donate, main, prog

N = 1024 * 1024
USERS = {
    "alice": {"role": "source"},
    "bob": {"role": "sink"},
    "admin": {"role": "admin"},
    "local": {"role": "sink", "unix-uid": os.getuid(), "key": False},
}
CAPACITY = 64 * 1024 * 1024


class RecordingProxy:
    """A unix-socket proxy in front of a broker that records the DATA frames it forwards whole
    and calls action() once it has forwarded at_bytes DATA bytes; done is set when action()
    has returned."""

    def __init__(self, path, upstream, at_bytes, action):
        self.upstream, self.at_bytes, self.action = upstream, at_bytes, action
        self.payloads = []
        self.forwarded = 0
        self.fired = False
        self.done = threading.Event()
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.bind(path)
        self.s.listen(4)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                u.connect(self.upstream)
            except OSError:
                c.close()
                continue
            threading.Thread(target=self.pump, args=(c, u), daemon=True).start()
            threading.Thread(target=self.down, args=(u, c), daemon=True).start()

    @staticmethod
    def pump(src, dst):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                dst.sendall(b)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def down(self, u, c):
        buf = b""
        try:
            while True:
                b = u.recv(65536)
                if not b:
                    break
                buf += b
                while len(buf) >= 8:
                    t, _, _, n = struct.unpack(">BBHI", buf[:8])
                    if len(buf) < 8 + n:
                        break
                    if t == MSG["DATA"]:
                        self.payloads.append(buf[16:8 + n])
                        self.forwarded += n - 8
                    buf = buf[8 + n:]
                # The kill before the bytes go on: a sink that had all it wanted could
                # otherwise exit, and the test look for the kill, before this thread made it.
                if not self.fired and self.forwarded >= self.at_bytes:
                    self.fired = True
                    try:
                        self.action()
                    finally:
                        self.done.set()
                c.sendall(b)
        except OSError:
            pass
        for s in (u, c):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.s.close()


def fill(b, tmp):
    noise = os.path.join(tmp, "noise")
    with open(noise, "wb") as f:
        f.write(os.urandom(2 * N))
    p = donate(b, "alice", noise)
    return p.returncode == 0 and b.status()["pool_bits"] >= 8 * N + 8 * N // 8


def sink(*args):
    return subprocess.Popen([prog("eb-sink-file"), *args, "--bytes", str(N), "--timeout", "60",
                             "-v"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            # Unbuffered: communicate() reads the fd itself after the test read
                            # a part, and would miss what a buffered reader had read ahead.
                            bufsize=0)


def kill(b):
    b.proc.send_signal(signal.SIGKILL)
    b.proc.wait()


def test():
    first = Broker(USERS, capacity=CAPACITY).start()
    second = Broker(USERS, capacity=CAPACITY, keys=first.keys).start()
    third = late = proxy = None
    try:
        check(first.keys["bob"] == second.keys["bob"], "both brokers know bob by one key file")
        check(fill(first, first.tmp) and fill(second, second.tmp),
              "both pools hold more than N bytes of full entropy")

        # 1. Through the recording proxy to the first, TLS with the shared key to the second.
        proxy = RecordingProxy(os.path.join(first.tmp, "proxy.sock"), first.sock, N // 3,
                               lambda: kill(first))
        out0 = second.status()["bits_out"]
        p = sink("-b", "unix:" + os.path.join(first.tmp, "proxy.sock"), "-b", second.tcp,
                 "-u", "bob", "-k", second.keys["bob"])
        out, err = p.communicate(timeout=90)
        err = err.decode(errors="replace")
        # The proxy's thread kills the first and reaps it: the sink can finish from the second
        # while that thread still waits for the kernel to reap a broker with a 64 MiB pool, and
        # Popen.poll() says None while another thread waits. Wait for the reaping itself.
        check(proxy.done.wait(timeout=60) and first.proc.returncode == -signal.SIGKILL,
              f"the first broker was SIGKILLed after {proxy.forwarded} DATA bytes")
        check(p.returncode == 0, f"the sink exits 0 ({err.strip()[-300:]})")
        check(len(out) == N, f"it wrote exactly N = {N} bytes ({len(out)})")
        check("Lost broker unix:" in err and "failing over" in err and
              f"Drawing from {second.tcp}" in err, "it logged the loss and drew from the second")
        k = j = 0
        for pl in proxy.payloads:
            if out[k:k + len(pl)] != pl:
                break
            k += len(pl)
            j += 1
        check(0 < k < N, f"the output begins with {j} whole DATA frames from the first "
                         f"({k} bytes of {proxy.forwarded} forwarded)")
        delivered = second.status()["bits_out"] - out0
        check(delivered == (N - k) * 8,
              f"the second broker delivered exactly the rest: {delivered // 8} == {N - k} bytes "
              "(no gap, nothing twice)")
        later = [pl for pl in proxy.payloads[j:] if out.find(pl[:64]) >= 0]
        check(not later, f"none of the {len(proxy.payloads) - j} frames the sink lost in the "
                         "kill turns up later in the output")

        # 2. TLS to both: the test stops reading the sink's output, so the first broker's status
        # is final, then kills it.
        third = Broker(USERS, capacity=CAPACITY, keys=first.keys).start()
        check(fill(third, third.tmp), "a third broker with the same key is filled")
        out0 = second.status()["bits_out"]
        p = sink("-b", third.tcp, "-b", second.tcp, "-u", "bob", "-k", first.keys["bob"])
        head = b""
        while len(head) < N // 4:
            chunk = p.stdout.read(N // 4 - len(head))
            if not chunk:
                break
            head += chunk
        time.sleep(0.3)
        served = third.status()["bits_out"] // 8
        kill(third)
        rest, err = p.communicate(timeout=90)
        err = err.decode(errors="replace")
        total = len(head) + len(rest)
        check(p.returncode == 0 and total == N,
              f"over TLS to both: exit 0 and exactly N bytes ({p.returncode}, {total})")
        check(f"Lost broker {third.tcp}" in err, "it logged the loss of the first")
        from_second = (second.status()["bits_out"] - out0) // 8
        check(N // 4 <= N - from_second <= served,
              f"what it took from the first ({N - from_second}) is at least what was read "
              f"before the kill ({N // 4}) and at most what the first served ({served})")

        # 3. No broker at all yet: the sink backs off and retries until one comes up.
        late = Broker(USERS, capacity=CAPACITY, keys=first.keys)
        t0 = time.monotonic()
        dead, dead_port = closed_port()
        p = sink("-b", f"tcp://127.0.0.1:{dead_port}", "-b", late.unix, "-u", "bob", "-k",
                 first.keys["bob"])
        time.sleep(1.5)
        late.start()
        check(fill(late, late.tmp), "a broker comes up 1.5 s after the sink started")
        out, err = p.communicate(timeout=90)
        took = time.monotonic() - t0
        check(p.returncode == 0 and len(out) == N,
              f"the sink, backing off meanwhile, then draws all N bytes in {took:.1f} s "
              f"({p.returncode}, {len(out)}, {err.decode(errors='replace').strip()[-300:]})")
        check(took < 10, "the backoff (100 ms doubling, with jitter) found it within seconds")
        dead.close()

        # 4. A broker that accepts and never answers HELLO: --timeout holds all the same.
        silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        silent.bind(os.path.join(late.tmp, "silent.sock"))
        silent.listen(8)
        t0 = time.monotonic()
        p = subprocess.run([prog("eb-sink-file"), "-b", "unix:" + os.path.join(late.tmp, "silent.sock"),
                            "--bytes", "32", "--timeout", "2"], capture_output=True, timeout=30)
        took = time.monotonic() - t0
        silent.close()
        check(p.returncode == 1 and p.stdout == b"" and took < 3.5,
              f"a broker that never answers HELLO: exit 1 at --timeout 2 ({took:.1f} s, "
              f"{p.stderr.decode(errors='replace').strip()[-120:]})")
    finally:
        if proxy:
            proxy.close()
        for b in (first, second, third, late):
            if b:
                b.cleanup()


main(test)
