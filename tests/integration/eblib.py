# SPDX-License-Identifier: MIT
"""Helpers for the integration tests: a broker under systemd-socket-activate, keys, clients,
and a raw protocol client for the unix socket (to send what our own clients never would)."""

import json
import re
import os
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

BUILD = os.environ.get("EB_BUILD_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", "build"))
SKIP = 77

MSG = {"HELLO": 1, "WELCOME": 2, "PUT": 3, "PUT_ACK": 4, "GET": 5, "DATA": 6, "EMPTY": 7,
       "SLEEP": 8, "WAKE": 9, "QUOTA": 10, "ERROR": 11, "STATUS_REQ": 12, "STATUS": 13,
       "REPORT_REQ": 14, "REPORT": 15}
ROLE_SOURCE, ROLE_SINK, ROLE_ADMIN = 1, 2, 4
# The uid the tests run as: a broker maps it (unix-uid) to the user its local clients are.
ME = os.getuid()


def prog(name):
    for sub in ("daemon", "sources", "sinks", "tools"):
        p = os.path.join(BUILD, sub, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(name)


def reserve_port():
    """A TCP port on 127.0.0.1 kept for the caller, so that tests can run side by side: a socket
    bound to it with SO_REUSEADDR that never listens. A server that binds the port with
    SO_REUSEADDR too (systemd-socket-activate, eb-brokerd, Go's and most daemons' listeners) can
    listen on it; any other bind() fails, and the kernel picks it neither for bind(0) nor for a
    connect(). Returns (socket, port); the port is the caller's until it closes the socket.
    (systemd-socket-activate refuses port 0, so the port cannot simply be read back.)"""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    return s, s.getsockname()[1]


def closed_port():
    """A TCP port on 127.0.0.1 where connections are refused, and stay refused while the returned
    socket is open: it is bound without SO_REUSEADDR and never listens, so nobody else can
    listen there. Returns (socket, port)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    return s, s.getsockname()[1]


def need(tool):
    if shutil.which(tool) is None:
        print(f"SKIP: needs {tool}")
        sys.exit(SKIP)


def need_root(what):
    """Skips the test (exit 77, saying what it needed) unless it runs as root. Raised as SystemExit,
    so that the test's finally: clauses still stop what it started."""
    if os.geteuid() != 0:
        print(f"SKIP: needs root {what}")
        sys.exit(SKIP)


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)
    print(f"ok - {what}")


