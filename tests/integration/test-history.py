#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The broker's history, an hour compressed: with EB_HISTORY_INTERVAL_MS=100 (docs/testing.md) a
broker samples every 100 ms and rolls six samples into a "minute" of 600 ms. A sink asks the empty
pool (EMPTY), a raw source sends one credited PUT and one that the broker's own test finds stuck
(a health alarm), eb-source-file donates and the sink is served. `eb-brokerctl history --json`
shows each of them in the samples and in the per-source and per-sink totals, the text output
in its sparklines and tables; a SIGHUP reload keeps every sample; a bad interval stops the
broker at start with one line."""
import json
import os
import re
import signal
import struct
import subprocess
import time

from eblib import (MSG, ROLE_ADMIN, ROLE_SOURCE, Broker, Failure, Raw, check, main, prog, run, wait_for)

INTERVAL_MS = 100


def history(b, *extra, env=None):
    p = run([prog("eb-brokerctl"), "-b", b.unix, "history", *extra], env=env)
    if p.returncode != 0:
        raise Failure(f"eb-brokerctl history {' '.join(extra)} exited {p.returncode}: "
                      f"{p.stderr.decode().strip()[-300:]}")
    return p.stdout.decode()


def hjson(b):
    return json.loads(history(b, "--json"))


def total(samples, key):
    return sum(s[key] for s in samples)


def row(rows, user, kind=None):
    found = [r for r in rows if r["user"] == user and (kind is None or r["kind"] == kind)]
    return found[0] if found else None


def put(raw, data, credit):
    raw.send(MSG["PUT"], struct.pack(">II", credit, len(data)) + data)
    t, p = raw.recv()
    if t != MSG["PUT_ACK"]:
        raise Failure(f"PUT answered with type {t}: {p!r}")
    return struct.unpack(">II", p)[0]


def broker_pid(b):
    """The eb-brokerd process: systemd-socket-activate execs it in its own process."""
    deadline = time.time() + 10
    while time.time() < deadline:
        with open(f"/proc/{b.proc.pid}/comm") as f:
            if f.read().strip() == "eb-brokerd":
                return b.proc.pid
        time.sleep(0.05)
    raise Failure("eb-brokerd did not start")


def everything_seen(h):
    """The day's samples hold the whole test; the hour's may already have moved on."""
    day = h["day"]
    alice = row(h["sources"], "alice")
    raw = row(h["sources"], "local", "raw source")
    vm = row(h["sinks"], "vm")
    return (total(day, "empty") >= 1 and total(day, "alarms") >= 1
            and total(day, "bits_in") >= 4096 * 8 and total(day, "bits_out") >= 256
            and alice and alice["day_bits"] > 0 and raw and raw["day_bits"] == 4096 * 8
            and vm and vm["day_bits"] >= 256 and not vm["others"])


def check_text(b, h):
    out = history(b, env=dict(os.environ, LC_ALL="C.UTF-8"))
    check(re.search(r"^Last hour: \d+ samples of 100 ms", out, re.M) is not None
          and re.search(r"^Last day: \d+ samples of 600 ms", out, re.M) is not None,
          f"the text names both windows and their compressed intervals:\n{out}")
    day = out[out.index("Last day:"):]
    for series, key in (("alarms", "alarms"), ("empty", "empty"), ("in", "bits_in")):
        m = re.search(rf"^  {series} +\|(.*)\| total (\d+)$", day, re.M)
        check(m is not None and int(m.group(2)) >= total(h["day"], key) and
              re.search("[▁▂▃▄▅▆▇█]", m.group(1)) is not None,
              f"the day's {series} sparkline shows a bar and its total:\n{day}")
    sources = out[out.index("Sources"):out.index("Sinks")]
    sinks = out[out.index("Sinks"):]
    check(re.search(r"^alice +.+? +\d+ +[1-9]\d* +\d+s$", sources, re.M) is not None and
          re.search(r"^local +raw source +\d+ +32768 +\d+s$", sources, re.M) is not None,
          f"the sources table names alice and the raw source:\n{sources}")
    check(re.search(r"^vm +\S+ +\d+ +[1-9]\d* +\d+s$", sinks, re.M) is not None,
          f"the sinks table names vm:\n{sinks}")
    ascii_out = history(b, env=dict(os.environ, LC_ALL="C"))
    check(re.search("[▁▂▃▄▅▆▇█·]", ascii_out) is None and "  pool     |" in ascii_out,
          f"without a UTF-8 locale the sparklines are ASCII:\n{ascii_out}")


def check_reload(b, before):
    size = len(b.read_log())
    os.kill(broker_pid(b), signal.SIGHUP)
    wait_for("the reload", lambda: "Reloaded" in b.read_log()[size:], 20)
    # One more "minute" at least, so that the sample after the reload is there too.
    last = before["day"][-1]["seq"]
    after = wait_for("a day sample after the reload",
                     lambda: (lambda h: h if h["day"][-1]["seq"] > last + 1 else None)(hjson(b)),
                     30)
    old = {s["seq"]: s for s in before["day"]}
    kept = [s for s in after["day"] if s["seq"] in old]
    check(len(kept) == len(old) and all(s == old[s["seq"]] for s in kept),
          f"the reload kept every day sample ({len(kept)} of {len(old)})")
    check(everything_seen(after), f"and the totals: {after['sources']} {after['sinks']}")


def check_bad_interval(b):
    for bad in ("0", "10001", "ten"):
        p = run([prog("eb-brokerd"), "-c", b.conf, "-l", f"unix:{b.tmp}/bad.sock"],
                env=dict(os.environ, EB_HISTORY_INTERVAL_MS=bad, EB_LOG_TARGET="console"),
                timeout=20)
        err = p.stderr.decode()
        check(p.returncode == 1 and "EB_HISTORY_INTERVAL_MS" in err and f'"{bad}"' in err
              and "1-10000" in err, f"EB_HISTORY_INTERVAL_MS={bad} stops the broker with one "
              f"line: exit {p.returncode}, {err.strip()[-300:]}")


def test():
    me = os.getuid()
    b = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                "vm": {"role": "sink"},
                "local": {"role": "source,admin", "unix-uid": me, "key": False,
                          "max-credit-per-byte": 8}})
    b.env = {"EB_HISTORY_INTERVAL_MS": str(INTERVAL_MS)}
    b.start()
    sink = raw = None
    try:
        h = hjson(b)
        # systemd-socket-activate starts the broker at the first connection, the one above.
        check(b.wait_log("History sampled every 100 ms"), "the broker says it runs compressed")
        check(h["sources"] == [] and h["sinks"] == [], "no sources or sinks at first")

        # The pool is empty and no source is connected: the sink is answered EMPTY.
        sink = subprocess.Popen([prog("eb-sink-file"), "-b", b.tcp, "-u", "vm", "-k",
                                 b.keys["vm"], "--bytes", "32", "--timeout", "60"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for("an EMPTY answer in the history",
                 lambda: total(hjson(b)["hour"], "empty") >= 1, 30)

        # One credited PUT, then one of a repeated byte: the broker's own test withholds it.
        raw = Raw(b.sock)
        raw.send(MSG["HELLO"], struct.pack(">HBBIH", 1, ROLE_SOURCE, 0, 8000, 10) + b"raw source")
        t, _ = raw.recv()
        check(t == MSG["WELCOME"], "the raw source is welcome")
        check(put(raw, os.urandom(4096), 4096 * 8) == 4096 * 8, "4096 random bytes credited")
        check(put(raw, b"\x55" * 64, 512) == 0, "a PUT of one repeated byte is not")
        wait_for("the alarm in the history", lambda: total(hjson(b)["hour"], "alarms") >= 1, 30)

        data = os.path.join(b.tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(65536))
        run([prog("eb-source-file"), "-b", b.tcp, "-u", "alice", "-k", b.keys["alice"],
             "--credit-per-byte=8", data], check=True)
        out, err = sink.communicate(timeout=90)
        check(sink.returncode == 0 and len(out) == 32,
              f"the sink was served at last: {sink.returncode} {err.decode()[-300:]}")

        h = wait_for("everything in the day's samples and the totals",
                     lambda: (lambda x: x if everything_seen(x) else None)(hjson(b)), 30)
        check(all(s["interval_ms"] == INTERVAL_MS for s in h["hour"]) and
              all(s["interval_ms"] == 6 * INTERVAL_MS for s in h["day"]),
              "samples say what they span")
        seqs = [s["seq"] for s in h["hour"]]
        check(seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and len(seqs) <= 360,
              "the hour's samples in order, at most 360")
        # Sessions by role, as the samples see them: an admin that stays, the raw source.
        admin = Raw(b.sock)
        check(admin.hello(ROLE_ADMIN)[0] == MSG["WELCOME"], "an admin session is welcome")
        wait_for("the sessions by role in a sample",
                 lambda: [s for s in hjson(b)["hour"] if s["admins"] >= 1 and s["sources"] >= 1],
                 30)
        admin.close()
        check_text(b, h)
        check_reload(b, h)
        check_bad_interval(b)
    finally:
        if raw:
            raw.close()
        if sink and sink.poll() is None:
            sink.kill()
            sink.wait()
        b.cleanup()


if __name__ == "__main__":
    main(test)
