#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-sink-file --fifo keeps a FIFO fed for programs that read a file: it creates the FIFO
0600, waits for readers, survives them coming and going (EPIPE), gives no two readers the same
bytes, and draws from the broker only about as much as the readers take."""
import os
import signal
import stat
import subprocess
import time

from eblib import ME, Broker, check, donate, main, prog, run


def read_fifo(path, n, buffering=-1):
    with open(path, "rb", buffering=buffering) as f:
        data = b""
        while len(data) < n:
            chunk = f.read(n - len(data))
            if not chunk:
                break
            data += chunk
    return data


def test():
    b = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                "admin": {"role": "admin"},
                "local": {"role": "sink", "unix-uid": ME, "key": False}},
               capacity=8 * 1048576).start()
    sink = None
    try:
        noise = os.path.join(b.tmp, "noise")
        with open(noise, "wb") as f:
            f.write(os.urandom(256 * 1024))
        check(donate(b, "alice", noise).returncode == 0, "the broker is filled")

        fifo = os.path.join(b.tmp, "seed.fifo")
        log = open(os.path.join(b.tmp, "fifo.log"), "wb")
        sink = subprocess.Popen([prog("eb-sink-file"), "-v", "-b", b.unix, "--fifo", fifo],
                                stdout=log, stderr=log,
                                env=dict(os.environ, EB_LOG_TARGET="console"))
        deadline = time.time() + 10
        while not os.path.exists(fifo) and time.time() < deadline:
            time.sleep(0.02)
        st = os.stat(fifo)
        check(stat.S_ISFIFO(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600,
              "the missing FIFO is created, mode 0600")
        time.sleep(0.5)
        check(b.status()["bits_out"] == 0, "nothing is drawn before a reader comes")

        # One reader at a time, as programs that read a file come and go.
        reads = []
        for n in (10000, 1, 5000):
            reads.append(read_fifo(fifo, n))
            time.sleep(0.3)
        # A program that reads a file, not this test.
        p = run(["head", "-c", "3000", fifo], timeout=20)
        reads.append(p.stdout)
        check([len(r) for r in reads] == [10000, 1, 5000, 3000],
              f"four readers one after another get what they read ({[len(r) for r in reads]})")
        # Readers that follow each other without a pause: each opens the FIFO the instant the
        # last one closed it, which is when eb-sink-file switches write ends.
        # Unbuffered, so that each takes only its 64 bytes from the pipe.
        quick = [read_fifo(fifo, 64, buffering=0) for _ in range(300)]
        short = [i for i, r in enumerate(quick) if len(r) != 64]
        check(not short, f"300 readers back to back each get their 64 bytes (short: {short[:10]})")
        reads += quick
        blocks = [r[i:i + 16] for r in reads for i in range(0, len(r) - 15, 16)]
        check(len(set(blocks)) == len(blocks), "no 16-byte block is read twice")
        check(sink.poll() is None, "eb-sink-file survives its readers leaving (EPIPE)")

        # Slow reader: bytes come as it reads.
        with open(fifo, "rb") as f:
            first = f.read(100)
            time.sleep(0.5)
            second = f.read(100)
        check(len(first) == 100 and len(second) == 100 and first != second,
              "a slow reader is fed as it reads")

        total = sum(map(len, reads)) + 200
        time.sleep(0.5)
        out = b.status()["bits_out"] // 8
        # A buffered reader takes up to its buffer from the pipe, more than it returns; per such
        # reader (six here) at most a page in the pipe and a page in hand go unread. The 300
        # unbuffered readers take exactly what they read.
        check(total <= out <= total + 6 * 2 * 4096,
              f"it drew {out} bytes for the {total} read: as the readers consume, not ahead")
        sink.send_signal(signal.SIGTERM)
        sink.wait(10)
        check(sink.returncode == -signal.SIGTERM, "SIGTERM stops it")

        # Mistakes are usage errors.
        p = run([prog("eb-sink-file"), "-b", b.unix, "--fifo", fifo, "--bytes", "5"])
        check(p.returncode == 2 and b"--fifo" in p.stderr, "--fifo with --bytes is a usage error")
        p = run([prog("eb-sink-file"), "-b", b.unix, "--fifo", noise])
        check(p.returncode == 2 and b"not a FIFO" in p.stderr,
              "a --fifo path that is a regular file is refused")
    finally:
        if sink and sink.poll() is None:
            sink.kill()
            sink.wait()
        b.cleanup()


main(test)
