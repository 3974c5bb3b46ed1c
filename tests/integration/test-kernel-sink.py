#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-sink-kernel against a live broker, with the kernel doubled (eb-sink-kernel-seam records
every ioctl, see tests/seam-kernel.c): --oneshot credits exactly the bits the broker vouched for
and nothing when it vouched for less, then forces a reseed exactly when the CRNG was already
initialised on 5.18+ and says which case it was; --timeout holds whatever the broker does; --ready-timeout sends READY=1 at its bound while the
seeding goes on; persistent mode
seeds, says READY, mixes and forces a reseed on schedule and after a resume, and before 5.18
refills on the watermark instead."""
import os
import signal
import socket
import struct
import subprocess
import threading
import time

from eblib import BUILD, MSG, Broker, check, donate, main, prog, run


def seam():
    return os.path.join(BUILD, "tests", "eb-sink-kernel-seam")


def ioctls(path):
    """The recorded calls: [(ms, name, {field: int})]."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            ms, name, *rest = line.split()
            fields = dict(kv.split("=") for kv in rest if "=" in kv)
            out.append((int(ms), name, {k: int(v) for k, v in fields.items()}))
    return out


def adds(calls):
    return [(c["entropy_count"], c["buf_size"]) for _, n, c in calls if n == "RNDADDENTROPY"]


def sink(log, *args, env=None, timeout=60):
    e = dict(os.environ, EB_SEAM_LOG=log, **(env or {}))
    if os.path.exists(log):
        os.unlink(log)
    t0 = time.monotonic()
    p = run([seam(), *args], env=e, timeout=timeout)
    return p, time.monotonic() - t0


class FakeBroker:
    """Speaks just enough of the protocol over unix to misbehave: answers each GET with
    answer(bits) -> frame bytes, or never answers at all (answer None)."""

    def __init__(self, path, answer, welcome=True):
        self.path, self.answer, self.welcome = path, answer, welcome
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.bind(path)
        self.s.listen(8)
        self.conns = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self.session, args=(c,), daemon=True).start()

    def session(self, c):
        try:
            while True:
                hdr = c.recv(8, socket.MSG_WAITALL)
                if len(hdr) < 8:
                    return
                t, _, _, n = struct.unpack(">BBHI", hdr)
                payload = c.recv(n, socket.MSG_WAITALL) if n else b""
                if t == MSG["HELLO"] and self.welcome:
                    body = struct.pack(">HBBIH", 1, 2, 0, 65536, 4) + b"fake"
                    c.sendall(struct.pack(">BBHI", MSG["WELCOME"], 0, 0, len(body)) + body)
                elif t == MSG["GET"] and self.answer:
                    bits = struct.unpack(">I", payload[:4])[0]
                    c.sendall(self.answer(bits))
        except OSError:
            return

    def close(self):
        self.s.close()
        for c in self.conns:
            c.close()


def data(bits, nbytes):
    body = struct.pack(">II", bits, nbytes) + os.urandom(nbytes)
    return struct.pack(">BBHI", MSG["DATA"], 0, 0, len(body)) + body


def empty(_):
    body = struct.pack(">I", 100)
    return struct.pack(">BBHI", MSG["EMPTY"], 0, 0, len(body)) + body


class Notify:
    """A NOTIFY_SOCKET, as systemd gives a Type=notify service."""

    def __init__(self, path):
        self.path = path
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind(path)
        self.s.settimeout(0.2)
        self.msgs = []

    def drain(self):
        while True:
            try:
                self.msgs.append(self.s.recv(4096).decode())
            except socket.timeout:
                return self.msgs

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


