# SPDX-License-Identifier: MIT
"""What the boot-storm and idle benchmarks share: a broker configured for thousands of sinks,
filled before the clock starts, the load generator, and /proc readings of a process."""

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import eblib  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
BLOCK_BITS = 512  # a full-entropy request costs whole 512-bit pool blocks
BLOCK_INPUT = 72  # bytes of 8-bit-per-byte input per block (576 credited bits)


def cpu_seconds(pid, thread=None):
    """utime + stime of a live process (all its threads), from /proc/PID/stat; with thread, of
    that thread alone (the broker's event loop is the thread whose id is the pid)."""
    path = f"/proc/{pid}/task/{thread}/stat" if thread else f"/proc/{pid}/stat"
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def status_kib(pid, field):
    """A kB figure from /proc/PID/status: VmRSS, VmHWM ..."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def ctxt_switches(pid):
    """Voluntary and involuntary context switches of every thread: each voluntary one is a
    wakeup after the process slept."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches:",
                                        "nonvoluntary_ctxt_switches:")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


class SyscallCounter:
    """The system calls of a live process (all its threads) from now until stop(): Linux perf
    counting the raw_syscalls:sys_enter tracepoint (Debian's linux-perf; root, or
    kernel.perf_event_paranoid allowing it). Counting costs the process a little CPU per call,
    so a storm counted is not one timed. stop() returns None when perf is missing or refused."""

    def __init__(self, pid):
        self.proc = None
        if not shutil.which("perf"):
            return
        self.dir = tempfile.mkdtemp(prefix="eb-perf-")
        self.out = os.path.join(self.dir, "stat.csv")
        ctl, ack = os.path.join(self.dir, "ctl"), os.path.join(self.dir, "ack")
        os.mkfifo(ctl)
        os.mkfifo(ack)
        # Started disabled (-D -1) and enabled through its control fifo, whose "ack" says that
        # it counts: the storm begins only then, and none of it goes uncounted.
        self.proc = subprocess.Popen(["perf", "stat", "-x", ",", "-e", "raw_syscalls:sys_enter",
                                      "-D", "-1", "--control", f"fifo:{ctl},{ack}",
                                      "-p", str(pid), "-o", self.out],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Neither fifo is opened blocking: a perf that exits at once (refused) opens neither.
        a = os.open(ack, os.O_RDONLY | os.O_NONBLOCK)
        try:
            c = None
            deadline = time.monotonic() + 10
            while c is None and self.proc.poll() is None and time.monotonic() < deadline:
                try:
                    c = os.open(ctl, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:
                    select.select([], [], [], 0.05)  # perf has not opened it yet
            said = b""
            if c is not None:
                os.write(c, b"enable\n")
                os.close(c)
                while not said.endswith(b"\n") and time.monotonic() < deadline:
                    if select.select([a], [], [], 0.5)[0]:
                        said += os.read(a, 16)
        finally:
            os.close(a)
        if not said.startswith(b"ack"):
            self.stop()

    def stop(self):
        if not self.proc:
            return None
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        self.proc = None
        if not os.path.exists(self.out):
            shutil.rmtree(self.dir, ignore_errors=True)
            return None
        with open(self.out) as f:
            text = f.read()
        shutil.rmtree(self.dir, ignore_errors=True)
        for line in text.splitlines():
            fields = line.split(",")
            if len(fields) > 2 and fields[2].startswith("raw_syscalls:sys_enter"):
                try:
                    return int(fields[0])
                except ValueError:
                    return None  # "<not supported>", "<not counted>"
        return None


def reset_hwm(pid):
    """Resets VmHWM to the current RSS (clear_refs 5, Linux 4.0+), so that the next reading is
    the peak of what follows; False when not permitted."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def settled(read, steady=1.5, timeout=5):
    """read() once its value has not moved for `steady` seconds, or after `timeout`."""
    deadline = time.monotonic() + timeout
    last, since = read(), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < steady:
        time.sleep(0.1)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
    return last


def settled_rss_kib(pid):
    """VmRSS once it stopped moving: a broker gives memory back from a once-a-second timer."""
    return settled(lambda: status_kib(pid, "VmRSS"))


def n_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def pool_bits(broker):
    """The pool's level, asked over unix as the local admin."""
    raw = eblib.Raw(broker.sock)
    try:
        mtype, _ = raw.hello(eblib.ROLE_ADMIN)
        if mtype != eblib.MSG["WELCOME"]:
            raise eblib.Failure(f"no WELCOME for the admin: {broker.read_log()[-2000:]}")
        raw.send(eblib.MSG["STATUS_REQ"])
        mtype, payload = raw.recv()
        if mtype != eblib.MSG["STATUS"]:
            raise eblib.Failure("no STATUS")
        return int.from_bytes(payload[:8], "big")
    finally:
        raw.close()


def client_path():
    return os.path.join(eblib.BUILD, "tests", "bench", "bench-storm-client")


def parse_kv(line):
    out = {}
    for m in re.finditer(r"(\w+)=([\d.]+)", line):
        v = m.group(2)
        out[m.group(1)] = float(v) if "." in v else int(v)
    return out


class StormBroker:
    """A broker under systemd-socket-activate for `sessions` network sessions at once, with
    `users` sink users (vm0, vm1 ... each with its own key), a local source/admin over unix, and
    a pool big enough for `seeds` seeds of 256 bits, filled before anything is measured."""

    def __init__(self, build, sessions, users, seeds, broker_extra="", keys=None):
        """keys: another StormBroker's .broker.keys, for brokers that know the users alike."""
        eblib.BUILD = build
        self.build = build
        self.tmp = tempfile.mkdtemp(prefix="eb-storm-")
        # Each seed spends one 512-bit block; the source stops at high water (90 %), so the
        # pool is sized for the storm's blocks well below that.
        blocks = seeds + 64
        capacity = max(1 << 20, -(-blocks * BLOCK_BITS * 10 // 8 // BLOCK_BITS) * BLOCK_BITS)
        self.fill_bits = blocks * BLOCK_BITS
        spec = {f"vm{i}": {"role": "sink"} for i in range(users)}
        spec["local"] = {"role": "source, sink, admin", "key": False,
                         "unix-uid": os.getuid(), "max-credit-per-byte": 8}
        # Sessions whose peers got their DATA and closed stay counted until the broker reads
        # the end of their stream: room for as many again as are connecting.
        extra = (f"max-sessions = {2 * sessions + 64}\nmax-handshakes = {sessions}\n"
                 f"max-handshakes-per-address = {sessions}\n{broker_extra}")
        self.broker = eblib.Broker(spec, broker_extra=extra, tmp=self.tmp, capacity=capacity,
                                   keys=keys)
        # One user's sessions are capped at 256 by default: a user per VM is what a storm
        # looks like, so the cap is raised only as far as the users are fewer than sessions.
        per_user = max(256, -(-sessions // users) + 8)
        with open(self.broker.conf) as f:
            conf = f.read()
        conf = re.sub(r"(\[user vm\d+\]\nrole = sink\n)", rf"\1max-sessions = {per_user}\n", conf)
        with open(self.broker.conf, "w") as f:
            f.write(conf)
        self.users_file = os.path.join(self.tmp, "users")
        with open(self.users_file, "w") as f:
            for i in range(users):
                f.write(f"vm{i} {self.broker.keys[f'vm{i}']}\n")
        self.pid = None

    def start(self):
        self.broker.start()
        self.pid = self.broker.proc.pid  # systemd-socket-activate execs the broker
        # The first connection execs it; the fill's source is that connection.
        need = self.fill_bits
        data = os.path.join(self.tmp, "fill")
        # What the source's start-up health test and the broker's own test keep back varies
        # a little: a second or third round makes up the difference.
        level = 0
        for _ in range(3):
            with open(data, "wb") as f:
                f.write(os.urandom(((need - level) // BLOCK_BITS + 16) * BLOCK_INPUT + 4096))
            src = subprocess.run([os.path.join(self.build, "sources", "eb-source-file"), "-b",
                                  self.broker.unix, "--credit-per-byte=8",
                                  "--max-credit-per-byte=8", data],
                                 capture_output=True, timeout=300)
            if src.returncode != 0:
                raise eblib.Failure(f"eb-source-file exited {src.returncode}: "
                                    f"{src.stderr.decode(errors='replace')}")
            level = pool_bits(self.broker)
            if level >= need:
                break
        os.unlink(data)
        if level < need:
            raise eblib.Failure(f"the pool holds {level} bits after the fill, not {need}")
        # The fill's and the status's sessions end a moment after their clients close.
        self.idle_fds = settled(lambda: n_fds(self.pid), steady=0.5)
        return self

    def quiet(self, fds, timeout=30):
        """Waits until the broker holds no more fds than it did with no sessions."""
        eblib.wait_for("the broker's sessions to end", lambda: n_fds(self.pid) <= fds, timeout)

    def cleanup(self):
        self.broker.cleanup()
