# SPDX-License-Identifier: MIT
"""A client that cannot reach its broker says so, without -v: one warning naming the broker and
the reason, not one a retry, then "Connected to X after N s" once the broker answers; STATUS=
says "Not connected: REASON", then "Connected to X". Errors point the right way: a name that
does not resolve is a resolver failure, another service on the port (an HTTP server, a unix peer
that sends garbage) is "not an entropy broker", and a refused key stays a refusal. A sink
waiting on an empty pool says so once (and when it is served again); a source says when it
rests because the broker is full, and when it resumes."""

import os
import signal
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

from eblib import (Broker, Failure, check, closed_port, donate, draw, main, prog, wait_for,
                   write_key)


class Notify:
    """A NOTIFY_SOCKET, as systemd gives a service."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind(path)
        self.s.settimeout(0.2)
        self.msgs = []

    def wait_for(self, text, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in m for m in self.msgs):
                return True
            try:
                self.msgs.append(self.s.recv(4096).decode())
            except socket.timeout:
                pass
        return any(text in m for m in self.msgs)


class Client:
    """A client program run in the background, its stderr in a file."""

    def __init__(self, tmp, name, args, env=None):
        self.err = os.path.join(tmp, f"{name}-{time.monotonic_ns()}.err")
        with open(self.err, "wb") as f:
            self.p = subprocess.Popen([prog(name), *args], stdout=subprocess.DEVNULL, stderr=f,
                                      env=dict(os.environ, **(env or {})))

    def text(self):
        with open(self.err, errors="replace") as f:
            return f.read()

    def lines(self, what):
        return [l for l in self.text().splitlines() if what in l]

    def wait(self, what, timeout=15):
        return wait_for(what, lambda: self.lines(what), timeout=timeout)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def garbage_peer(path):
    """A unix socket whose peer answers anything with bytes that are no frame."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(8)

    def serve():
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            try:
                c.recv(4096)
                c.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n" + b"\xff" * 64)
            except OSError:
                pass
    threading.Thread(target=serve, daemon=True).start()
    return s


