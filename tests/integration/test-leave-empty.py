#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A long-lived sink leaves a broker that has only EMPTY to give (issue 26): eb-sink-file --fifo
lists an empty broker first and a full one second; once its reader asks, it moves to the full one
within the bound eb-sink-file(1) states (EB_SINK_LEAVE_EMPTY_MIN_MS: after 10 to 20 s of nothing
but EMPTY, at the next EMPTY, which an eb-brokerd without sources sends every 5 s) and feeds the
reader from it. With the empty broker alone, a sink stays on it for as long as it waits."""
import os
import re
import subprocess
import threading
import time

from eblib import ME, Broker, check, donate, main, prog

USERS = {
    "alice": {"role": "source", "max-credit-per-byte": 8},
    "admin": {"role": "admin"},
    "local": {"role": "sink", "unix-uid": ME, "key": False},
}
# What eb-sink-file(1) promises: 20 s of EMPTY at most, then the next EMPTY (5 s apart from a
# broker without sources). The test allows twice that on a loaded machine.
PROMISE_S = 25
N = 4096
ALONE_S = 32


def read_fifo(path, n, out):
    with open(path, "rb") as f:
        data = b""
        while len(data) < n:
            chunk = f.read(n - len(data))
            if not chunk:
                break
            data += chunk
    out.append(data)


def test():
    empty = Broker(USERS).start()
    full = Broker(USERS, keys=empty.keys).start()
    alone = mover = None
    try:
        noise = os.path.join(full.tmp, "noise")
        with open(noise, "wb") as f:
            f.write(os.urandom(64 * 1024))
        check(donate(full, "alice", noise).returncode == 0, "the second broker is filled")
        check(empty.status()["pool_bits"] == 0, "the first broker is empty, with no source")

        # With the empty broker alone, side by side with the rest: it must outlast the bound.
        # Long-lived too (--fifo): a --bytes sink ends its session after its last request.
        alone_log = os.path.join(empty.tmp, "alone.log")
        alone_fifo = os.path.join(empty.tmp, "alone.fifo")
        alone = subprocess.Popen([prog("eb-sink-file"), "-v", "-b", empty.unix, "--fifo",
                                  alone_fifo], stdout=subprocess.DEVNULL,
                                 stderr=open(alone_log, "wb"),
                                 env=dict(os.environ, EB_LOG_TARGET="console"))
        deadline = time.monotonic() + 10
        while not os.path.exists(alone_fifo) and time.monotonic() < deadline:
            time.sleep(0.02)
        alone_got = []
        alone_t0 = time.monotonic()
        threading.Thread(target=read_fifo, args=(alone_fifo, 16, alone_got), daemon=True).start()

        fifo = os.path.join(full.tmp, "seed.fifo")
        log_path = os.path.join(full.tmp, "fifo.log")
        mover = subprocess.Popen([prog("eb-sink-file"), "-v", "-b", empty.unix, "-b", full.unix,
                                  "--fifo", fifo], stdout=subprocess.DEVNULL,
                                 stderr=open(log_path, "wb"),
                                 env=dict(os.environ, EB_LOG_TARGET="console"))
        deadline = time.monotonic() + 10
        while not os.path.exists(fifo) and time.monotonic() < deadline:
            time.sleep(0.02)
        got = []
        t0 = time.monotonic()
        reader = threading.Thread(target=read_fifo, args=(fifo, N, got), daemon=True)
        reader.start()
        reader.join(2 * PROMISE_S + 10)
        took = time.monotonic() - t0
        with open(log_path, errors="replace") as f:
            log = f.read()
        moved = re.search(r"Broker (\S+) has answered only EMPTY for (\d+) s; trying another",
                          log)
        check(got and len(got[0]) == N,
              f"the reader got its {N} bytes after {took:.1f} s (bound {PROMISE_S} s, allowed "
              f"{2 * PROMISE_S + 10} s; log: {log.strip()[-300:]})")
        check(moved and moved.group(1) == empty.unix and 10 <= int(moved.group(2)) <= 21,
              f"it left {empty.unix} after {moved.group(2) if moved else '?'} s of EMPTY "
              "(10 to 20 s, at the EMPTY past the bound)")
        check(took >= 10, f"not before the bound's least value, 10 s ({took:.1f} s)")
        check(f"Drawing from {full.unix}" in log, "it drew from the full broker")
        check(full.status()["bits_out"] >= 8 * N, "the full broker served the reader's bytes")
        print(f"# moved off the empty broker {took:.1f} s after the reader came")

        time.sleep(max(0.0, ALONE_S - (time.monotonic() - alone_t0)))
        with open(alone_log, errors="replace") as f:
            alog = f.read()
        check(alone.poll() is None and not alone_got and "only EMPTY" not in alog and
              alog.count(f"Drawing from {empty.unix}") == 1 and "pool empty" in alog,
              f"with the empty broker alone, the sink stayed connected to it for {ALONE_S} s "
              f"of EMPTY ({alog.strip()[-200:]})")
    finally:
        for p in (alone, mover):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        for b in (empty, full):
            b.cleanup()


main(test)
