#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""proxy-protocol-from=: a listed balancer's PROXY header (v2 or v1) names the client in the
session tables, the log and the per-address limit (8 handshakes from one proxied address are
limited while another proxied address is served); a missing, malformed or oversized header, a
header from a peer not listed, and a header that never comes are each refused in one log line;
health checks (connect and close, a LOCAL header and close) log nothing above debug. Then real
HAProxy (mode tcp, send-proxy-v2, health checks) in front: a sink draws through it and the broker
names the sink's own address and port."""
import json
import os
import re
import select
import socket
import struct
import subprocess
import threading
import time

from eblib import (Broker, Failure, check, draw, main, need, prog, reserve_port, run, wait_for)

SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v2(src, sport, dst="127.0.0.1", dport=55225, cmd=0x21, fam=0x11):
    body = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack(">HH", sport, dport)
    return SIG + bytes([cmd, fam]) + struct.pack(">H", len(body)) + body


def v1(src, sport, dst="127.0.0.1", dport=55225):
    return f"PROXY TCP4 {src} {dst} {sport} {dport}\r\n".encode()


class Relay:
    """A load balancer of our own: each connection to it goes on to the broker behind a PROXY
    header naming (src, sport); sport 0 takes the client's own port."""

    def __init__(self, broker_port, src, sport=0, version=2):
        self.lst = socket.socket()
        self.lst.bind(("127.0.0.1", 0))
        self.lst.listen(16)
        self.port = self.lst.getsockname()[1]
        self.uri = f"tcp://127.0.0.1:{self.port}"
        self.args = (broker_port, src, sport, version)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, addr = self.lst.accept()
            except OSError:
                return
            threading.Thread(target=self.pump, args=(c, addr), daemon=True).start()

    def pump(self, c, addr):
        broker_port, src, sport, version = self.args
        u = socket.create_connection(("127.0.0.1", broker_port))
        make = v2 if version == 2 else v1
        u.sendall(make(src, sport or addr[1], dport=broker_port))
        try:
            while True:
                r, _, _ = select.select([c, u], [], [])
                for s in r:
                    d = s.recv(65536)
                    if not d:
                        return
                    (u if s is c else c).sendall(d)
        except OSError:
            pass
        finally:
            c.close()
            u.close()


def ctl_json(b, uri, what):
    p = run([prog("eb-brokerctl"), "-b", uri, "-u", "admin", "-k", b.keys["admin"], what,
             "--json"], check=True)
    return json.loads(p.stdout)[what]


def new_lines(b, before, needle):
    return [l for l in b.read_log()[len(before):].splitlines() if needle in l]


def one_line(b, before, needle, what):
    wait_for(f"{what}: a log line with '{needle}'", lambda: new_lines(b, before, needle),
             timeout=20, detail=lambda: b.read_log()[len(before):][-2000:])
    time.sleep(0.2)  # a second line, if there were one, would come right behind the first
    lines = new_lines(b, before, needle)
    check(len(lines) == 1, f"{what}: one log line (got {len(lines)}: {lines})")
    return lines[0]


def connect(b, src="127.0.0.1"):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", b.port))
    return s


def closed_by_broker(s):
    s.settimeout(20)
    try:
        return s.recv(100) == b""
    except ConnectionResetError:
        return True


