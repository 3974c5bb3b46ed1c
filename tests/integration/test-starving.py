#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A starving sink is visible. A sink asking an empty pool with no source connected is answered
EMPTY (retry in 5 s) and waits to ask again: between its GETs the broker holds nothing for it, but
it is still without entropy. `eb-brokerctl sinks` shows how long it has waited and its EMPTY
answers, `eb-brokerctl users` the user's, and eb-metrics counts it in eb_sinks_waiting and its
EMPTY answers in eb_empty_answers_total and eb_user_empty_answers_total. Once the pool is fed and
the sink served, it waits no more. An old client (rows of layout version 0) reads the same
tables as before: integration-brokerctl reads them by hand that way."""
import json
import os
import subprocess

from eblib import (Broker, brokerctl, check, donate, main, need, prog, reserve_port, run,
                   tcp_listening, wait_for)

WAIT_EMPTY = 'eb_sinks_waiting{reason="empty"}'
WAIT_QUOTA = 'eb_sinks_waiting{reason="quota"}'


def get(port):
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    out = {}
    for line in data.partition(b"\r\n\r\n")[2].decode().splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def ctl(b, what):
    return json.loads(brokerctl(b, what, "--json"))[what]


def text(b, what):
    p = run([prog("eb-brokerctl"), "-b", b.unix, what])
    check(p.returncode == 0, f"eb-brokerctl {what} ({p.stderr.decode().strip()[-200:]})")
    return p.stdout.decode()


def test():
    need("systemd-socket-activate")
    me = os.getuid()
    b = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                "vm": {"role": "sink"},
                "local": {"role": "admin", "unix-uid": me, "key": False}}).start()
    mhold, mport = reserve_port()
    exporter = sink = reader = None
    try:
        cmd = ["systemd-socket-activate", "--accept", "-l", f"127.0.0.1:{mport}"]
        for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            if var in os.environ:
                cmd += ["-E", f"{var}={os.environ[var]}"]
        cmd += [prog("eb-metrics"), "-b", b.unix, "--timeout", "2"]
        exporter = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                    stderr=open(os.path.join(b.tmp, "metrics.log"), "wb"))
        wait_for("eb-metrics' socket", lambda: tcp_listening(mport), 10)
        m = get(mport)
        check(m.get(WAIT_EMPTY) == 0 and m.get(WAIT_QUOTA) == 0
              and m.get("eb_empty_answers_total") == 0,
              f"nobody waits and nothing was answered EMPTY at first "
              f"({m.get(WAIT_EMPTY)}, {m.get('eb_empty_answers_total')})")

        # The pool is empty and no source is connected: the sink is told EMPTY, retry in 5 s.
        # A long-lived sink (--fifo, with a reader of 32 bytes): a one-shot sink ends its
        # session after each EMPTY and its row would not stay to be read.
        fifo = os.path.join(b.tmp, "vm.fifo")
        sink = subprocess.Popen([prog("eb-sink-file"), "-b", b.tcp, "-u", "vm", "-k",
                                 b.keys["vm"], "--fifo", fifo],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for(f"the FIFO {fifo}", lambda: os.path.exists(fifo), 20)
        reader = subprocess.Popen(["head", "-c", "32", fifo], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        wait_for("the sink is answered EMPTY",
                 lambda: [s for s in ctl(b, "sinks") if s["user"] == "vm" and
                          s["empty_answers"] >= 1])
        # Between the EMPTY and its retry it holds no GET at the broker, but it starves.
        row = wait_for("a moment between its GETs",
                       lambda: [s for s in ctl(b, "sinks") if s["user"] == "vm" and
                                s["waiting_ms"] is None and s["starving_ms"] is not None])[0]
        print(f"# the starving sink's row: {row}")
        check(row["starving_ms"] >= 200 and row["empty_answers"] >= 1,
              f"its row says how long it has waited and its EMPTY answers ({row})")
        table = text(b, "sinks")
        print("# " + "\n# ".join(table.splitlines()))
        line = [l for l in table.splitlines() if " vm " in l]
        # ... EMPTY, QUOTA, WAITING, WAITS FOR, LAST SEEN
        cells = line[0].split() if line else []
        check(cells and cells[-3] != "-" and cells[-2] == "empty" and int(cells[-5]) >= 1,
              f"`eb-brokerctl sinks` shows its EMPTY answers, its wait and why, not '-' ({line})")
        users = {u["name"]: u for u in ctl(b, "users")}
        check(users["vm"]["empty_answers"] >= 1 and users["alice"]["empty_answers"] == 0,
              f"`eb-brokerctl users` counts the EMPTY answers per user ({users['vm']})")
        m = get(mport)
        vm = m.get('eb_user_empty_answers_total{user="vm"}')
        print(f"# metrics: {WAIT_EMPTY} {m.get(WAIT_EMPTY)}, "
              f"eb_empty_answers_total {m.get('eb_empty_answers_total')}, vm {vm}")
        check(m.get(WAIT_EMPTY) == 1 and m.get(WAIT_QUOTA) == 0,
              "eb_sinks_waiting counts the starving sink, its reason the empty pool")
        check(m.get("eb_empty_answers_total", 0) >= 1 and
              m.get('eb_user_empty_answers_total{user="vm"}', 0) >= 1,
              "eb_empty_answers_total and eb_user_empty_answers_total count its EMPTY answers")

        # Fed, the pool serves it; it waits no more.
        data = os.path.join(b.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(16384))
        p = donate(b, "alice", data)
        check(p.returncode == 0, "the pool is fed")
        out, err = reader.communicate(timeout=30)
        check(reader.returncode == 0 and len(out) == 32,
              f"the sink is served after its retry ({err.decode().strip()[-200:]})")
        m = wait_for("eb_sinks_waiting falls to 0", lambda: (lambda x: x if x.get(
            WAIT_EMPTY) == 0 else None)(get(mport)))
        check(m.get('eb_user_empty_answers_total{user="vm"}', 0) >= 1,
              "the user's EMPTY answers outlive its session")
    finally:
        for p in (reader, sink):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        if exporter and exporter.poll() is None:
            exporter.terminate()
            exporter.wait(20)
        mhold.close()
        b.cleanup()


main(test)
