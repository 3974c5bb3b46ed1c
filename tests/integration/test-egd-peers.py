#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-sink-egd serves EGD clients that no one here wrote, from Debian's packages:
ekeyd-egd-linux (blocking 0x02 reads of 128 bytes over TCP, fed to the kernel with
RNDADDENTROPY) and Entropy Broker 2's eb_server_egd (non-blocking 0x01 reads over a unix
socket). The sink runs as eb-sink-egd.socket and eb-sink-egd-tcp.socket start it: socket-
activated, with the fd names the units give."""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

from eblib import (ME, SKIP, Broker, Failure, check, donate, main, need, need_root, prog,
                   reserve_port)


def counters(log):
    """The sink's closing line, as numbers."""
    m = re.search(r"served (\d+) bytes \((\d+) by blocking reads\) to (\d+) clients; requests: "
                  r"level (\d+), read (\d+), read-blocking (\d+)", log)
    if not m:
        return None
    keys = ("served", "blocking", "clients", "level", "read", "read_blocking")
    return dict(zip(keys, map(int, m.groups())))


SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def fd_name(unit):
    with open(os.path.join(SRC, "units", unit)) as f:
        return re.search(r"^FileDescriptorName=(\S+)$", f.read(), re.M).group(1)


class Sink:
    def __init__(self, b):
        need("systemd-socket-activate")
        self.path = os.path.join(b.tmp, "egd-pool")
        self.port_holder, self.port = reserve_port()
        self.log = os.path.join(b.tmp, "egd.log")
        self.logf = open(self.log, "wb")
        # The fd names the units give.
        names = fd_name("eb-sink-egd.socket") + ":" + fd_name("eb-sink-egd-tcp.socket")
        self.proc = subprocess.Popen(
            ["systemd-socket-activate", "-l", self.path, "-l", f"127.0.0.1:{self.port}",
             f"--fdname={names}", prog("eb-sink-egd"), "-v", "-b", b.unix],
            stdout=self.logf, stderr=self.logf, env=dict(os.environ, EB_LOG_TARGET="console"))
        # The path appears at bind(), before listen(): up once a PID request is answered.
        deadline = time.time() + 10
        while True:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(5)
                    s.connect(self.path)
                    s.sendall(b"\x04")
                    if s.recv(1):
                        break
            except OSError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                self.stop()
                raise Failure("eb-sink-egd did not come up")
            time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()
        self.port_holder.close()
        with open(self.log, errors="replace") as f:
            return self.proc.returncode, f.read()


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode


def ekeyd(b, sink):
    """ekeyd-egd-linux asks for data whenever /dev/random polls writable. Since Linux 5.18 it
    never does once the CRNG is ready, so the client would sit idle: it runs in a private mount
    namespace where /dev/random is /dev/urandom, the same kernel RNG and the same
    RNDADDENTROPY ioctl, whose poll always says writable, as /dev/random did on older kernels
    whenever the pool ran low."""
    exe = shutil.which("ekeyd-egd-linux") or "/usr/sbin/ekeyd-egd-linux"
    if not os.path.exists(exe):
        print("SKIP: ekeyd-egd-linux needs the ekeyd-egd-linux package")
        return False
    if os.geteuid() != 0 or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        print("SKIP: ekeyd-egd-linux needs root and a mount namespace (RNDADDENTROPY, /dev/random)")
        return False
    out = os.path.join(b.tmp, "ekeyd.log")
    with open(out, "wb") as f:
        p = subprocess.Popen(
            ["unshare", "-m", "sh", "-c",
             f"mount --bind /dev/urandom /dev/random && exec {exe} -H 127.0.0.1 -p {sink.port} -b 1"],
            stdout=f, stderr=subprocess.STDOUT)
    time.sleep(3)
    rc = stop(p)
    with open(out, errors="replace") as f:
        text = f.read()
    check(rc == -signal.SIGTERM, f"ekeyd-egd-linux ran until stopped ({rc}: {text.strip()[-200:]!r})")
    check("reconnecting" not in text, "and never lost its connection")
    return True


def eb_server_egd(b, sink):
    exe = shutil.which("eb_server_egd")
    if not exe:
        print("SKIP: eb_server_egd needs the entropybroker package")
        return False
    # It insists on credentials for a broker even when it writes to a file (-o) instead.
    auth = os.path.join(b.tmp, "eb-auth")
    with open(os.open(auth, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("nobody\nnothing\n")
    out = os.path.join(b.tmp, "eb-out")
    log = os.path.join(b.tmp, "eb_server_egd.log")
    # It runs until stopped, reading -a bytes every -b seconds.
    p = subprocess.Popen([exe, "-n", "-d", sink.path, "-o", out, "-a", "255", "-b", "1", "-L", "255",
                          "-l", log, "-X", auth], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3)
    rc = stop(p)
    with open(log, errors="replace") as f:
        text = f.read()
    reads = re.findall(r"Got (\d+) bytes from EGD", text)
    check(rc is not None and "FATAL" not in text, f"eb_server_egd ran until stopped ({rc}): {text[-1500:]!r}")
    check(len(reads) > 0 and sum(map(int, reads)) == os.path.getsize(out),
          f"it logs {len(reads)} reads from the EGD socket, {sum(map(int, reads))} bytes, all in its output")
    with open(out, "rb") as f:
        data = f.read()
    chunks = [data[i:i + 32] for i in range(0, len(data) - 31, 32)]
    check(len(data) >= 4096 and len(set(chunks)) == len(chunks),
          f"its {len(data)} bytes hold no repeated 32-byte block")
    return len(reads), len(data)


def test():
    # Both peers want root: ekeyd-egd-linux for RNDADDENTROPY and its mount namespace,
    # eb_server_egd for its PID file in /var/run.
    need_root("for the EGD peers (RNDADDENTROPY, a mount namespace, /var/run)")
    b = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                "local": {"role": "sink", "unix-uid": ME, "key": False}},
               capacity=8 * 1048576).start()
    try:
        noise = os.path.join(b.tmp, "noise")
        with open(noise, "wb") as f:
            f.write(os.urandom(512 * 1024))
        p = donate(b, "alice", noise)
        check(p.returncode == 0, "the broker is filled")

        sink = Sink(b)
        try:
            ran_ekeyd = ekeyd(b, sink)
        finally:
            rc, log = sink.stop()
        check(rc == 0, "eb-sink-egd exits 0")
        c = counters(log)
        check(c is not None, "it logs its counters")
        if ran_ekeyd:
            # The last read may have been cut short when ekeyd-egd-linux was stopped.
            n = c["read_blocking"]
            check(n > 0 and 128 * (n - 1) <= c["blocking"] <= 128 * n,
                  f"it served ekeyd-egd-linux {n} blocking reads of 128 bytes ({c['blocking']} bytes)")

        # ekeyd-egd-linux drank the pool dry: fill it again.
        with open(noise, "wb") as f:
            f.write(os.urandom(512 * 1024))
        p = donate(b, "alice", noise)
        check(p.returncode == 0, "the broker is filled again")
        sink = Sink(b)
        try:
            got = eb_server_egd(b, sink)
        finally:
            rc, log = sink.stop()
        check(rc == 0, "eb-sink-egd exits 0")
        c = counters(log)
        if got:
            n_reads, n_bytes = got
            check(c["read"] >= n_reads and c["served"] >= n_bytes,
                  f"its counters agree: {c['read']} non-blocking reads, {c['served']} bytes served")
        if not ran_ekeyd and not got:
            sys.exit(SKIP)
    finally:
        b.cleanup()


main(test)
