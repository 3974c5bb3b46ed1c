#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The source runtime end to end with a real broker:
- a stuck source (a FIFO of zeros through eb-source-stream with a stated H) gets 0 bits credited
  and logs exactly one alarm line, with its journal fields caught on a stand-in journal socket,
  while a good source keeps the pool filling;
- a hostile device (a counter claimed at H = 4, ABAB... at H = 1) trips the pattern tests: one
  alarm line naming the test, and 0 bits credited;
- a source that gets stuck and recovers logs one alarm and one re-admission and is credited again;
- --dump-raw writes exactly the samples taken (eb-source-file, eb-source-stream, eb-source-exec);
- while the broker says SLEEP a source reads nothing (bytes taken from a FIFO stop), and after WAKE
  it reads again;
- eb-source-exec and eb-source-file are low-trust: capped credit by default, "(low trust)" in HELLO;
  eb-source-exec exits as its command does;
- eb-source-stream on a pseudo-terminal: raw mode, --baud, a OneRNG's start-up commands."""
import fcntl
import os
import re
import shutil
import socket
import subprocess
import termios
import threading
import time

from eblib import ME, Broker, check, main, need, prog, run, wait_for

F_SETPIPE_SZ = 1031


class FifoWriter(threading.Thread):
    """Writes data() chunks into a FIFO without blocking and counts what the reader took in."""

    def __init__(self, path, data):
        super().__init__(daemon=True)
        self.path, self.data = path, data
        self.written = 0
        self.log = bytearray()
        self.stop = False

    def run(self):
        fd = os.open(self.path, os.O_WRONLY)  # returns once the source opened it
        try:
            fcntl.fcntl(fd, F_SETPIPE_SZ, 4096)
            os.set_blocking(fd, False)
            pending = b""
            while not self.stop:
                if not pending:
                    pending = self.data()
                try:
                    k = os.write(fd, pending)
                except BlockingIOError:
                    time.sleep(0.01)
                    continue
                except BrokenPipeError:
                    break
                self.log += pending[:k]
                self.written += k
                pending = pending[k:]
        finally:
            os.close(fd)


def journal_socket(tmp):
    """A datagram socket that stands in for journald's, for sd_journal_send() to write to."""
    d = os.path.join(tmp, "journal")
    os.mkdir(d)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(os.path.join(d, "socket"))
    s.settimeout(0.2)
    return d, s


def journal_entries(s):
    entries = []
    while True:
        try:
            data = s.recv(65536)
        except (socket.timeout, BlockingIOError):
            return entries
        fields = {}
        for line in data.split(b"\n"):
            if b"=" in line:
                k, v = line.split(b"=", 1)
                fields[k.decode()] = v.decode(errors="replace")
        entries.append(fields)


def with_journal(cmd, journal_dir):
    """cmd run with /run/systemd/journal/socket being our socket, in a private mount namespace
    (a tmpfs over /run there), so that the host's /run is untouched."""
    script = ('mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/journal && '
              'mount --bind "$0" /run/systemd/journal && exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, journal_dir,
            *cmd]


def credited(stderr):
    m = re.search(r"(\d+) bits credited of (\d+) claimed; (\d+) health-test alarm", stderr)
    return tuple(int(x) for x in m.groups()) if m else None


