#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The broker's agent (eb-brokerd-agent.socket(8)) read by a real HAProxy's agent-check, as
docs/fleet.md sets it up: an empty pool is DRAIN, a filled one UP with the level's weight, an
admin's drain is DRAIN until undrained, and a pool that emptied stays DRAIN until it is refilled
to the low water (the hysteresis), not as soon as it holds a block."""
import csv
import io
import os
import shutil
import socket
import subprocess
import time

from eblib import (SKIP, Broker, Failure, check, donate, draw, main, prog, reserve_port, run,
                   wait_for)

AGENT_INTER_MS = 500
# A change is seen by the next agent check: within a second at agent-inter 500ms, as
# eb-brokerd.service(8) says; the bound is 2.5 times that.
BOUND_S = 2.5


class HAProxy:
    def __init__(self, tmp, server, agent_port):
        self.sock = os.path.join(tmp, "haproxy.sock")
        self.cfg = os.path.join(tmp, "haproxy.cfg")
        self.hold, self.port = reserve_port()
        self.hold.close()
        with open(self.cfg, "w") as f:
            f.write(f"""global
    stats socket {self.sock} mode 600 level admin
defaults
    mode tcp
    timeout connect 2s
    timeout client 30s
    timeout server 30s
frontend entropy
    bind 127.0.0.1:{self.port}
    default_backend edges
backend edges
    server edge1 {server} weight 100 check inter 1s agent-check agent-port {agent_port} agent-inter {AGENT_INTER_MS}ms
""")
        self.log = open(os.path.join(tmp, "haproxy.log"), "wb")
        self.proc = subprocess.Popen(["haproxy", "-db", "-f", self.cfg], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        wait_for("HAProxy's stats socket", lambda: os.path.exists(self.sock), 20)

    def row(self):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(self.sock)
            s.sendall(b"show stat\n")
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        rows = csv.DictReader(io.StringIO(out.decode().lstrip("# ")))
        return next(r for r in rows if r["svname"] == "edge1")

    def status(self):
        """UP, DRAIN, MAINT...: HAProxy says "DRAIN (agent)" for the agent's drain."""
        return self.row()["status"].split()[0]

    def wait(self, status, what):
        """Waits for the server's status; returns how long it took, in seconds."""
        t0 = time.monotonic()
        wait_for(f"HAProxy sees edge1 {status} ({what})", lambda: self.status() == status,
                 BOUND_S, interval=0.05, detail=lambda: str(self.row()))
        return time.monotonic() - t0

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()


def test():
    if shutil.which("haproxy") is None:
        print("SKIP: needs Debian's haproxy (scripts/install-deps --test)")
        raise SystemExit(SKIP)
    ahold, aport = reserve_port()
    ahold.close()
    b = Broker({"src": {"role": "source"}, "sink": {"role": "sink"}, "admin": {"role": "admin"}},
               capacity=65536)
    b.extra_listen = [(f"127.0.0.1:{aport}", "agent")]
    b.start()
    data = os.path.join(b.tmp, "random")
    with open(data, "wb") as f:
        f.write(os.urandom(4096))
    small = os.path.join(b.tmp, "small")
    with open(small, "wb") as f:
        f.write(os.urandom(2048))  # its first 1024 bytes go to the source's start-up test
    h = None
    try:
        # The agent speaks first, before any session: one line, then the close.
        with socket.create_connection(("127.0.0.1", aport), timeout=10) as s:
            line = s.makefile("rb").read()
        check(line == b"drain\n", f"an empty broker's agent says {line!r}")

        h = HAProxy(b.tmp, f"127.0.0.1:{b.port}", aport)
        h.wait("DRAIN", "the pool is empty")

        donate(b, "src", data)
        pct = b.status()["fill_percent"]
        t = h.wait("UP", "filled")
        w = int(h.row()["weight"])
        check(abs(w - pct) <= 2, f"edge1's weight {w} is the fill level {pct}%")
        print(f"# filled to {pct}%: UP after {t:.2f} s, weight {w}")

        run([prog("eb-brokerctl"), "-b", b.tcp, "-u", "admin", "-k", b.keys["admin"], "drain"],
            check=True)
        t = h.wait("DRAIN", "eb-brokerctl drain")
        print(f"# eb-brokerctl drain: DRAIN after {t:.2f} s (bound {BOUND_S} s)")
        run([prog("eb-brokerctl"), "-b", b.tcp, "-u", "admin", "-k", b.keys["admin"],
             "undrain"], check=True)
        t = h.wait("UP", "eb-brokerctl undrain")
        print(f"# eb-brokerctl undrain: UP after {t:.2f} s")

        # Drawn empty: DRAIN; a little in (above empty, below the low water): still DRAIN.
        draw(b, "sink", 8192, extra=["--timeout", "3"])
        t = h.wait("DRAIN", "drawn empty")
        print(f"# drawn empty: DRAIN after {t:.2f} s")
        donate(b, "src", small)
        st = b.status()
        check(0 < st["pool_bits"] < 65536 // 4, f"a little in: {st['pool_bits']} bits")
        time.sleep(4 * AGENT_INTER_MS / 1000)  # the checks that must not undrain it
        check(h.status() == "DRAIN",
              f"still DRAIN at {st['fill_percent']}%, below the low water (no flapping)")
        donate(b, "src", data)
        t = h.wait("UP", "refilled past the low water")
        print(f"# refilled to {b.status()['fill_percent']}%: UP after {t:.2f} s")
        log = b.read_log()
        check('Agent: telling load balancers "drain" (the pool is empty)' in log and
              'Agent: telling load balancers "drain" (drained by an admin)' in log,
              "the journal says what the balancers are told, and why")
    finally:
        if h:
            h.stop()
        b.cleanup()


if __name__ == "__main__":
    main(test)