class Broker:
    """A broker started the way systemd starts it: socket-activated, with named fds."""

    def __init__(self, users, broker_extra="", activate=True, tmp=None, capacity=1048576,
                 keys=None):
        """keys: {user: key file} to reuse instead of writing new ones, so that two brokers
        know a user by the same key (another Broker's .keys, for failover tests)."""
        need("systemd-socket-activate")
        self.tmp = tmp or tempfile.mkdtemp(prefix="eb-it-")
        # Raw clients connect as other uids; they must reach the socket to be refused by it.
        os.chmod(self.tmp, 0o755)
        # Held for the broker's whole life, restarts included: tests run in parallel.
        self.port_holder, self.port = reserve_port()
        self.sock = os.path.join(self.tmp, "broker.sock")
        self.log = os.path.join(self.tmp, "broker.log")
        self.seed = os.path.join(self.tmp, "seed")
        self.keys = {}
        self.activate = activate
        conf = ["[broker]", f"capacity-bits = {capacity}", f"seed-file = {self.seed}",
                "status-interval-sec = 3600"]
        conf += [l for l in broker_extra.strip().splitlines() if l.strip()]
        for name, u in users.items():
            conf.append(f"[user {name}]")
            conf.append(f"role = {u['role']}")
            if u.get("key", True):
                path = (keys or {}).get(name)
                if not path:
                    path = os.path.join(self.tmp, f"{name}.key")
                    write_key(path)
                self.keys[name] = path
                conf.append(f"key-file = {path}")
            for k in ("unix-uid", "unix-gid", "max-credit-per-byte", "quota-bits-per-hour",
                      "max-sessions", "downstream-broker", "key-hash", "guest"):
                if k in u:
                    conf.append(f"{k} = {u[k]}")
        self.conf = os.path.join(self.tmp, "eb-brokerd.conf")
        with open(self.conf, "w") as f:
            f.write("\n".join(conf) + "\n")
        self.proc = None
        # A command the broker runs under, such as ["unshare", "-n"] (PrivateNetwork=yes).
        self.wrap = []
        # A command the activator runs under, such as ["ip", "netns", "exec", NAME]: its TCP
        # socket is then made in that network namespace (tests/integration/netnslib.py), on
        # .host, and .port may be any (55225 there).
        self.prefix = []
        self.host = "127.0.0.1"

    def start(self):
        env = dict(os.environ, EB_LOG_TARGET=getattr(self, "log_target", "console"))
        # The socket's appearance says the new broker (or its activator) listens: clear the
        # last one's first.
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.logf = open(self.log, "ab")
        if self.activate:
            # systemd-socket-activate passes on only the variables it is told to.
            # More sockets, as (address, name): an agent's (eb-brokerd-agent.socket).
            extra = getattr(self, "extra_listen", [])
            cmd = [*self.prefix, "systemd-socket-activate", "-l", f"{self.host}:{self.port}",
                   "-l", self.sock, *[a for addr, _ in extra for a in ("-l", addr)],
                   "--fdname=" + ":".join(["tcp", "unix", *[n for _, n in extra]]),
                   "-E", f"EB_LOG_TARGET={env['EB_LOG_TARGET']}"]
            for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "EB_LOG_LEVEL"):
                if var in env:
                    cmd += ["-E", f"{var}={env[var]}"]
            # What systemd would give the service (NOTIFY_SOCKET, WATCHDOG_USEC): set .env.
            for var, value in getattr(self, "env", {}).items():
                cmd += ["-E", f"{var}={value}"]
            cmd += [*self.wrap, prog("eb-brokerd"), "-c", self.conf]
        else:
            cmd = [*self.prefix, *self.wrap, prog("eb-brokerd"), "-c", self.conf, "-l",
                   f"tcp://{self.host}:{self.port}", "-l", f"unix:{self.sock}"]
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=self.logf, env=env)
        deadline = time.time() + 10
        # Listening, not merely bound: the socket file exists a moment before listen(), and a
        # probe connection would start a socket-activated broker early, so ask the kernel.
        while not (unix_listening(self.sock, self.proc.pid) and
                   tcp_listening(self.port, self.proc.pid)):
            if time.time() > deadline or self.proc.poll() is not None:
                raise Failure("broker did not come up: " + self.read_log())
            time.sleep(0.02)
        # As SocketMode=0666 in eb-brokerd.socket: any local peer may connect; the broker
        # decides by its uid who it is.
        os.chmod(self.sock, 0o666)
        return self

    @property
    def tcp(self):
        return f"tcp://{self.host}:{self.port}"

    @property
    def unix(self):
        return f"unix:{self.sock}"

    def read_log(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def wait_log(self, text, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if text in self.read_log():
                return True
            time.sleep(0.05)
        return False

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode if self.proc else None
        self.proc = None
        if getattr(self, "logf", None):
            self.logf.close()
        return rc

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def status(self, user="admin"):
        out = run([prog("eb-brokerctl"), "-b", self.tcp, "-u", user, "-k", self.keys[user],
                   "status", "--json"], check=True)
        return json.loads(out.stdout)

    def cleanup(self):
        self.stop(signal.SIGKILL)
        self.port_holder.close()
        # A sanitizer's report in the broker's log fails the test that ran it.
        report = re.search(r"((ERROR|WARNING): (Address|Thread|Leak)Sanitizer|runtime error:).*",
                           self.read_log())
        shutil.rmtree(self.tmp, ignore_errors=True)
        if report:
            raise Failure(f"the broker's log has a sanitizer report: {report.group(0)}")


def fake_program(bindir, name, body):
    """An sh script NAME in BINDIR (made if need be) whose body is BODY, and a copy of the
    environment whose PATH finds it before the real one: a stand-in for systemctl, say."""
    os.makedirs(bindir, exist_ok=True)
    path = os.path.join(bindir, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)
    return dict(os.environ, PATH=bindir + ":" + os.environ["PATH"])


def wait_for(what, cond, timeout=30, interval=0.1, detail=None):
    """Polls cond() until it returns something true, and returns that; fails the test, naming
    what, after timeout seconds (and what detail() says then, such as a log's tail). For the
    event a test waits on, instead of a fixed sleep."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    v = cond()
    check(v, f"{what} (waited {timeout} s)" + (f"; {detail()}" if detail and not v else ""))
    return v


def unix_listening(path, pid=None):
    """Whether a unix stream socket at path is listening (/proc/net/unix, flag __SO_ACCEPTCON);
    with pid, one made in the network namespace of that process."""
    try:
        f = open(f"/proc/{pid}/net/unix" if pid else "/proc/net/unix")
    except FileNotFoundError:
        return False
    with f:
        for line in f.readlines()[1:]:
            parts = line.split()
            if len(parts) >= 8 and parts[7] == path and int(parts[3], 16) & 0x10000:
                return True
    return False


def tcp_listening(port, pid=None):
    """Whether 127.0.0.1:port (or any address) is in state LISTEN (/proc/net/tcp{,6}); with pid,
    in the network namespace of that process."""
    net = f"/proc/{pid}/net" if pid else "/proc/net"
    for table in (f"{net}/tcp", f"{net}/tcp6"):
        try:
            with open(table) as f:
                for line in f.readlines()[1:]:
                    parts = line.split()
                    if int(parts[1].rsplit(":", 1)[1], 16) == port and parts[3] == "0A":
                        return True
        except FileNotFoundError:
            pass
    return False


def write_key(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")


def run(cmd, check=False, timeout=60, **kw):
    p = subprocess.run(cmd, capture_output=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise Failure(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.decode(errors='replace')}")
    return p


def donate(broker, user, data_path, credit=8, extra=(), uri=None):
    # A file is a low-trust source whose credit is capped at 1 bit per byte unless raised.
    return run([prog("eb-source-file"), "-b", uri or broker.tcp, "-u", user, "-k",
                broker.keys[user], f"--credit-per-byte={credit}",
                f"--max-credit-per-byte={credit}", *extra, data_path])


def brokerctl(broker, *args, user=None):
    """eb-brokerctl ARGS against broker: over its unix socket as the local admin, or with user
    over TCP as that user with its key. Fails naming the command and what it said; returns its
    standard output as text."""
    how = ["-b", broker.unix] if user is None else ["-b", broker.tcp, "-u", user, "-k",
                                                      broker.keys[user]]
    p = run([prog("eb-brokerctl"), *how, *args])
    if p.returncode != 0:
        raise Failure(f"eb-brokerctl {' '.join(args)} exited {p.returncode}: "
                      f"{p.stderr.decode(errors='replace').strip()[-300:]}")
    return p.stdout.decode()


def draw(broker, user, n, uri=None, extra=()):
    uri = uri or broker.tcp
    # Over unix: the broker knows the peer by its uid; no user or key is needed.
    auth = [] if uri.startswith("unix:") else ["-u", user, "-k", broker.keys[user]]
    return run([prog("eb-sink-file"), "-b", uri, *auth, "--bytes", str(n), "--timeout", "20",
                *extra])


class Raw:
    """A raw protocol client over the unix socket, optionally as another uid."""

    def __init__(self, path, uid=None, gid=None, groups=()):
        """uid: connect as that uid, with gid (default: the same number) as its primary group
        and groups (default none) as its supplementary ones."""
        if uid is not None:
            need_root(f"to connect as uid {uid}")
            # Connect from a child that dropped to uid, then take its socket.
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            pid = os.fork()
            if pid == 0:
                try:
                    os.setgroups(list(groups))
                    os.setgid(uid if gid is None else gid)
                    os.setuid(uid)
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.connect(path)
                    socket.send_fds(b, [b"x"], [s.fileno()])
                finally:
                    os._exit(0)
            a.settimeout(5)
            try:
                _, fds, _, _ = socket.recv_fds(a, 1, 1)
            finally:
                os.waitpid(pid, 0)
            if not fds:
                raise Failure(f"could not connect to {path} as uid {uid}")
            self.s = socket.socket(fileno=fds[0])
            a.close()
            b.close()
        else:
            self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.s.connect(path)
        self.s.settimeout(5)

    def send(self, mtype, payload=b"", flags=0, reserved=0):
        self.s.sendall(struct.pack(">BBHI", mtype, flags, reserved, len(payload)) + payload)

    def hello(self, roles, kind=b"raw"):
        self.send(MSG["HELLO"], struct.pack(">HBBIH", 1, roles, 0, 0, len(kind)) + kind)
        return self.recv()

    def recv(self):
        hdr = self._exact(8)
        if hdr is None:
            return None, b""
        t, _, _, n = struct.unpack(">BBHI", hdr)
        return t, self._exact(n) or b""

    def _exact(self, n):
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.s.recv(n - len(buf))
            except (ConnectionResetError, socket.timeout):
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def closed(self):
        try:
            return self.s.recv(1) == b""
        except (ConnectionResetError, socket.timeout):
            return True

    def close(self):
        self.s.close()


class Notify:
    """A NOTIFY_SOCKET, as systemd gives a Type=notify service: set a Broker's
    .env = {"NOTIFY_SOCKET": n.path} before start(). .msgs holds every datagram received."""

    def __init__(self, path):
        self.path = path
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind(path)
        self.s.settimeout(0.2)
        self.msgs = []

    def _recv(self):
        try:
            self.msgs.append(self.s.recv(65536).decode())
        except socket.timeout:
            pass

    def wait(self, pred, timeout=20, start=0):
        """The first message from index start on for which pred(message) holds, or None after
        timeout seconds."""
        deadline = time.monotonic() + timeout
        while True:
            for m in self.msgs[start:]:
                if pred(m):
                    return m
            if time.monotonic() > deadline:
                return None
            self._recv()

    def close(self):
        self.s.close()



def stop_process(p, timeout=20):
    """SIGTERM, then SIGKILL after timeout seconds; p may be None or gone already."""
    if p and p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def prometheus_start(conf, workdir, port):
    """Debian's prometheus with configuration file conf, its data under workdir, listening on
    127.0.0.1:port; returns once it says it is ready. Its log is workdir/prometheus.log."""
    plog = os.path.join(workdir, "prometheus.log")
    prom = subprocess.Popen(["prometheus", f"--config.file={conf}",
                             f"--storage.tsdb.path={os.path.join(workdir, 'tsdb')}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=subprocess.DEVNULL, stderr=open(plog, "wb"))

    def ready():
        if prom.poll() is not None:
            with open(plog, errors="replace") as f:
                raise Failure(f"prometheus exited {prom.returncode}: {f.read()[-500:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False
    try:
        wait_for("prometheus to be ready", ready, 90)
    except BaseException:
        stop_process(prom)
        raise
    return prom


def prometheus_query(port, expr):
    """The instant vector of a PromQL query, as (labels, value) pairs."""
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        data = json.load(r)
    if data.get("status") != "success":
        raise Failure(f"prometheus query {expr}: {data}")
    return [(s["metric"], float(s["value"][1])) for s in data["data"]["result"]]

# Set in a test's second run, inside the namespaces rerun_unshared() made for it.
INNER = "EB_TEST_INNER"


def inner_run():
    """Whether this is a test's second run, inside the namespaces rerun_unshared() made."""
    return bool(os.environ.get(INNER))


def rerun_unshared(net=False, private_run=False, timeout=300):
    """Runs the calling test again under unshare, in a mount namespace of its own (propagation
    private, so that what it mounts stays there) and, with net, a network namespace of its own
    (lo alone, down); with private_run, a tmpfs on /run first, where a Journal can take the
    journal's socket without touching the machine's journald. inner_run() is true there. Exits
    with the inner run's code (0, 1, or 77 for a skip); its output is this run's. Needs root: the
    caller skips, or runs without the namespaces, before asking."""
    need("unshare")
    flags = ["--mount", "--propagation", "private"] + (["--net"] if net else [])
    if run(["unshare", *flags, "true"]).returncode != 0:
        print(f"SKIP: cannot make a namespace of our own (unshare {' '.join(flags)})")
        sys.exit(SKIP)
    cmd = [sys.executable, os.path.abspath(sys.argv[0])]
    if private_run:
        cmd = ["sh", "-c", 'mount -t tmpfs tmpfs /run && exec "$@"', "sh", *cmd]
    p = subprocess.run(["unshare", *flags, *cmd], env=dict(os.environ, **{INNER: "1"}),
                       timeout=timeout)
    sys.exit(p.returncode)


class Journal:
    """The journal's socket, bound by the test itself in the private /run of
    rerun_unshared(private_run=True): what sd_journal_send() of the broker and the clients sends,
    in the journal's native protocol (KEY=value lines, one datagram an entry; our programs send
    no binary fields)."""

    PATH = "/run/systemd/journal/socket"

    def __init__(self):
        os.makedirs(os.path.dirname(self.PATH), exist_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.PATH)
        self.sock.setblocking(False)

    @staticmethod
    def parse(dgram):
        return dict(l.split("=", 1) for l in dgram.decode(errors="replace").split("\n") if "=" in l)

    def entries(self, msgid=None):
        """The entries that came since the last call (those with MESSAGE_ID=msgid, when given),
        without waiting."""
        out = []
        while True:
            try:
                out.append(self.parse(self.sock.recv(65536)))
            except BlockingIOError:
                break
        return [e for e in out if msgid is None or e.get("MESSAGE_ID") == msgid]

    def wait(self, what, pred, timeout=10):
        """The entries that come until one satisfies pred, all of them; fails naming what after
        timeout seconds without one."""
        out = []
        deadline = time.monotonic() + timeout
        while not any(pred(e) for e in out):
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure(f"timed out waiting for {what} in the journal ({len(out)} entries)")
            self.sock.settimeout(left)
            try:
                out.append(self.parse(self.sock.recv(65536)))
            except socket.timeout:
                pass
            finally:
                self.sock.setblocking(False)
        return out

    def close(self):
        self.sock.close()


def private_journal():
    """A Journal in the inner run of rerun_unshared(private_run=True); None elsewhere, where a
    test reads its programs' standard error instead."""
    return Journal() if inner_run() else None


def main(test):
    """Runs test(), prints a TAP-ish verdict, exits 0, 1 or 77."""
    try:
        test()
    except Failure as e:
        print(f"not ok - {e}")
        sys.exit(1)
    print("PASS")
    sys.exit(0)