def test_stuck(b):
    tmp = b.tmp
    fifo = os.path.join(tmp, "zeros")
    os.mkfifo(fifo)
    zeros = FifoWriter(fifo, lambda: bytes(4096))
    zeros.start()
    jdir, jsock = journal_socket(tmp)
    env = dict(os.environ, EB_LOG_TARGET="journal")
    # No --samples: the stuck source runs until the zeros stop (end of file), so the good
    # source below runs wholly inside its lifetime however slowly either one starts.
    stuck_cmd = [prog("eb-source-stream"), "-b", b.unix, "--min-entropy", "4", fifo]
    use_journal = os.geteuid() == 0 and shutil.which("unshare")
    stuck = subprocess.Popen(with_journal(stuck_cmd, jdir) if use_journal else stuck_cmd,
                             stderr=subprocess.PIPE, env=env if use_journal else None)
    deadline = time.monotonic() + 60
    while zeros.written < 8192 and stuck.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    before = b.status()["bits_in"]
    good = subprocess.Popen([prog("eb-source-kernel"), "-b", b.unix, "--bytes", "400000"],
                            stderr=subprocess.PIPE)
    good_err = good.communicate(timeout=60)[1].decode()
    after = b.status()["bits_in"]
    stuck_alive = stuck.poll() is None
    taken = zeros.written
    zeros.stop = True  # the source reads to the end of the FIFO and exits
    stuck_err = stuck.communicate(timeout=60)[1].decode()
    entries = journal_entries(jsock) if use_journal else []
    jsock.close()

    check(taken >= 8192, f"the stuck source took {taken} zero samples")
    check(stuck.returncode == 0,
          f"the stuck source runs to the end of its input and exits 0 ({stuck_err[-300:]})")
    check(good.returncode == 0, "the good source exits 0")
    check(stuck_alive and before == 0 and after > before,
          f"the pool keeps filling while the stuck source runs (bits in: {before} -> {after}, "
          f"stuck source still running: {stuck_alive})")
    if use_journal:
        alarms = [e for e in entries if e.get("MESSAGE_ID") == "3c2022901111464f90e9aa4e20d64086"]
        check(len(alarms) == 1, f"exactly one alarm entry in the journal ({len(alarms)})")
        a = alarms[0]
        check(a.get("EB_HEALTH_TEST") == "repetition-count" and a.get("EB_HEALTH_CUTOFF") == "6"
              and a.get("EB_HEALTH_COUNT") == "6" and a.get("EB_HEALTH_VALUE") == "0"
              and a.get("EB_SOURCE") == f"stream {fifo}" and a.get("PRIORITY") == "4",
              f"with its fields: {sorted((k, v) for k, v in a.items() if k.startswith(('EB_', 'PRIORITY')))}")
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "catalog",
                               "entropy-broker.catalog")) as f:
            check("-- 3c2022901111464f90e9aa4e20d64086\n" in f.read(),
                  "the catalog explains its MESSAGE_ID")
        check("repetition-count test, cutoff 6, count 6" in a.get("MESSAGE", ""),
              f"and the one line names the test, cutoff and count: {a.get('MESSAGE')}")
        summary = " ".join(e.get("MESSAGE", "") for e in entries)
    else:
        print("# no root or unshare: the alarm is checked on standard error")
        lines = [l for l in stuck_err.splitlines() if "Health test failed" in l]
        check(len(lines) == 1, f"exactly one alarm line ({lines})")
        check("repetition-count test, cutoff 6, count 6" in lines[0], lines[0])
        summary = stuck_err
    c = credited(summary)
    check(c == (0, 0, 1), f"the stuck source was credited 0 bits, claimed 0, in 1 alarm episode ({c})")
    g = credited(good_err)
    check(g and g[0] == 400000 - 1024, f"the good source was credited {g and g[0]} bits")
    st = b.status()
    check(st["bits_in"] == g[0], f"the broker credited exactly the good source's bits ({st['bits_in']})")