def tables_and_log(b):
    """A source through a v2 balancer and a sink through a v1 one: both named by the sent
    address in the tables and the log, the balancer after them."""
    src_relay = Relay(b.port, "192.0.2.77", 4242)
    adm_relay = Relay(b.port, "192.0.2.99")
    sink_relay = Relay(b.port, "198.51.100.5", 5555, version=1)
    source = subprocess.Popen([prog("eb-source-file"), "-b", src_relay.uri, "-u", "alice", "-k",
                               b.keys["alice"], "--credit-per-byte=8", "-"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        source.stdin.write(os.urandom(64 * 1024))
        source.stdin.flush()
        rows = wait_for("the source shows in eb-brokerctl sources",
                        lambda: ctl_json(b, adm_relay.uri, "sources"), timeout=30)
        check(rows[0]["peer"].endswith("192.0.2.77:4242 via 127.0.0.1"),
              f"the sources table names the proxied client: {rows[0]['peer']}")
        check("192.0.2.77:4242 via 127.0.0.1: user alice connected" in b.read_log(),
              "the log names the proxied client")
        p = draw(b, "bob", 512, uri=sink_relay.uri)
        check(p.returncode == 0 and len(p.stdout) == 512, "a sink draws through a v1 balancer")
        check("198.51.100.5:5555 via 127.0.0.1" in b.read_log(),
              "the log names the client a v1 header sent")
    finally:
        source.stdin.close()
        source.kill()
        source.wait()


def per_address(b):
    """max-handshakes-per-address (8) counts the proxied address: the 9th from 203.0.113.8 is
    refused while 203.0.113.9 is served."""
    before = b.read_log()
    held = []
    try:
        for i in range(8):
            s = connect(b)
            s.sendall(v2("203.0.113.8", 1000 + i, dport=b.port))
            held.append(s)
        wait_for("the 8 handshakes from 203.0.113.8 are under way",
                 lambda: len(new_lines(b, before, "Accepted")) >= 8, timeout=20)
        s = connect(b)
        s.sendall(v2("203.0.113.8", 2000, dport=b.port))
        held.append(s)
        line = one_line(b, before, "max-handshakes-per-address reached",
                        "the 9th from one proxied address")
        check("203.0.113.8:2000 via 127.0.0.1" in line, f"the refusal names the client: {line}")
        check(closed_by_broker(s), "the 9th connection is closed")
        other = Relay(b.port, "203.0.113.9")
        p = draw(b, "bob", 64, uri=other.uri)
        check(p.returncode == 0, "another proxied address is served meanwhile: "
              + p.stderr.decode(errors="replace"))
    finally:
        for s in held:
            s.close()


def refusals(b):
    hello = b"\x16\x03\x01\x00\x05hello"
    cases = [
        ("no header", lambda: hello, "no PROXY protocol header, or a malformed one"),
        ("malformed", lambda: SIG + b"\x31\x11\x00\x00", "no PROXY protocol header, or a malformed one"),
        ("oversized", lambda: SIG + b"\x21\x11\x02\x09", "longer than 536 bytes"),
        ("bad v1", lambda: b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", "a malformed one"),
    ]
    for what, data, needle in cases:
        before = b.read_log()
        s = connect(b)
        port = s.getsockname()[1]
        s.sendall(data())
        line = one_line(b, before, needle, what)
        check(f"127.0.0.1:{port}" in line and "proxy-protocol-from=" in line,
              f"{what}: the line names the balancer and what to set: {line}")
        check(closed_by_broker(s), f"{what}: the connection is closed")
        s.close()
    # A peer not listed (127.0.0.2) that sends a header fails its TLS handshake, and is told.
    for what, header in (("v2", v2("192.0.2.1", 1)), ("v1", v1("192.0.2.1", 1))):
        before = b.read_log()
        s = connect(b, "127.0.0.2")
        s.sendall(header + hello)
        line = one_line(b, before, "it sent a PROXY protocol header, but is not in proxy-protocol-from=",
                        f"a {what} header from a peer not listed")
        check("127.0.0.2" in line, f"the line names the peer: {line}")
        s.close()


def timeouts(b):
    """hello-timeout-sec = 1 here: a balancer that sends nothing, and one that stops partway."""
    for what, data, needle in (("nothing", b"", "no PROXY protocol header in time"),
                               ("partway", SIG[:7], "incomplete in time")):
        before = b.read_log()
        s = connect(b)
        if data:
            s.sendall(data)
        one_line(b, before, needle, what)
        check(closed_by_broker(s), f"{what}: the connection is closed")
        s.close()


def health_checks(b):
    before = b.read_log()
    for _ in range(30):
        connect(b).close()
        s = connect(b)
        s.sendall(SIG + b"\x20\x00\x00\x00")
        s.close()
    # The last LOCAL check has been seen once the broker logged it at debug level.
    wait_for("the health checks were handled", lambda: len(new_lines(b, before, "PROXY LOCAL health check")) >= 30,
             timeout=20)
    noise = [l for l in b.read_log()[len(before):].splitlines()
             if "Refusing" in l or "closed during the TLS handshake" in l or "held back" in l]
    check(not noise, f"health checks log nothing above debug: {noise[:3]}")


HAPROXY_CFG = """global
    log stdout format raw local0 info
defaults
    mode tcp
    log global
    option tcplog
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend eb
    bind 127.0.0.1:{front}
    default_backend brokers
backend brokers
    server broker 127.0.0.1:{broker} send-proxy-v2 check inter 200ms
"""


def haproxy(b):
    need("haproxy")
    holder, front = reserve_port()
    holder.close()
    cfg = os.path.join(b.tmp, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write(HAPROXY_CFG.format(front=front, broker=b.port))
    before = b.read_log()
    log = open(os.path.join(b.tmp, "haproxy.log"), "wb")
    ha = subprocess.Popen(["haproxy", "-db", "-f", cfg], stdout=log, stderr=log)
    try:
        p = wait_for("a sink draws through HAProxy",
                     lambda: (lambda q: q if q.returncode == 0 else None)(
                         draw(b, "bob", 256, uri=f"tcp://127.0.0.1:{front}")), timeout=30)
        check(len(p.stdout) == 256, "the sink got its bytes through HAProxy")
        # The sink's own port, as HAProxy logged the client it took: only the header can tell
        # the broker that one.
        # HAProxy logs a connection as it ends, tries it could not pass on included.
        def named():
            ports = re.findall(rb"^127\.0\.0\.1:(\d+) \[", open(log.name, "rb").read(), re.M)
            return [int(p) for p in ports
                    if f"Accepted tcp 127.0.0.1:{int(p)} via 127.0.0.1" in b.read_log()]
        wait_for("the broker names the sink's own address and port, as HAProxy logged them",
                 named, timeout=30, detail=lambda: str(new_lines(b, before, "Accepted")[-3:]))
        # HAProxy ends a check with a reset, which may beat the broker's accept(): each of
        # these three debug lines is a check that came and went.
        quiet = ("PROXY LOCAL health check", "closed before its PROXY header",
                 "gone before it was accepted")
        wait_for("HAProxy's health checks reach the broker", lambda: sum(
            len(new_lines(b, before, q)) for q in quiet) >= 3, timeout=30)
        noise = [l for l in b.read_log()[len(before):].splitlines() if "Refusing" in l]
        check(not noise, f"HAProxy's health checks log no refusal: {noise[:3]}")
    finally:
        ha.terminate()
        ha.wait()
        log.close()


def test():
    os.environ["EB_LOG_LEVEL"] = "debug"
    users = {"alice": {"role": "source"}, "bob": {"role": "sink"}, "admin": {"role": "admin"}}
    b = Broker(users, broker_extra="proxy-protocol-from = 127.0.0.1\nhello-timeout-sec = 60\n"
               "handshake-threads = 0").start()
    try:
        tables_and_log(b)
        per_address(b)
        refusals(b)
        health_checks(b)
        haproxy(b)
    finally:
        b.cleanup()
    b = Broker(users, broker_extra="proxy-protocol-from = 127.0.0.1\nhello-timeout-sec = 1").start()
    try:
        timeouts(b)
    finally:
        b.cleanup()


if __name__ == "__main__":
    main(test)
