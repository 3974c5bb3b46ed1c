# SPDX-License-Identifier: MIT
"""Helpers for the hostile-peer attack tests: a broker with the legitimate clients every attack
must leave served (a TLS source, a TLS sink, a unix sink, an admin), the broker's CPU time,
memory and log lines measured over the attack window, and raw TLS records for attackers.

Attackers bind 127.0.0.2 and legitimate clients connect from 127.0.0.1, so per-address limits
tell them apart. Everything goes to loopback only.

EB_ATTACK_PRE_FIX=1 leaves out of the configuration the keys that only the hardened broker
knows (hello-timeout-sec, max-handshakes, ...), so that an attack can be run against a broker
that predates them and show the defect itself instead of an "unknown key" refusal."""

import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))

import eblib  # noqa: E402
from eblib import (MSG, ROLE_ADMIN, ROLE_SINK, ROLE_SOURCE, SKIP, Broker,  # noqa: E402,F401
                   Failure, Raw, check, need_root, prog, wait_for)

ATTACKER = "127.0.0.2"
LEGIT_BOUND_MS = 10000  # generous: CI is a loaded two-core machine
CPU_BOUND = 0.60  # of one core, averaged over the attack window
CPU_WINDOW_S = 5.0
PRE_FIX = os.environ.get("EB_ATTACK_PRE_FIX") == "1"
CLK_TCK = os.sysconf("SC_CLK_TCK")

# The legitimate users every attack test configures.
LEGIT_USERS = {
    "src": {"role": "source", "max-credit-per-byte": 8},
    "sink": {"role": "sink"},
    "admin": {"role": "admin"},
    "local": {"role": "sink,admin", "unix-uid": os.getuid(), "key": False},
}


def sanitized():
    """Whether the build under test has AddressSanitizer (its allocator keeps freed memory in
    quarantine and adds shadow memory: memory bounds are scaled for it)."""
    import json
    try:
        with open(os.path.join(eblib.BUILD, "meson-info", "intro-buildoptions.json")) as f:
            for o in json.load(f):
                if o["name"] == "b_sanitize":
                    return "address" in str(o["value"])
    except (OSError, ValueError, KeyError):
        pass
    return False


SANITIZED = sanitized()
if SANITIZED:
    # Freed memory held back to catch use after free would read as growth: a small quarantine.
    os.environ["ASAN_OPTIONS"] = ":".join(
        filter(None, [os.environ.get("ASAN_OPTIONS", ""), "quarantine_size_mb=16"]))


def start_broker(users=None, extra="", new_keys="", prime_bytes=64 * 1024, user_keys=None,
                 **kw):
    """A socket-activated broker, started for real (systemd-socket-activate runs eb-brokerd at
    the first connection) and ready, its pool primed with prime_bytes x 8 bits (half of the
    default capacity: sinks are served at once, sources are not yet told to rest).
    new_keys: [broker] lines only the hardened broker knows; user_keys: {user: lines} the same
    for [user] sections."""
    lines = extra.strip().splitlines()
    if new_keys.strip():
        if PRE_FIX:
            print(f"# EB_ATTACK_PRE_FIX=1: leaving out {new_keys.strip().splitlines()}")
        else:
            lines += new_keys.strip().splitlines()
    all_users = dict(LEGIT_USERS)
    all_users.update(users or {})
    b = Broker(all_users, broker_extra="\n".join(lines), **kw)
    for name, more in (user_keys or {}).items():
        if PRE_FIX:
            print(f"# EB_ATTACK_PRE_FIX=1: leaving out {more.strip().splitlines()} of {name}")
            continue
        with open(b.conf) as f:
            text = f.read()
        head = f"[user {name}]\n"
        check(head in text, f"the configuration has {head.strip()}")
        text = text.replace(head, head + more.strip() + "\n")
        with open(b.conf, "w") as f:
            f.write(text)
    b.start()
    try:
        wake(b)
        if prime_bytes:
            data = os.path.join(b.tmp, "prime")
            with open(data, "wb") as f:
                f.write(os.urandom(prime_bytes))
            p = eblib.donate(b, "src", data)
            check(p.returncode == 0,
                  "the pool is primed" + ("" if p.returncode == 0 else
                                          ": " + p.stderr.decode(errors="replace")))
    except BaseException:
        b.cleanup()
        raise
    return b