def persistent(b, log, args, env, notify_path):
    e = dict(os.environ, EB_SEAM_LOG=log, NOTIFY_SOCKET=notify_path, **env)
    return subprocess.Popen([seam(), "-b", b.unix, *args], env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    return err.decode(errors="replace")


def test():
    b = Broker({
        "alice": {"role": "source"},
        "bob": {"role": "sink"},
        "admin": {"role": "admin"},
        "local": {"role": "sink", "unix-uid": os.getuid(), "key": False},
    }).start()
    fakes = []
    try:
        log = os.path.join(b.tmp, "ioctl.log")

        # An empty pool first: the sink waits, gives up at --timeout, credits nothing.
        p, took = sink(log, "-b", b.unix, "--oneshot", "--timeout", "2")
        check(p.returncode == 1, f"--oneshot against an empty pool exits 1 ({p.returncode})")
        check(1.5 < took < 4, f"... at its --timeout of 2 s (took {took:.1f} s)")
        check(adds(ioctls(log)) == [], "... having called RNDADDENTROPY not once")

        noise = os.path.join(b.tmp, "noise")
        with open(noise, "wb") as f:
            f.write(os.urandom(64 * 1024))
        check(donate(b, "alice", noise).returncode == 0, "a source fills the pool")

        st0 = b.status()
        p, took = sink(log, "-b", b.unix, "--oneshot", "-v")
        err = p.stderr.decode(errors="replace")
        check(p.returncode == 0, f"--oneshot over unix exits 0 ({err.strip()[-300:]})")
        check(adds(ioctls(log)) == [(256, 32)],
              f"it made one RNDADDENTROPY: entropy_count=256, buf_size=32 ({ioctls(log)})")
        check([n for _, n, _ in ioctls(log) if n != "RNDGETENTCNT"] ==
              ["RNDADDENTROPY", "RNDRESEEDCRNG"],
              f"the kernel was initialised (5.18+): one RNDRESEEDCRNG after it ({ioctls(log)})")
        check(b.status()["bits_out"] - st0["bits_out"] == 256,
              "the broker delivered exactly the 256 bits credited")
        check("Credited 256 bits from unix:" in err and
              "was already initialised; forced a CRNG reseed (RNDRESEEDCRNG)" in err,
              f"it logs what it credited, from where, and that it forced the reseed ({err.strip()[-300:]})")
        check(" ms, " in err and "after boot" in err, "and how long seeding took")

        # A kernel not yet initialised (12 bits counted): the 256 credited bits initialise it,
        # and no reseed is asked for; the kernel's own init reseed took them.
        p, _ = sink(log, "-b", b.unix, "--oneshot",
                    env={"EB_SEAM_CRNG_FROM_COUNT": "1", "EB_SEAM_ENTCNT": "12"})
        err = p.stderr.decode(errors="replace")
        check(p.returncode == 0 and adds(ioctls(log)) == [(256, 32)] and
              "RNDRESEEDCRNG" not in [n for _, n, _ in ioctls(log)],
              f"before init: one RNDADDENTROPY and no RNDRESEEDCRNG ({ioctls(log)})")
        check("Kernel RNG not yet initialised" in err and
              "was not initialised before them and is now" in err,
              f"... and it says it credited the kernel before it was initialised ({err.strip()[-300:]})")
        # Too few bits to initialise it: said as plainly.
        p, _ = sink(log, "-b", b.unix, "--oneshot", "--bits", "64",
                    env={"EB_SEAM_CRNG_FROM_COUNT": "1", "EB_SEAM_ENTCNT": "12"})
        err = p.stderr.decode(errors="replace")
        check(p.returncode == 0 and "still is not (it needs 256 credited bits)" in err and
              "RNDRESEEDCRNG" not in [n for _, n, _ in ioctls(log)],
              f"64 bits leave it uninitialised, and it says so ({err.strip()[-200:]})")
        # Initialised, before 5.18: nothing forced, and the log says when the bits are used.
        p, _ = sink(log, "-b", b.unix, "--oneshot", env={"EB_SEAM_RELEASE": "5.15.0-91-generic"})
        err = p.stderr.decode(errors="replace")
        check(p.returncode == 0 and "RNDRESEEDCRNG" not in [n for _, n, _ in ioctls(log)] and
              "takes them in at its next scheduled reseed" in err,
              f"before 5.18 no RNDRESEEDCRNG; the log says the CRNG's own reseed takes them ({err.strip()[-200:]})")

        p, _ = sink(log, "-b", b.tcp, "-u", "bob", "-k", b.keys["bob"], "--oneshot",
                    "--bits", "1024")
        check(p.returncode == 0 and adds(ioctls(log)) == [(1024, 128)],
              f"over TLS, --bits 1024 credits 1024 bits of 128 bytes ({ioctls(log)})")

        # As a VM's boot unit runs it: the broker from $EB_BROKER, the user and key from the
        # credentials eb.user and eb.key (what the hypervisor hands the guest).
        creds = os.path.join(b.tmp, "creds")
        os.makedirs(creds)
        with open(b.keys["bob"]) as f:
            key = f.read()
        for name, text in (("eb.key", key), ("eb.user", "bob\n")):
            fd = os.open(os.path.join(creds, name), os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, text.encode())
            os.close(fd)
        p, _ = sink(log, "--oneshot", env={"EB_BROKER": b.tcp, "CREDENTIALS_DIRECTORY": creds})
        check(p.returncode == 0 and adds(ioctls(log)) == [(256, 32)],
              f"$EB_BROKER with the credentials eb.user and eb.key seeds over TLS "
              f"({p.stderr.decode(errors='replace').strip()[-200:]})")
        with open(os.path.join(creds, "eb.user"), "w") as f:
            f.write("b o b\n")
        p, _ = sink(log, "--oneshot", env={"EB_BROKER": b.tcp, "CREDENTIALS_DIRECTORY": creds})
        check(p.returncode == 2 and "eb.user" in p.stderr.decode(),
              "a malformed eb.user credential is a configuration error (exit 2)")

        p, _ = sink(log, "-b", b.unix, "--oneshot", env={"EB_SEAM_ERRNO": "1"})
        err = p.stderr.decode(errors="replace")
        check(p.returncode == 1 and "RNDADDENTROPY" in err and "not permitted" in err,
              f"without CAP_SYS_ADMIN (EPERM) it exits 1 and says why ({err.strip()[-200:]})")

        for bad in (["--bits", "12"], ["--bits", "0"], ["--bits", "8192"], ["--timeout", "0"],
                    ["--interval", "5"]):
            p, _ = sink(log, "-b", b.unix, "--oneshot", *bad)
            check(p.returncode == 2, f"--oneshot {' '.join(bad)} is a usage error (exit 2)")
        p, _ = sink(log, "-b", b.unix, "--timeout", "5")
        check(p.returncode == 2, "--timeout without --oneshot is a usage error (exit 2)")

        # A broker that sends bytes it does not vouch for: mixed in, never credited.
        fake = os.path.join(b.tmp, "short.sock")
        fakes.append(FakeBroker(fake, lambda bits: data(bits - 8, bits // 8)))
        p, took = sink(log, "-b", "unix:" + fake, "--oneshot", "--timeout", "2")
        a = adds(ioctls(log))
        check(p.returncode == 1, f"a broker vouching for less than it sends: exit 1 ({took:.1f} s)")
        check(a and all(count == 0 for count, _ in a),
              f"... its bytes were mixed in with entropy_count=0, every time ({a})")
        check("vouched for only 248 bits of the 32 bytes" in p.stderr.decode(),
              "... and it says so")

        # A partial answer that vouches for every byte it has is credited; the rest is asked
        # for again.
        fake = os.path.join(b.tmp, "half.sock")
        fakes.append(FakeBroker(fake, lambda bits: data(max(bits // 2, 8), max(bits // 16, 1))))
        p, _ = sink(log, "-b", "unix:" + fake, "--oneshot")
        check(p.returncode == 0 and adds(ioctls(log)) == [(128, 16), (64, 8), (32, 4), (16, 2),
                                                          (8, 1), (8, 1)],
              f"partial answers are credited as vouched, and the rest drawn ({adds(ioctls(log))})")

        # Hung brokers: one that never says WELCOME, one that never answers a GET. Boot goes on.
        for what, welcome in (("never says WELCOME", False), ("never answers a GET", True)):
            fake = os.path.join(b.tmp, f"hung-{welcome}.sock")
            fakes.append(FakeBroker(fake, None, welcome=welcome))
            p, took = sink(log, "-b", "unix:" + fake, "--oneshot", "--timeout", "2")
            check(p.returncode == 1 and took < 3.5 and adds(ioctls(log)) == [],
                  f"a broker that {what}: exit 1 in {took:.1f} s, nothing credited")

        # A dead broker listed first: the sink fails over to the live one.
        p, _ = sink(log, "-b", "unix:" + os.path.join(b.tmp, "nobody.sock"), "-b", b.unix,
                    "--oneshot", "--timeout", "5")
        check(p.returncode == 0 and adds(ioctls(log)) == [(256, 32)],
              "with a dead broker first, --oneshot seeds from the second")

        # No broker at all: it gives up by itself just before --timeout, in one line that says
        # why, rather than meeting the hard limit.
        p, took = sink(log, "-b", "unix:" + os.path.join(b.tmp, "nobody.sock"), "--oneshot",
                       "--timeout", "2")
        err = p.stderr.decode(errors="replace")
        lines = [l for l in err.splitlines() if "giving up" in l]
        check(p.returncode == 1 and took < 2.5 and len(lines) == 1 and
              "Cannot reach a broker: cannot connect to unix:" in lines[0] and
              "giving up with 0 of 256 bits credited" in lines[0],
              f"with no broker it exits 1 in {took:.1f} s with one line saying why ({lines})")

        # --ready-timeout (the boot seeders' units are Type=notify): READY=1 once the bound
        # passes, whatever the seeding is blocked in (here the HELLO a hung broker never
        # answers), while it goes on to --timeout and gives up in one line; READY=1 with the
        # seed when the seed comes first.
        notify = os.path.join(b.tmp, "notify")
        n = Notify(notify)
        hung = os.path.join(b.tmp, "hung-False.sock")
        t0 = time.monotonic()
        proc = subprocess.Popen([seam(), "-b", "unix:" + hung, "--oneshot", "--timeout", "4",
                                 "--ready-timeout", "1"],
                                env=dict(os.environ, EB_SEAM_LOG=log, NOTIFY_SOCKET=notify),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        ready = n.wait_for("READY=1", 10)
        took_ready = time.monotonic() - t0
        running = proc.poll() is None
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
        err = err.decode(errors="replace")
        check(ready and 0.9 <= took_ready < 2.5 and running,
              f"--ready-timeout 1 with a hung broker: READY=1 after {took_ready:.1f} s, the "
              f"seeder still running ({running})")
        check(any("READY=1" in m and "STATUS=Not seeded within 1 s; boot goes on, still trying "
                  "unix:" + hung in m for m in n.msgs),
              f"... with a STATUS= that says it goes on ({n.drain()})")
        check(proc.returncode == 1 and 3 <= took < 5 and
              len([l for l in err.splitlines() if "giving up" in l]) == 1,
              f"... and it gave up at --timeout 4 ({took:.1f} s, exit {proc.returncode}) in one line")
        n.msgs.clear()
        t0 = time.monotonic()
        proc = subprocess.Popen([seam(), "-b", b.unix, "--oneshot", "--ready-timeout", "5"],
                                env=dict(os.environ, EB_SEAM_LOG=log, NOTIFY_SOCKET=notify),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
        msgs = n.drain()
        readies = [m for m in msgs if "READY=1" in m]
        check(proc.returncode == 0 and took < 5 and len(readies) == 1 and
              readies[0].startswith("READY=1\nSTATUS=Seeded with 256 bits from unix:"),
              f"--ready-timeout 5 with a live broker: READY=1 with the seed, once ({msgs}, "
              f"{took:.1f} s)")
        p, _ = sink(log, "-b", b.unix, "--ready-timeout", "2")
        check(p.returncode == 2, "--ready-timeout without --oneshot is a usage error (exit 2)")
        n.msgs.clear()

        # Persistent mode on 5.18+: seed, READY, then a mix and a forced reseed each interval.
        if os.path.exists(log):
            os.unlink(log)
        proc = persistent(b, log, ["--interval", "1"], {}, notify)
        ready = n.wait_for("READY=1", 10)
        calls_at_ready = ioctls(log)
        time.sleep(3.6)
        err = stop(proc)
        calls = ioctls(log)
        check(ready, "persistent mode sends READY=1")
        check(adds(calls_at_ready)[:1] == [(256, 32)], "... once the first seed was in")
        check(any(m.startswith("READY=1") and "STATUS=Seeded with 256 bits" in m for m in n.msgs),
              f"... with a STATUS= line ({n.msgs[:1]})")
        names = [c[1] for c in calls]
        check(names[:2] == ["RNDADDENTROPY", "RNDRESEEDCRNG"],
              f"the first seed is followed by a forced reseed ({names[:4]})")
        reseeds = [ms for ms, name, _ in calls if name == "RNDRESEEDCRNG"]
        check(len(reseeds) >= 3, f"--interval 1: {len(reseeds)} reseeds in about 3.6 s")
        gaps = [b2 - a2 for a2, b2 in zip(reseeds, reseeds[1:])]
        check(all(900 <= g <= 1600 for g in gaps), f"... about a second apart ({gaps} ms)")
        check(all(x == (256, 32) for x in adds(calls)), "every mix credits the 256 vouched bits")
        check(names == ["RNDADDENTROPY", "RNDRESEEDCRNG"] * (len(names) // 2),
              "each mix is followed by exactly one reseed")
        check(any("STATUS=" in m and "mixes since the seed" in m for m in n.drain()),
              "STATUS= is updated after each mix")

        # A resume from suspend (CLOCK_BOOTTIME jumps an hour past CLOCK_MONOTONIC): a mix and
        # a reseed within the 10 s resume check, long before the hour's interval.
        os.unlink(log)
        proc = persistent(b, log, ["--interval", "3600"], {"EB_SEAM_SUSPEND_AT_MS": "1000"},
                          notify)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(adds(ioctls(log))) < 2:
            time.sleep(0.2)
        err = stop(proc)
        calls = ioctls(log)
        check([c[1] for c in calls] == ["RNDADDENTROPY", "RNDRESEEDCRNG"] * 2,
              f"after a resume it mixes and reseeds again ({[c[1] for c in calls]})")
        check(calls[2][0] <= 12000, f"... {calls[2][0]} ms after start (the check runs every 10 s)")
        check("Resumed after 3600" in err, "... and logs the resume")

        # Before 5.18: no RNDRESEEDCRNG; refill on POLLOUT with what the pool lacks.
        os.unlink(log)
        proc = persistent(b, log, ["--interval", "3600"],
                          {"EB_SEAM_RELEASE": "5.10.0", "EB_SEAM_ENTCNT": "-300"}, notify)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(adds(ioctls(log))) < 3:
            time.sleep(0.2)
        time.sleep(0.5)
        stop(proc)
        calls = ioctls(log)
        check(not any(name == "RNDRESEEDCRNG" for _, name, _ in calls),
              "before 5.18 it forces no reseed")
        # poolsize here is 256: the seed (256) leaves the doubled count at -44; the refills
        # bring 256 (the count read as 0) and then 64 (44 lacking, at least 64), and stop at 276.
        check(adds(calls) == [(256, 32), (256, 32), (64, 8)],
              f"... and refills on the watermark until the pool is full ({adds(calls)})")
    finally:
        for f in fakes:
            f.close()
        b.cleanup()


main(test)
