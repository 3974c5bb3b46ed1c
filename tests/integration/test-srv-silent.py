#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A DNS server that answers the SRV query and ignores every other (issue 31): the clients' name
look-ups are bounded by their deadline and end at a stop. The test runs in a network and mount
namespace of its own (unshare), where a small DNS server (this file, on 127.0.0.1:53) answers
_entropy-broker._tcp.silent.test with 32 targets and never answers their A/AAAA queries, nor
anything about mute.test; a private /etc/resolv.conf points the clients at it and lets glibc wait
5 s and try 3 times per query (15 s a name), as an administrator's may.
- eb-sink-file --timeout 5 -b srv:silent.test gives up within 1.5x its timeout (it went on for
  minutes, 15 s a target);
- eb-sink-file --timeout 5 -b tcp://t0.silent.test likewise (it gave up only when glibc did);
- eb-sink-file --timeout 5 -b srv:mute.test (the SRV query itself unanswered) likewise;
- eb-source-egd t0.silent.test:PORT gives up on its EGD server's name within 1.5x the 10 s its
  man page gives the look-up and the connection, saying the DNS did not answer in time (it waited
  as long as glibc did, and said "No route to host");
- a broker whose [upstream] is srv:silent.test stops within 2 s of SIGTERM while its upstream
  thread waits for a target's address (docs/security.md says 1 s)."""
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

from eblib import (Broker, check, inner_run, main, need, need_root, prog, rerun_unshared, run,
                   wait_for)

TIMEOUT_S = 5
EGD_TIMEOUT_S = 10  # eb-source-egd(1): a TCP server's look-up and connection
TARGETS = 32
PORT = 55225


def qname(msg):
    """The question's name (lower case) and type, and where the question ends."""
    labels, i = [], 12
    while msg[i]:
        labels.append(msg[i + 1:i + 1 + msg[i]].decode(errors="replace"))
        i += 1 + msg[i]
    qtype = struct.unpack(">H", msg[i + 1:i + 3])[0]
    return ".".join(labels).lower(), qtype, i + 5


