#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-source-egd against a real EGD server from Debian's packages: the original Entropy Broker's
(package entropybroker) entropy_broker fed by eb_server_linux_kernel, with eb_client_egd serving
EGD on a unix socket and on TCP. Debian has no stand-alone EGD server (ekeyd needs its USB key;
ekeyd-egd-linux is a client), and eb_client_egd is a complete one: it answers 0x00, 0x01 and 0x02.
Both read modes are used (0x02 over unix, 0x01 over TCP), and what was read is credited. A small
server here breaks the protocol on purpose (more bytes than asked for) to show the ceiling holds."""
import os
import re
import socket
import threading

from eb29 import OldBroker, missing
from eblib import ME, SKIP, Broker, check, main, need_root, prog, run


def bad_server(path):
    """An EGD server that answers 0x00 and then, for 0x01 N, claims N + 1 bytes."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)

    def serve():
        c, _ = srv.accept()
        with c:
            while True:
                try:
                    cmd = c.recv(1)
                except OSError:
                    return
                if not cmd:
                    return
                if cmd == b"\x00":
                    c.sendall((4096).to_bytes(4, "big"))
                elif cmd == b"\x01":
                    n = c.recv(1)[0]
                    c.sendall(bytes([min(n + 1, 255)]) + os.urandom(min(n + 1, 255)))

    threading.Thread(target=serve, daemon=True).start()
    return srv


def credited(stderr):
    m = re.search(r"(\d+) bits credited of (\d+) claimed", stderr)
    return int(m.group(1)) if m else None


def test():
    absent = missing()
    if absent:
        print(f"SKIP: needs Debian's entropybroker package ({absent})")
        raise SystemExit(SKIP)
    # Entropy Broker 2.9's daemons write their PID files to /var/run.
    need_root("for Entropy Broker 2.9's PID files in /var/run")
    b = Broker({"admin": {"role": "admin"},
                "local": {"role": "source", "unix-uid": ME, "key": False}},
               capacity=64 * 1024 * 1024).start()
    old = OldBroker(b.tmp)
    try:
        old.start()
        check(True, f"Entropy Broker 2.9 serves EGD on {old.sock} and 127.0.0.1:{old.egd_port}")

        dump = os.path.join(b.tmp, "dump")
        p = run([prog("eb-source-egd"), "-b", b.unix, "--samples", "16384", "--dump-raw", dump,
                 old.sock], timeout=60)
        err = p.stderr.decode()
        check(p.returncode == 0, f"eb-source-egd reads {old.sock} with 0x02 and exits 0 ({err[-300:]})")
        check(re.search(r"EGD server \S+ has \d+ bits available", err) is not None,
              "the level query (0x00) is answered first")
        c = credited(err)
        check(c == (16384 - 1024) * 4, f"16384 samples at H = 4, the start-up test's 1024 uncredited: {c} bits")
        check(os.path.getsize(dump) == 16384, "--dump-raw holds the 16384 samples")
        check(b.wait_log(f"egd {old.sock}"), "HELLO names the source egd PATH")

        p = run([prog("eb-source-egd"), "-b", b.unix, "--nonblocking", "--min-entropy", "2",
                 "--samples", "8192", f"tcp://127.0.0.1:{old.egd_port}"], timeout=60)
        err = p.stderr.decode()
        c = credited(err)
        check(p.returncode == 0 and c == (8192 - 1024) * 2,
              f"over TCP with 0x01 (non-blocking reads, backing off when empty): {c} bits ({err[-200:]})")

        st = b.status()
        check(st["bits_in"] == (16384 - 1024) * 4 + (8192 - 1024) * 2,
              f"the broker credited exactly that ({st['bits_in']} bits)")

        bad = os.path.join(b.tmp, "bad.sock")
        srv = bad_server(bad)
        p = run([prog("eb-source-egd"), "-b", b.unix, "--nonblocking", "--samples", "100", bad],
                timeout=30)
        srv.close()
        check(p.returncode == 1 and "sent 101 bytes for a request of 100" in p.stderr.decode(),
              f"a server that sends more than was asked for is refused ({p.stderr.decode().strip()[-120:]})")

        p = run([prog("eb-source-egd"), "-b", b.unix, os.path.join(b.tmp, "nothing.sock")])
        check(p.returncode == 1, "no server at the address: exit 1")
        p = run([prog("eb-source-egd"), "-b", b.unix, "no-port-here"])
        check(p.returncode == 2, "an address that is neither a path nor HOST:PORT: exit 2")
    finally:
        old.stop()
        b.cleanup()


main(test)
