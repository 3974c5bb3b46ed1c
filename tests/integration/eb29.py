# SPDX-License-Identifier: MIT
"""Entropy Broker 2.9 (Debian's entropybroker package) as an EGD server: its broker fed by
eb_server_linux_kernel, with eb_client_egd serving EGD on a unix socket and on TCP. Debian has no
stand-alone EGD server (ekeyd needs its USB key; ekeyd-egd-linux is a client), and eb_client_egd
is a complete one: it answers 0x00, 0x01 and 0x02. test-source-egd and test-claims read it."""
import os
import re
import shutil
import socket
import subprocess
import time

from eblib import reserve_port, tcp_listening

EB_PROGRAMS = ("entropy_broker", "eb_server_linux_kernel", "eb_client_egd")


class OldBroker:
    """Entropy Broker 2.9's broker, a kernel server feeding it, and its EGD client-server."""

    def __init__(self, tmp):
        self.tmp = os.path.join(tmp, "eb29")
        os.mkdir(self.tmp)
        self.holders = []
        self.port, self.web, self.egd_port = (self.reserve() for _ in range(3))
        self.sock = os.path.join(self.tmp, "egd.sock")
        with open("/etc/entropybroker/entropy_broker.conf") as f:
            conf = f.read()
        # It binds IPv6 sockets: an IPv4 address needs the mapped form.
        for key, value in [("listen_adapter", "::FFFF:127.0.0.1"), ("listen_port", self.port),
                           ("webserver_interface", "::FFFF:127.0.0.1"),
                           ("webserver_port", self.web),
                           ("users", os.path.join(self.tmp, "users.txt")),
                           # Its default serves a client 4096 bits per second.
                           ("default_max_get_bps", 100000000)]:
            conf = re.sub(rf"(?m)^{key}\s*=.*$", f"{key} = {value}", conf)
        self.conf = os.path.join(self.tmp, "entropy_broker.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        for name, text in [("users.txt", "test|testpassword1234\n"),
                           ("auth.txt", "test\ntestpassword1234\n")]:
            fd = os.open(os.path.join(self.tmp, name), os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, text.encode())
            os.close(fd)
        self.procs = []

    def spawn(self, *cmd):
        log = open(os.path.join(self.tmp, os.path.basename(cmd[0]) + ".out"), "wb")
        self.procs.append(subprocess.Popen(list(cmd), stdout=log, stderr=log,
                                           stdin=subprocess.DEVNULL, cwd=self.tmp))

    def start(self):
        auth = os.path.join(self.tmp, "auth.txt")
        self.spawn("entropy_broker", "-c", self.conf, "-n", "-L", "0")
        # Its peers connect once at start: they come when it listens, not after a guess.
        deadline = time.monotonic() + 10
        while not tcp_listening(self.port):
            if time.monotonic() >= deadline or self.procs[0].poll() is not None:
                raise RuntimeError("Entropy Broker 2.9's broker did not listen on port "
                                   f"{self.port} within 10 s (exit {self.procs[0].poll()})")
            time.sleep(0.05)
        peer = f"127.0.0.1:{self.port}"
        self.spawn("eb_server_linux_kernel", "-I", peer, "-X", auth, "-n", "-L", "0")
        self.spawn("eb_client_egd", "-I", peer, "-X", auth, "-d", self.sock, "-n", "-L", "0")
        self.spawn("eb_client_egd", "-I", peer, "-X", auth, "-t", "::FFFF:127.0.0.1", "-T",
                   str(self.egd_port), "-n", "-L", "0")
        deadline = time.time() + 10
        while time.time() < deadline:
            if os.path.exists(self.sock) and self.tcp_up():
                return
            time.sleep(0.1)
        raise RuntimeError("Entropy Broker 2.9's EGD server did not come up: " +
                           " ".join(p.args[0] + "=" + str(p.poll()) for p in self.procs))

    def tcp_up(self):
        try:
            socket.create_connection(("127.0.0.1", self.egd_port), timeout=1).close()
            return True
        except OSError:
            return False

    def reserve(self):
        holder, port = reserve_port()
        self.holders.append(holder)
        return port

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for h in self.holders:
            h.close()


def missing():
    """What this machine lacks to run it, or None."""
    absent = [p for p in EB_PROGRAMS if shutil.which(p) is None]
    if not os.path.exists("/etc/entropybroker/entropy_broker.conf"):
        absent.append("/etc/entropybroker/entropy_broker.conf")
    return ", ".join(absent) or None