class SilentDns:
    """Answers the SRV query for silent.test; every other query is logged and never answered."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 53))
        self.seen = []
        self.lock = threading.Lock()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                msg, peer = self.sock.recvfrom(4096)
                name, qtype, end = qname(msg)
            except (OSError, IndexError, struct.error):
                return
            with self.lock:
                self.seen.append((time.monotonic(), name, qtype))
            if qtype == 33 and name == "_entropy-broker._tcp.silent.test":
                self.sock.sendto(self.answer(msg, end), peer)

    @staticmethod
    def answer(msg, end):
        # The question copied, then 32 SRV records; the targets' names point back at
        # "silent.test" in the question (offset 12 + len("\x0e_entropy-broker\x04_tcp")).
        hdr = msg[:2] + struct.pack(">HHHHH", 0x8180, 1, TARGETS, 0, 0)
        out = hdr + msg[12:end]
        suffix = 0xC000 | (12 + 1 + 15 + 1 + 4)
        for i in range(TARGETS):
            label = f"t{i}".encode()
            target = bytes([len(label)]) + label + struct.pack(">H", suffix)
            rdata = struct.pack(">HHH", 0, 10, PORT) + target
            out += struct.pack(">HHHIH", 0xC00C, 33, 1, 60, len(rdata)) + rdata
        return out

    def asked_address(self, since):
        """The A/AAAA queries for a target since then."""
        with self.lock:
            return [s for s in self.seen if s[1].endswith(".silent.test") and s[0] >= since and
                    s[2] in (1, 28)]


def timed_sink(broker, key):
    """How long eb-sink-file --timeout 5 takes to give up, and what it said."""
    t0 = time.monotonic()
    try:
        p = run([prog("eb-sink-file"), "-b", broker, "-u", "sink", "-k", key, "--bytes", "64",
                 "-o", "/dev/null", "--timeout", str(TIMEOUT_S)], timeout=8 * TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        return time.monotonic() - t0, None, (e.stderr or b"").decode(errors="replace")
    return time.monotonic() - t0, p.returncode, p.stderr.decode(errors="replace")


def inner():
    tmp = tempfile.mkdtemp(prefix="eb-srv-silent-")
    brokers = []
    try:
        run(["ip", "link", "set", "lo", "up"], check=True)
        with open(os.path.join(tmp, "resolv.conf"), "w") as f:
            f.write("nameserver 127.0.0.1\noptions edns0 timeout:5 attempts:3\n")
        with open(os.path.join(tmp, "nsswitch.conf"), "w") as f:
            f.write("hosts: dns\n")
        for name in ("resolv.conf", "nsswitch.conf"):
            run(["mount", "--bind", os.path.join(tmp, name), f"/etc/{name}"], check=True)
        dns = SilentDns()

        b = Broker({"sink": {"role": "sink"}, "admin": {"role": "admin"}})
        brokers.append(b)
        key = b.keys["sink"]

        for broker in ("srv:silent.test", f"tcp://t0.silent.test:{PORT}", "srv:mute.test"):
            took, rc, err = timed_sink(broker, key)
            print(f"# eb-sink-file --timeout {TIMEOUT_S} -b {broker}: gave up after {took:.1f} s")
            ok = rc != 0 and took <= 1.5 * TIMEOUT_S
            check(ok, f"-b {broker} gives up within {1.5 * TIMEOUT_S:.1f} s ({took:.1f} s)" +
                  ("" if ok else f":\n{err[-600:]}"))
            check("in time" in err,
                  f"-b {broker}: the error says the DNS did not answer in time:\n{err[-600:]}")

        t0 = time.monotonic()
        try:
            p = run([prog("eb-source-egd"), "-b", b.unix, f"t0.silent.test:{PORT}"],
                    timeout=8 * EGD_TIMEOUT_S)
            rc, err = p.returncode, p.stderr.decode(errors="replace")
        except subprocess.TimeoutExpired as e:
            rc, err = None, (e.stderr or b"").decode(errors="replace")
        took = time.monotonic() - t0
        print(f"# eb-source-egd t0.silent.test:{PORT}: gave up after {took:.1f} s")
        check(rc == 1 and took <= 1.5 * EGD_TIMEOUT_S and "EGD server" in err and "in time" in err,
              f"eb-source-egd gives up on its EGD server's name within {1.5 * EGD_TIMEOUT_S:.0f} s "
              f"({took:.1f} s, exit {rc}) and says the DNS did not answer in time:\n{err[-600:]}")

        # A broker drawing from srv:silent.test, stopped while its upstream thread waits for
        # a target's address.
        d = Broker({"admin": {"role": "admin"}}, capacity=65536, broker_extra=f"""
[upstream]
broker = srv:silent.test
user = edge
key-file = {key}
""")
        brokers.append(d)
        since = time.monotonic()
        d.start()
        d.status()  # the first connection starts it (socket activation)
        wait_for("the broker's upstream thread asks for a target's address",
                 lambda: dns.asked_address(since), timeout=30,
                 detail=lambda: d.read_log()[-600:])
        time.sleep(0.5)  # well inside the look-up: glibc waits 5 s for the first answer
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        try:
            d.proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        took = time.monotonic() - t0
        print(f"# the broker with [upstream] srv:silent.test stopped {took:.2f} s after SIGTERM")
        ok = d.proc.poll() is not None and took <= 2.0
        check(ok, f"it stops within 2 s of SIGTERM ({took:.2f} s)" +
              ("" if ok else f":\n{d.read_log()[-600:]}"))
    finally:
        for b in brokers:
            b.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


def test():
    if inner_run():
        inner()
        return
    need("ip")
    need_root("for a network and mount namespace (unshare --net --mount)")
    # The same test, inside the namespaces; its output is this test's.
    rerun_unshared(net=True, timeout=300)


if __name__ == "__main__":
    main(test)