def test_patterns(b):
    """What a device cheaper than noise might send: each passes the RCT and APT at its claim.
    A failed source rests between blocks, so a few blocks' worth is what it reads in seconds."""
    total = 32 * 1024
    for name, h, gen, test_name in [
            ("counter", "4", lambda i: bytes((i + k) & 0xff for k in range(4096)),
             "difference-repetition"),
            ("abab", "1", lambda i: b"AB" * 2048, "period-two")]:
        fifo = os.path.join(b.tmp, name)
        os.mkfifo(fifo)
        pos = [0]

        def data(gen=gen, pos=pos):
            chunk = gen(pos[0])
            pos[0] += len(chunk)
            return chunk

        w = FifoWriter(fifo, data)
        w.start()
        src = subprocess.Popen([prog("eb-source-stream"), "-b", b.unix, "--min-entropy", h,
                                fifo], stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while w.written < total and src.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        taken = w.written
        w.stop = True  # the source reads to the end of the FIFO and exits
        err = src.communicate(timeout=60)[1].decode()
        check(src.returncode == 0 and taken >= total,
              f"{name}: the source took {taken} samples and exits 0 ({err[-300:]})")
        lines = [l for l in err.splitlines() if "Health test failed" in l]
        check(len(lines) == 1 and f"{test_name} test" in lines[0],
              f"{name} at H = {h}: one alarm line, naming the {test_name} test ({lines})")
        c = credited(err)
        check(c is not None and c[0] == 0 and c[2] == 1,
              f"{name} at H = {h}: 0 bits credited, in one alarm episode ({c})")
    st = b.status()
    check(st["bits_in"] == 0, f"the broker credited nothing ({st['bits_in']} bits in)")


def test_recovery(b):
    path = os.path.join(b.tmp, "stuck-then-good")
    with open(path, "wb") as f:
        f.write(os.urandom(8192) + bytes(20000) + os.urandom(40000))
    p = run([prog("eb-source-file"), "-b", b.unix, "--credit-per-byte", "4",
             "--max-credit-per-byte", "4", path])
    err = p.stderr.decode()
    check(p.returncode == 0, "a source that gets stuck and recovers runs to the end")
    check(len(re.findall("Health test failed", err)) == 1, "it logs one alarm")
    check(len(re.findall("Health tests passed 1024 clean samples", err)) == 1,
          "and one re-admission")
    c = credited(err)
    check(c and c[0] > (8192 - 1024) * 4 and c[0] < (8192 + 40000) * 4,
          f"and is credited again after it ({c[0] if c else None} bits)")


def test_dump_raw(b):
    data = os.urandom(50000)
    path = os.path.join(b.tmp, "data")
    with open(path, "wb") as f:
        f.write(data)
    dump = os.path.join(b.tmp, "dump")

    p = run([prog("eb-source-file"), "-b", b.unix, "--credit-per-byte", "2", "--dump-raw", dump,
             path])
    check(p.returncode == 0 and open(dump, "rb").read() == data,
          "eb-source-file --dump-raw writes exactly the bytes it sampled")
    check((os.stat(dump).st_mode & 0o777) == 0o600, "the dump is mode 0600")
    p = run([prog("eb-source-file"), "-b", b.unix, "--credit-per-byte", "2", "--samples", "10000",
             "--dump-raw", dump, path])
    check(p.returncode == 0 and open(dump, "rb").read() == data[:10000],
          "with --samples 10000 it samples and dumps exactly the first 10000")

    fifo = os.path.join(b.tmp, "noise")
    os.mkfifo(fifo)
    w = FifoWriter(fifo, lambda: os.urandom(1000))
    w.start()
    p = run([prog("eb-source-stream"), "-b", b.unix, "--samples", "20000", "--dump-raw", dump,
             fifo])
    w.stop = True
    got = open(dump, "rb").read()
    check(p.returncode == 0 and len(got) == 20000 and bytes(w.log[:20000]) == got,
          "eb-source-stream --dump-raw writes exactly the 20000 samples it read, in order")

    p = run([prog("eb-source-exec"), "-b", b.unix, "--dump-raw", dump, "--", "cat", path])
    check(p.returncode == 0 and open(dump, "rb").read() == data,
          "eb-source-exec --dump-raw writes exactly its command's output")


def test_sleep(b):
    fifo = os.path.join(b.tmp, "flow")
    os.mkfifo(fifo)
    w = FifoWriter(fifo, lambda: os.urandom(4096))
    w.start()
    src = subprocess.Popen([prog("eb-source-stream"), "-b", b.unix, "--min-entropy", "8", "-v",
                            fifo], stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 30
        while b.status()["fill_percent"] < 90 and time.time() < deadline:
            time.sleep(0.1)
        st = b.status()
        check(st["fill_percent"] >= 90, f"the pool reaches high water ({st['fill_percent']} %)")
        time.sleep(1.5)  # PUTs already in flight when SLEEP came are acknowledged
        w1 = w.written
        time.sleep(3)
        w2 = w.written
        check(src.poll() is None, "the source is still running")
        check(w2 == w1, f"while asleep it reads nothing from the FIFO ({w2 - w1} bytes in 3 s)")

        # Draw the pool below low water: the broker WAKEs its sources.
        p = run([prog("eb-sink-file"), "-b", b.unix, "--bytes", "28000", "--timeout", "20"])
        check(p.returncode == 0, "a sink draws the pool below low water")
        deadline = time.time() + 10
        while w.written == w2 and time.time() < deadline:
            time.sleep(0.1)
        check(w.written > w2, f"after WAKE the source reads again ({w.written - w2} bytes)")
    finally:
        w.stop = True
        src.terminate()
        err = src.communicate(timeout=10)[1].decode()
    check("is full (SLEEP); resting" in err and "wants data again; resuming after" in err,
          "the source says it rested, and when it resumed")


def test_exec(b):
    p = run([prog("eb-source-exec"), "-b", b.unix, "--min-entropy", "8", "--",
             "head", "-c", "20000", "/dev/urandom"])
    err = p.stderr.decode()
    c = credited(err)
    check(p.returncode == 0, f"eb-source-exec donates a command's output and exits 0 ({err[-200:]})")
    check(c and c[0] == 20000, f"a low-trust source is capped at 1 bit per byte by default ({c})")
    check(b.wait_log("exec head (low trust)"), "HELLO reports it as low trust")
    p = run([prog("eb-source-exec"), "-b", b.unix, "--min-entropy", "8",
             "--max-credit-per-byte", "8", "--", "head", "-c", "20000", "/dev/urandom"])
    c = credited(p.stderr.decode())
    check(c and c[0] == (20000 - 1024) * 8, f"--max-credit-per-byte raises the cap ({c})")
    p = run([prog("eb-source-exec"), "-b", b.unix, "--", "sh", "-c",
             "head -c 5000 /dev/urandom; exit 3"])
    check(p.returncode == 1 and "exited with status 3" in p.stderr.decode(),
          "a command that fails makes eb-source-exec exit 1 and say why")
    p = run([prog("eb-source-exec"), "-b", b.unix, "--", "/nonexistent/program"])
    check(p.returncode == 1, "a command that cannot run: exit 1")
    p = run([prog("eb-source-exec"), "-b", b.unix])
    check(p.returncode == 2, "no command: usage error, exit 2")

    path = os.path.join(b.tmp, "lowtrust")
    with open(path, "wb") as f:
        f.write(os.urandom(20000))
    p = run([prog("eb-source-file"), "-b", b.unix, "--credit-per-byte", "8", path])
    c = credited(p.stderr.decode())
    check(c and c[0] == 20000 and "low-trust" in p.stderr.decode(),
          f"eb-source-file is capped at 1 bit per byte by default, and says so ({c})")
    check(b.wait_log(f"file {path} (low trust)"), "HELLO reports the file as low trust")


TIOCVHANGUP = 0x5437


def read_commands(master, want, timeout=30):
    """What the source writes to the pty: its start-up commands."""
    got = b""
    deadline = time.time() + timeout
    while len(got) < len(want) and time.time() < deadline:
        r, _, _ = __import__("select").select([master], [], [], 0.2)
        if r:
            got += os.read(master, 64)
    return got


def kill(p):
    """Ends a program the test started, if it is still running."""
    if p.poll() is None:
        p.kill()
        p.wait()


def test_tty(b):
    """A pseudo-terminal stands in for a serial TRNG: raw mode and --baud are set on it, a
    OneRNG's start-up commands arrive on the other side, and what is written there is sampled."""
    master, slave = os.openpty()
    path = os.ttyname(slave)
    dump = os.path.join(b.tmp, "tty.raw")
    src = subprocess.Popen([prog("eb-source-stream"), "-b", b.unix, "--type", "onerng",
                            "--baud", "115200", "--samples", "8192", "--dump-raw", dump, path],
                           stderr=subprocess.PIPE)
    try:
        got = read_commands(master, b"cmd0\ncmdO\ncmdw\n", timeout=10)
        check(got == b"cmd0\ncmdO\ncmdw\n", f"the OneRNG start-up commands arrive in order ({got!r})")
        attrs = termios.tcgetattr(slave)
        check(attrs[4] == termios.B115200 and attrs[5] == termios.B115200, "--baud 115200 is set")
        check(not attrs[3] & (termios.ICANON | termios.ECHO | termios.ISIG)
              and not attrs[0] & (termios.IXON | termios.ICRNL) and not attrs[1] & termios.OPOST,
              "the line is raw: no echo, no line editing, no flow control, no translation")
        time.sleep(0.3)  # past the flush of what came before the set-up
        data = os.urandom(8192)
        for i in range(0, len(data), 512):
            os.write(master, data[i:i + 512])
        err = src.communicate(timeout=30)[1].decode()
        check(src.returncode == 0, f"eb-source-stream samples the tty and exits 0 ({err[-200:]})")
        check("Moonbase Otago OneRNG (--type onerng)" in err, "as a OneRNG")
        check(open(dump, "rb").read() == data, "and sampled exactly what the device sent")
    finally:
        kill(src)
        os.close(master)
        os.close(slave)


def test_tty_hangup(b):
    """A serial TRNG that hangs up while its node is still there (carrier dropped, a USB
    reset) is opened again and goes on donating, its start-up commands sent again; one whose
    node goes with the hang-up (unplugged) ends the source, exit 0, saying so."""
    cmds = b"cmd0\ncmdO\ncmdw\n"
    master, slave = os.openpty()
    path = os.ttyname(slave)
    dump = os.path.join(b.tmp, "hangup.raw")
    src = subprocess.Popen([prog("eb-source-stream"), "-b", b.unix, "--type", "onerng",
                            "--samples", "8192", "--dump-raw", dump, path],
                           stderr=subprocess.PIPE)
    try:
        got = read_commands(master, cmds)
        check(got == cmds, f"the start-up commands arrive ({got!r})")
        time.sleep(0.3)  # past the flush of what came before the set-up, as in test_tty
        first = os.urandom(4096)
        os.write(master, first)
        if os.geteuid() == 0:
            # Taken in before the hang-up, which drops what the tty still buffers.
            wait_for("the first 4096 bytes sampled",
                     lambda: os.path.exists(dump) and os.path.getsize(dump) >= 4096)
            # A hang-up with the pty still there: the kernel's vhangup() of that tty.
            stat = os.stat(path)
            fcntl.ioctl(slave, TIOCVHANGUP)
            check(os.path.exists(path) and os.stat(path).st_rdev == stat.st_rdev,
                  "the tty's node is still there after the hang-up")
            got = read_commands(master, cmds)
            check(got == cmds, f"opened again, the start-up commands are sent again ({got!r})")
            time.sleep(0.3)
            second = os.urandom(4096)
            os.write(master, second)
            err = src.communicate(timeout=30)[1].decode()
            check(src.returncode == 0, f"the source exits 0 after its samples ({err[-300:]})")
            check(f"{path} hung up; opening it again" in err, "it said it opens the tty again")
            check(open(dump, "rb").read() == first + second,
                  "and sampled what came before the hang-up and after")
        else:
            print("# skipped the vhangup part: TIOCVHANGUP needs CAP_SYS_ADMIN (run as root)")
    finally:
        kill(src)
        os.close(master)
        os.close(slave)

    # Unplugged: the master goes, the pty's slave hangs up and its node is removed.
    master, slave = os.openpty()
    path = os.ttyname(slave)
    src = subprocess.Popen([prog("eb-source-stream"), "-b", b.unix, "--type", "onerng", path],
                           stderr=subprocess.PIPE)
    try:
        got = read_commands(master, cmds)
        check(got == cmds, f"the start-up commands arrive ({got!r})")
        os.write(master, os.urandom(2048))
        os.close(slave)
        os.close(master)
        err = src.communicate(timeout=30)[1].decode()
        check(src.returncode == 0, f"an unplugged tty ends the source with exit 0 ({err[-300:]})")
        check(f"{path} is gone; stopping" in err, f"saying the device is gone ({err[-300:]})")
    finally:
        kill(src)


def test():
    need("unshare")
    for name, t, capacity in [("stuck", test_stuck, 64 * 1024 * 1024),
                              ("patterns", test_patterns, 64 * 1024 * 1024),
                              ("recovery", test_recovery, 64 * 1024 * 1024),
                              ("dump", test_dump_raw, 64 * 1024 * 1024),
                              ("exec", test_exec, 64 * 1024 * 1024),
                              ("tty", test_tty, 64 * 1024 * 1024),
                              ("tty-hangup", test_tty_hangup, 64 * 1024 * 1024),
                              ("sleep", test_sleep, 262144)]:
        b = Broker({"admin": {"role": "admin"},
                    "local": {"role": "source, sink", "unix-uid": ME, "key": False}},
                   capacity=capacity,
                   broker_extra="low-water-percent = 25\nhigh-water-percent = 90").start()
        try:
            print(f"# {name}")
            t(b)
        finally:
            b.cleanup()


main(test)