class Http(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test():
    b = Broker({"src": {"role": "source", "max-credit-per-byte": 8}, "sink": {"role": "sink"}})
    tmp = b.tmp
    holder, port = closed_port()
    clients, brokers = [], []
    try:
        # 1. Nothing listens: a source and two sinks each warn once, naming the address and
        # the reason, and keep retrying (several attempts within the window, one line).
        uri = f"tcp://127.0.0.1:{port}"
        notify = Notify(os.path.join(tmp, "notify"))
        src = Client(tmp, "eb-source-kernel", ["-b", uri, "-u", "src", "-k", b.keys["src"]],
                     {"NOTIFY_SOCKET": os.path.join(tmp, "notify")})
        sink = Client(tmp, "eb-sink-file", ["-b", uri, "-u", "sink", "-k", b.keys["sink"],
                                            "--bytes", "64", "-o", os.path.join(tmp, "out")])
        ksink = Client(tmp, "eb-sink-kernel", ["-b", uri, "-u", "sink", "-k", b.keys["sink"],
                                               "--oneshot", "--timeout", "30"])
        clients += [src, sink, ksink]
        want = f"Cannot reach a broker: cannot connect to {uri}: Connection refused"
        for c, name in ((src, "eb-source-kernel"), (sink, "eb-sink-file"),
                        (ksink, "eb-sink-kernel")):
            check(c.wait(want), f"{name} warns that it cannot reach {uri}: {c.text()!r}")
        check(notify.wait_for(f"STATUS=Not connected: cannot connect to {uri}", 10),
              f"the source's STATUS= says it is not connected ({notify.msgs})")
        # Backoff from 100 ms: 3 s hold several attempts, and still a single line each.
        time.sleep(3)
        for c, name in ((src, "eb-source-kernel"), (sink, "eb-sink-file"),
                        (ksink, "eb-sink-kernel")):
            n = len(c.lines("Cannot reach a broker")) + len(c.lines("Still no broker"))
            check(n == 1, f"{name}: one warning for the outage so far, not one a retry ({n})")
        src.stop()
        sink.stop()
        ksink.stop()

        # 2. The broker comes up late: "Connected to X after N s" and STATUS= says so.
        src = Client(tmp, "eb-source-kernel", ["-b", b.tcp, "-u", "src", "-k", b.keys["src"]],
                     {"NOTIFY_SOCKET": os.path.join(tmp, "notify")})
        clients.append(src)
        check(src.wait(f"Cannot reach a broker: cannot connect to {b.tcp}"),
              f"before the broker starts, the source warns ({src.text()!r})")
        notify.msgs.clear()
        b.start()
        check(src.wait(f"Connected to {b.tcp} after", 45),
              f"once the broker is up, the source says it is connected ({src.text()!r})")
        check(notify.wait_for(f"STATUS=Connected to {b.tcp}", 10),
              f"and STATUS= says so ({notify.msgs})")
        src.stop()

        # 3. A name that does not resolve: the resolver's words, not "No route to host".
        c = Client(tmp, "eb-sink-file", ["-b", "tcp://broker.invalid", "-u", "sink", "-k",
                                         b.keys["sink"], "--bytes", "8", "--timeout", "3"])
        clients.append(c)
        c.p.wait(20)
        t = c.text()
        check("cannot resolve broker.invalid: " in t and "No route to host" not in t,
              f"a name that does not resolve is said to be one ({t!r})")

        # 4. An HTTP server on the port (as eb-metrics would be): not an entropy broker, and
        # not "refused user".
        httpd = HTTPServer(("127.0.0.1", 0), Http)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        huri = f"tcp://127.0.0.1:{httpd.server_address[1]}"
        c = Client(tmp, "eb-sink-file", ["-b", huri, "-u", "sink", "-k", b.keys["sink"],
                                         "--bytes", "8", "--timeout", "3"])
        clients.append(c)
        c.p.wait(20)
        t = c.text()
        check(f"not an entropy broker at {huri} (" in t and "refused" not in t,
              f"an HTTP server is not an entropy broker, and no refusal ({t!r})")
        httpd.shutdown()

        # 5. A unix peer that answers HELLO with garbage.
        gpath = os.path.join(tmp, "garbage.sock")
        g = garbage_peer(gpath)
        c = Client(tmp, "eb-sink-file", ["-b", "unix:" + gpath, "--bytes", "8",
                                         "--timeout", "3"])
        clients.append(c)
        c.p.wait(20)
        t = c.text()
        check(f"not an entropy broker at unix:{gpath} (" in t,
              f"a unix peer that speaks something else is not an entropy broker ({t!r})")
        g.close()

        # 6. A wrong key at a real broker stays a refusal, and is final (no retries).
        bad = os.path.join(tmp, "bad.key")
        write_key(bad)
        log0 = len(b.read_log())
        t0 = time.monotonic()
        c = Client(tmp, "eb-sink-file", ["-b", b.tcp, "-u", "sink", "-k", bad, "--bytes", "8",
                                         "--timeout", "10"])
        clients.append(c)
        c.p.wait(20)
        took = time.monotonic() - t0
        t = c.text()
        check(c.p.returncode != 0 and 'refused user "sink" or its key' in t and
              "not an entropy broker" not in t,
              f"a wrong key is a refusal, not another service ({t!r})")
        # Final: one handshake, and the client gives up at once, not at its 10 s timeout. The
        # broker logs each wrong-key handshake (and 20 a kind before it suppresses any).
        tries = b.read_log()[log0:].count('wrong key for user "sink"')
        check(tries == 1, f"a refused key is final: one handshake, no retries ({tries})")
        check(took < 5, f"and the client gives up at once, not at its 10 s timeout ({took:.1f} s)")
        # 7. A sink on an empty pool: one notice that it waits, one when it is served.
        b2 = Broker({"src": {"role": "source", "max-credit-per-byte": 8},
                     "sink": {"role": "sink"}}, capacity=131072).start()
        brokers.append(b2)
        c = Client(tmp, "eb-sink-file", ["-b", b2.tcp, "-u", "sink", "-k", b2.keys["sink"],
                                         "--bytes", "1024", "-o", os.path.join(tmp, "out2")])
        clients.append(c)
        check(c.wait(f"Waiting for broker {b2.tcp}: its pool is empty"),
              f"a sink on an empty pool says it waits, without -v ({c.text()!r})")
        time.sleep(2)  # EMPTY every 250 ms: several answers, still one line
        n = len(c.lines("aiting for broker"))
        check(n == 1, f"one line for the wait so far, not one an answer ({n})")
        data = os.path.join(tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(8192))
        check(donate(b2, "src", data).returncode == 0,
              "a source fills the pool")
        check(c.wait(f"Served by {b2.tcp} again after"),
              f"the sink says it is served again ({c.text()!r})")
        c.p.wait(20)
        check(c.p.returncode == 0, "and gets its bytes")

        # 8. A source into a full pool rests, says so, and says when it resumes.
        c = Client(tmp, "eb-source-kernel", ["-b", b2.tcp, "-u", "src", "-k", b2.keys["src"],
                                             "--credit-per-byte", "8"])
        clients.append(c)
        check(c.wait(f"Broker {b2.tcp} is full (SLEEP); resting", 30),
              f"a source into a full pool says it rests, without -v ({c.text()!r})")
        p = draw(b2, "sink", 14000)
        check(p.returncode == 0, "a sink drains the pool below its low water")
        check(c.wait(f"Broker {b2.tcp} wants data again; resuming after", 30),
              f"the source says it resumes ({c.text()!r})")
    finally:
        for c in clients:
            c.stop()
        holder.close()
        for x in [b] + brokers:
            x.stop()
            x.cleanup()


if __name__ == "__main__":
    main(test)
