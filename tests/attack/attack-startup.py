#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Start-up and refusals that a hostile local user or a bad file can cause:
(a) a FIFO at the seed-file path (anyone who can write the directory can put one there): the
    broker still gets ready (its unix socket answers a status request) within 10 s, and
    SIGTERM stops it within 10 s, also while it saves the seed at the FIFO;
(b) a configuration value with a NUL byte in it is an error naming the file and line (exit 2),
    not a value cut at the NUL with the rest silently dropped;
(c) a unix connection over max-local-sessions is told why (ERROR code 8, BUSY) before it is
    closed, not closed bare; TLS clients are not affected by the local limit."""
import os
import signal
import socket
import struct
import subprocess
import tempfile
import time

from attacklib import (LEGIT_USERS, MSG, ROLE_ADMIN, ROLE_SINK, Broker, Legit, Raw, Window,
                       check, expect, main, prog, start_broker, wait_closed)

ERR_BUSY = 8


def status_over_unix(b, deadline):
    """Connects to the unix socket as the local admin until a STATUS comes back."""
    while time.monotonic() < deadline:
        try:
            r = Raw(b.sock)
        except OSError:
            time.sleep(0.1)
            continue
        try:
            r.s.settimeout(max(0.1, deadline - time.monotonic()))
            t, _ = r.hello(ROLE_ADMIN)
            if t == MSG["WELCOME"]:
                r.send(MSG["STATUS_REQ"])
                t, payload = r.recv()
                if t == MSG["STATUS"]:
                    return struct.unpack(">Q", payload[:8])[0]
        except OSError:
            pass
        finally:
            r.close()
        time.sleep(0.1)
    return None


def fifo_seed():
    b = Broker(LEGIT_USERS)
    os.mkfifo(b.seed)
    try:
        b.start()
        t0 = time.monotonic()
        pool = status_over_unix(b, t0 + 10)
        expect(pool is not None, f"with a FIFO at the seed-file path the broker answers a "
               f"status request within 10 s ({time.monotonic() - t0:.1f} s)")
        ms = (time.monotonic() - t0) * 1000
        print(f"latency admin-status-unix under fifo-seed: {ms:.0f} ms")
        t0 = time.monotonic()
        b.proc.send_signal(signal.SIGTERM)
        try:
            rc = b.proc.wait(10)
        except subprocess.TimeoutExpired:
            rc = None
        expect(rc is not None, f"SIGTERM stops it within 10 s "
               f"({'still running' if rc is None else f'{time.monotonic() - t0:.1f} s, exit {rc}'})")
        log = b.read_log()
        expect("seed" in log.lower(), "the log says something about the seed file")
        print("# " + " | ".join(l for l in log.splitlines() if "seed" in l.lower())[:600])
    finally:
        b.cleanup()


def nul_in_value():
    tmp = tempfile.mkdtemp(prefix="eb-attack-")
    try:
        conf = os.path.join(tmp, "eb-brokerd.conf")
        with open(conf, "wb") as f:
            f.write(b"[broker]\ncapacity-bits = 1048576\0junk\nstatus-interval-sec = 3600\n")
        sock = os.path.join(tmp, "broker.sock")
        p = subprocess.Popen([prog("eb-brokerd"), "-c", conf, "-l", f"unix:{sock}"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=dict(os.environ, EB_LOG_TARGET="console"))
        try:
            _, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            p.returncode = None
        err = err.decode(errors="replace")
        print(f"# eb-brokerd with a NUL in a value: exit {p.returncode}: {err.strip()[-300:]}")
        expect(p.returncode == 2, f"a NUL byte in a value makes eb-brokerd exit 2 "
               f"({'still running after 10 s' if p.returncode is None else p.returncode})")
        expect(f"{conf}:2" in err, f"and the message names {conf}:2")
    finally:
        subprocess.run(["rm", "-rf", tmp])


def local_limit():
    b = start_broker(new_keys="max-local-sessions = 2")
    held = []
    try:
        legit = Legit(b)
        legit.round("no attack")
        w = Window(b, "local-limit").begin()
        for i in range(2):
            r = Raw(b.sock)
            held.append(r)
            t, _ = r.hello(ROLE_SINK)
            check(t == MSG["WELCOME"], f"local session {i + 1} of 2 is welcomed")
        r = Raw(b.sock)
        held.append(r)
        # Refused at accept, it may be told before it says a word; or it says HELLO first.
        try:
            r.s.settimeout(5)
            t, payload = r.recv()
            if t is None:
                t, payload = r.hello(ROLE_SINK)
        except OSError:
            t, payload = None, b""
        code = struct.unpack(">H", payload[:2])[0] if t == MSG["ERROR"] else None
        expect(t == MSG["ERROR"] and code == ERR_BUSY,
               f"a third unix connection gets ERROR code {ERR_BUSY} (BUSY) "
               f"(got type {t}, code {code}, {payload[4:].decode(errors='replace')!r})")
        expect(wait_closed(r.s, 5) is not None, "and is closed")
        legit.round("local-limit", which=("sink-tls", "source-tls", "admin-status"))
        w.end()
        w.check_cpu()
        w.check_log(20)
        for r in held:
            r.close()
        held = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not legit.round(
                "after local-limit", which=("sink-unix",), must=False):
            time.sleep(0.2)
        legit.round("after local-limit", which=("sink-unix",))
        expect(b.alive(), "the broker is still running")
    finally:
        for r in held:
            r.close()
        b.cleanup()


def test():
    fifo_seed()
    nul_in_value()
    local_limit()


main(test)