def wake(b, timeout=10):
    """Makes systemd-socket-activate exec the broker (a connection that says nothing), then
    waits until it is eb-brokerd and says it is ready."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(b.sock)
    s.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if broker_comm(b) == "eb-brokerd" and "Broker ready" in b.read_log():
            return
        if not b.alive():
            break
        time.sleep(0.02)
    raise Failure("the broker did not get ready: " + b.read_log()[-2000:])


def broker_comm(b):
    try:
        with open(f"/proc/{b.proc.pid}/comm") as f:
            return f.read().strip()
    except (FileNotFoundError, ProcessLookupError, AttributeError):
        return ""


def cpu_seconds(pid):
    """utime + stime of pid, in seconds (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def legit_line(line):
    """Whether a broker log line is about a legitimate client or the pool, not the attack."""
    return any(n in line for n in ("127.0.0.1:", "user src ", "user sink ", "user admin ",
                                   "user local ", "Pool ", "(user local)", "(user sink)",
                                   "(user src)", "(user admin)"))


class Window:
    """The attack window: the broker's CPU time, RSS and log from begin() to end()."""

    def __init__(self, b, attack):
        self.b = b
        self.attack = attack
        self.pid = b.proc.pid

    def begin(self):
        self.t0 = time.monotonic()
        self.cpu0 = cpu_seconds(self.pid)
        self.rss0 = rss_kib(self.pid)
        self.log0 = len(self.b.read_log())
        self.rss_max = self.rss0
        return self

    def sample(self):
        if self.b.alive():
            self.rss_max = max(self.rss_max, rss_kib(self.pid))

    def end(self, min_window=CPU_WINDOW_S):
        # The CPU average needs a window of at least min_window seconds; a short attack is
        # measured on until then (the broker should be idle again by then if it is fixed).
        while time.monotonic() - self.t0 < min_window and self.b.alive():
            self.sample()
            time.sleep(0.1)
        self.t1 = time.monotonic()
        self.cpu1 = cpu_seconds(self.pid) if self.b.alive() else self.cpu0
        self.sample()
        self.rss1 = rss_kib(self.pid) if self.b.alive() else self.rss0
        return self

    def check_cpu(self, bound=CPU_BOUND):
        secs = self.t1 - self.t0
        share = (self.cpu1 - self.cpu0) / secs
        print(f"# broker CPU under {self.attack}: {self.cpu1 - self.cpu0:.2f} s in {secs:.1f} s "
              f"({share * 100:.0f}% of one core)")
        expect(share < bound, f"the broker's CPU under {self.attack} stays below "
              f"{bound * 100:.0f}% of one core ({share * 100:.0f}% over {secs:.1f} s)")

    def check_rss(self, max_growth_kib):
        if SANITIZED:
            max_growth_kib = max_growth_kib * 2 + 32 * 1024  # shadow memory and quarantine
        growth = self.rss_max - self.rss0
        print(f"# broker VmRSS under {self.attack}: {self.rss0} KiB -> max {self.rss_max} KiB "
              f"(+{growth} KiB)")
        expect(growth < max_growth_kib, f"the broker's VmRSS grows by less than "
              f"{max_growth_kib} KiB under {self.attack} (+{growth} KiB)")

    def attack_lines(self):
        new = self.b.read_log()[self.log0:]
        return [l for l in new.splitlines() if l.strip() and not legit_line(l)]

    def check_log(self, bound):
        lines = self.attack_lines()
        kinds = {}
        for l in lines:
            key = re.sub(r"\d+", "N", l)[:90]
            kinds[key] = kinds.get(key, 0) + 1
        top = sorted(kinds.items(), key=lambda kv: -kv[1])[:4]
        print(f"# broker log lines caused by {self.attack}: {len(lines)}; most common: {top}")
        expect(len(lines) < bound,
              f"the broker logs fewer than {bound} lines for {self.attack} ({len(lines)})")


class Legit:
    """The legitimate clients: a TLS source, a TLS sink, a unix sink and an admin."""

    def __init__(self, b):
        self.b = b
        self.data = os.path.join(b.tmp, "legit-noise")
        with open(self.data, "wb") as f:
            # 576 bits a round, the block one 32-byte sink takes, so the pool stays near its
            # prime, clear of both water marks: the start-up test's 1024 samples go uncredited
            # (eb-source-file(1)), then 72 bytes at 8 bits. With 256 bytes alone no round
            # credited anything, and a thousand rounds of sinks emptied the primed pool.
            f.write(os.urandom(1024 + 72))
        self.latencies = {}

    def clients(self, which=None):
        b = self.b
        tls_sink = [prog("eb-sink-file"), "-b", b.tcp, "-u", "sink", "-k", b.keys["sink"],
                    "--bytes", "32", "--timeout", "20"]
        unix_sink = [prog("eb-sink-file"), "-b", b.unix, "--bytes", "32", "--timeout", "20"]
        source = [prog("eb-source-file"), "-b", b.tcp, "-u", "src", "-k", b.keys["src"],
                  "--credit-per-byte=8", "--max-credit-per-byte=8", self.data]
        status = [prog("eb-brokerctl"), "-b", b.tcp, "-u", "admin", "-k", b.keys["admin"],
                  "status", "--json"]
        all_ = {"source-tls": (source, 0), "sink-tls": (tls_sink, 32),
                "sink-unix": (unix_sink, 32), "admin-status": (status, None)}
        return {k: v for k, v in all_.items() if which is None or k in which}

    def round(self, attack, which=None, bound_ms=LEGIT_BOUND_MS, must=True):
        """Runs the clients at once, each timed; checks each was served within bound_ms."""
        results = {}

        def one(name, cmd, want):
            t = time.monotonic()
            try:
                p = subprocess.run(cmd, capture_output=True, timeout=bound_ms / 1000 + 10)
                ok = p.returncode == 0 and (want is None or len(p.stdout) == want)
                err = (p.stderr.decode(errors="replace").strip().splitlines() or [""])[-1]
            except subprocess.TimeoutExpired:
                ok, err = False, "timed out"
            results[name] = (ok, (time.monotonic() - t) * 1000, err)

        threads = [threading.Thread(target=one, args=(n, c, w))
                   for n, (c, w) in self.clients(which).items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for name, (ok, ms, err) in sorted(results.items()):
            print(f"latency {name} under {attack}: {ms:.0f} ms")
            self.latencies.setdefault(name, []).append(ms)
        for name, (ok, ms, err) in sorted(results.items()):
            if must:
                expect(ok and ms < bound_ms, f"{name} is served within {bound_ms} ms under "
                      f"{attack} ({ms:.0f} ms{'' if ok else ', failed: ' + err})")
        return all(ok and ms < bound_ms for ok, ms, _ in results.values())

    def summary(self, attack):
        for name, v in sorted(self.latencies.items()):
            print(f"# {name} under {attack}: {len(v)} runs, max {max(v):.0f} ms")


def attacker_socket(family=socket.AF_INET, timeout=5):
    """A TCP socket bound to the attacker's address."""
    s = socket.socket(family, socket.SOCK_STREAM)
    s.bind((ATTACKER, 0))
    s.settimeout(timeout)
    return s


def attacker_connect(b, timeout=5):
    s = attacker_socket(timeout=timeout)
    s.connect(("127.0.0.1", b.port))
    return s


def wait_closed(s, timeout):
    """Waits until the peer closes s (EOF or reset); returns the seconds it took, or None."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    while time.monotonic() < deadline:
        s.settimeout(max(0.01, min(0.5, deadline - time.monotonic())))
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - t0
        if not data:
            return time.monotonic() - t0
    return None


def legit_during(t, legit, w, attack, every=1.0, which=None):
    """Legitimate rounds, one every `every` seconds, for as long as the attacker thread t
    runs (at least one)."""
    while True:
        legit.round(attack, which=which)
        w.sample()
        t.join(every)
        if not t.is_alive():
            return


def run_attacker(fn, *args):
    """Runs an attacker in a thread; returns the thread and a dict for what it reports."""
    report = {}

    def body():
        try:
            fn(report, *args)
        except BaseException as e:  # reported, not lost in the thread
            report["exception"] = repr(e)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, report


def tls_record(content_type, payload, version=0x0301):
    return struct.pack(">BHH", content_type, version, len(payload)) + payload


def client_hello(identities, binders, cipher=0x1302):
    """A TLS 1.3 ClientHello offering external PSKs: identities (bytes) with an obfuscated
    age of 0 each, binders (bytes each), pre_shared_key last as RFC 8446 4.2.11 requires.
    Returns the handshake message (not yet in records)."""

    def ext(t, body):
        return struct.pack(">HH", t, len(body)) + body

    supported_versions = ext(43, b"\x02\x03\x04")
    supported_groups = ext(10, struct.pack(">HH", 2, 0x001d))
    share = struct.pack(">HH", 0x001d, 32) + os.urandom(32)
    key_share = ext(51, struct.pack(">H", len(share)) + share)
    psk_modes = ext(45, b"\x01\x01")  # psk_dhe_ke
    ids = b"".join(struct.pack(">H", len(i)) + i + b"\0\0\0\0" for i in identities)
    bnd = b"".join(bytes([len(x)]) + x for x in binders)
    psk = ext(41, struct.pack(">H", len(ids)) + ids + struct.pack(">H", len(bnd)) + bnd)
    exts = supported_versions + supported_groups + key_share + psk_modes + psk
    body = (b"\x03\x03" + os.urandom(32) + b"\x20" + os.urandom(32) +
            struct.pack(">HH", 2, cipher) + b"\x01\x00" + struct.pack(">H", len(exts)) + exts)
    return b"\x01" + len(body).to_bytes(3, "big") + body


def handshake_records(msg, size=16384):
    """A handshake message split over as many records as it takes."""
    return b"".join(tls_record(0x16, msg[i:i + size]) for i in range(0, len(msg), size))


FAILED = []


def expect(cond, what):
    """A check that does not stop the test: every broken promise of an attack is reported,
    not only the first; main() fails the test if any was."""
    if cond:
        print(f"ok - {what}")
    else:
        print(f"not ok - {what}")
        FAILED.append(what)
    return cond


def main(test):
    def run():
        test()
        if FAILED:
            raise Failure(f"{len(FAILED)} check(s) failed: " + "; ".join(FAILED))

    eblib.main(run)


def frame(mtype, payload=b""):
    return struct.pack(">BBHI", MSG[mtype], 0, 0, len(payload)) + payload


class HostileBroker:
    """A broker that is the attacker: it speaks just enough of the protocol over a unix socket to
    take a client's HELLO (WELCOME), then misbehaves in one way (mode):
      zero-data    every GET answered by DATA of 0 bytes
      long-data    every GET answered by DATA 8 times longer than asked (up to 64 KiB)
      zeros        every GET answered in full with zero bytes, claimed at 8 bits a byte
      periodic     every GET answered in full, claimed at 8 bits a byte, with the next bytes of
                   x -> 5x + 1 mod 256 (period 256: every value twice in 512)
      wake-flood   WAKE frames without end from WELCOME on; GETs never answered
      wake-trickle a WAKE every 100 ms from WELCOME on, each within any timeout; GETs never
                   answered
      error-storm  every GET answered by ERROR(INTERNAL), then the connection closed
    No TLS: the client code under attack (reading frames, judging answers, waiting) is the same
    for every transport, and a unix socket needs no key. Counts what the clients did."""

    def __init__(self, path, mode):
        self.path, self.mode = path, mode
        self.connections = self.gets = self.wakes = 0
        self.x = 0  # the periodic mode's last byte
        self.lock = threading.Lock()
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.bind(path)
        os.chmod(path, 0o666)
        self.s.listen(64)
        self.conns = []
        threading.Thread(target=self.serve, daemon=True).start()

    @property
    def uri(self):
        return "unix:" + self.path

    def count(self, what):
        with self.lock:
            return getattr(self, what)

    def serve(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            self.conns.append(c)
            threading.Thread(target=self.session, args=(c,), daemon=True).start()

    def flood(self, c):
        n = 1 if self.mode == "wake-trickle" else 256
        wake = frame("WAKE") * n
        try:
            while True:
                c.sendall(wake)
                with self.lock:
                    self.wakes += n
                if self.mode == "wake-trickle":
                    time.sleep(0.1)
        except OSError:
            return

    def session(self, c):
        try:
            while True:
                hdr = c.recv(8, socket.MSG_WAITALL)
                if len(hdr) < 8:
                    return
                t, _, _, n = struct.unpack(">BBHI", hdr)
                payload = c.recv(n, socket.MSG_WAITALL) if n else b""
                if t == MSG["HELLO"]:
                    body = struct.pack(">HBBIH", 1, ROLE_SINK | ROLE_SOURCE, 0, 65536, 7)
                    c.sendall(frame("WELCOME", body + b"hostile"))
                    if self.mode in ("wake-flood", "wake-trickle"):
                        threading.Thread(target=self.flood, args=(c,), daemon=True).start()
                    continue
                if t != MSG["GET"]:
                    continue
                with self.lock:
                    self.gets += 1
                asked = struct.unpack(">I", payload[:4])[0] // 8
                if self.mode == "zero-data":
                    c.sendall(frame("DATA", struct.pack(">II", 0, 0)))
                elif self.mode == "long-data":
                    k = min(asked * 8, 65536)
                    c.sendall(frame("DATA", struct.pack(">II", 8 * k, k) + os.urandom(k)))
                elif self.mode == "zeros":
                    c.sendall(frame("DATA", struct.pack(">II", 8 * asked, asked) +
                                    bytes(asked)))
                elif self.mode == "periodic":
                    out = bytearray(asked)
                    with self.lock:
                        for i in range(asked):
                            self.x = (5 * self.x + 1) % 256
                            out[i] = self.x
                    c.sendall(frame("DATA", struct.pack(">II", 8 * asked, asked) + bytes(out)))
                elif self.mode == "error-storm":
                    text = b"hostile"
                    c.sendall(frame("ERROR", struct.pack(">HH", 6, len(text)) + text))
                    c.close()
                    return
        except OSError:
            return

    def close(self):
        self.s.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()


def downstream(tmp, upstream_uri, draw_bits=65536):
    """A broker (started directly, not socket-activated, so that its pid is eb-brokerd's from the
    start) whose [upstream] is upstream_uri, empty, so that it draws at once."""
    b = Broker({"admin": {"role": "admin"}}, activate=False, tmp=tmp, broker_extra=f"""
[upstream]
broker = {upstream_uri}
low-water-percent = 50
draw-bits = {draw_bits}
""")
    return b.start()
