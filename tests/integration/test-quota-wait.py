#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A sink starved by its user's quota shows its reason everywhere an operator looks (issue 26):
the pool is full, the user's quota-bits-per-hour is spent, and the sink is answered QUOTA.
`eb-brokerctl sinks` says it waits for "quota" and counts its QUOTA answers, `eb-brokerctl users`
the user's; eb-metrics counts it in eb_sinks_waiting{reason="quota"} and eb_quota_answers_total;
the status page has a banner naming it and the quota, and its sinks table the quota column; and
the journal has one line with its own MESSAGE_ID (the catalog's) naming the user, its quota and
when it refills, however often the sink retries. As root the journal is a socket of the test's
own in a private mount namespace (as integration-journal); otherwise the line is read on stderr.
"""
import json
import os
import re
import socket
import subprocess

from eblib import (Broker, brokerctl, check, donate, inner_run, main, need, prog, private_journal,
                   rerun_unshared, reserve_port, tcp_listening, wait_for)

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MSGID_QUOTA_SPENT = "9e0aec3866724838af0c20345890d6e8"
QUOTA = 1024


def http(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        data = b"".join(iter(lambda: s.recv(65536), b""))
    return data.partition(b"\r\n\r\n")[2].decode()


def metrics(port):
    out = {}
    for line in http(port, "/metrics").splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def inner():
    j = private_journal()
    b = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                "vm": {"role": "sink", "quota-bits-per-hour": QUOTA},
                "local": {"role": "admin", "unix-uid": os.getuid(), "key": False}})
    if j:
        b.log_target = "journal"
    b.start()
    mhold, mport = reserve_port()
    exporter = sink = None
    readers = []
    try:
        cmd = ["systemd-socket-activate", "--accept", "-l", f"127.0.0.1:{mport}"]
        for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            if var in os.environ:
                cmd += ["-E", f"{var}={os.environ[var]}"]
        cmd += [prog("eb-metrics"), "-b", b.unix, "--timeout", "2"]
        exporter = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                    stderr=open(os.path.join(b.tmp, "metrics.log"), "wb"))
        wait_for("eb-metrics' socket", lambda: tcp_listening(mport), 10)

        data = os.path.join(b.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(65536))
        check(donate(b, "alice", data).returncode == 0, "alice fills the pool")
        # A long-lived sink (--fifo, with a reader), which asks 4 KiB at a time: more than the
        # 1024 bits an hour the quota pays for. A one-shot sink ends its session after each
        # QUOTA answer and its row would not stay to be read.
        def long_lived(n):
            fifo = os.path.join(b.tmp, f"vm-{len(readers)}.fifo")
            p = subprocess.Popen([prog("eb-sink-file"), "-b", b.tcp, "-u", "vm", "-k",
                                  b.keys["vm"], "--fifo", fifo],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            wait_for(f"the FIFO {fifo}", lambda: os.path.exists(fifo), 20)
            readers.append(subprocess.Popen(["head", "-c", str(n), fifo],
                                            stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
            return p

        sink = long_lived(256)
        rows = wait_for("the sink answered QUOTA", lambda: [
            s for s in json.loads(brokerctl(b, "sinks", "--json"))["sinks"]
            if s["user"] == "vm" and s["quota_answers"] >= 1 and s["starving_ms"]], 30)
        row = rows[0]
        print(f"# the sink's row: {row}")
        check(row["wait_reason"] == "quota" and row["empty_answers"] == 0
              and row["quota_left_bits"] is not None,
              "eb-brokerctl sinks --json: wait_reason \"quota\", QUOTA answers, no EMPTY")
        table = brokerctl(b, "sinks")
        print("# " + "\n# ".join(table.splitlines()))
        head, line = table.splitlines()[0], [l for l in table.splitlines() if " vm " in l]
        check("WAITS FOR" in head and line and line[0].split()[-2] == "quota",
              f"`eb-brokerctl sinks` says the sink waits for its quota ({line})")
        users = {u["name"]: u for u in json.loads(brokerctl(b, "users", "--json"))["users"]}
        check(users["vm"]["quota_answers"] >= 1 and users["vm"]["empty_answers"] == 0,
              f"`eb-brokerctl users` counts the user's QUOTA answers ({users['vm']})")
        st = json.loads(brokerctl(b, "status", "--json"))
        check(st["pool_bits"] > 100000, f"all the while the pool is far from empty "
              f"({st['pool_bits']} bits)")

        m = metrics(mport)
        print(f"# metrics: {[(k, v) for k, v in m.items() if 'quota' in k or 'waiting' in k]}")
        check(m.get('eb_sinks_waiting{reason="quota"}') == 1
              and m.get('eb_sinks_waiting{reason="empty"}') == 0,
              "eb_sinks_waiting{reason=\"quota\"} counts it, reason \"empty\" does not")
        check(m.get("eb_quota_answers_total", 0) >= 1
              and m.get('eb_user_quota_answers_total{user="vm"}', 0) >= 1
              and m.get('eb_user_quota_left_bytes{user="vm"}') is not None,
              "eb_quota_answers_total and eb_user_quota_answers_total count its QUOTA answers")

        page = http(mport, "/")
        banner = re.search(r'<p class="alarm">(.*?)</p>', page, re.S)
        print(f"# the page's banner: {banner and banner.group(1)}")
        check(banner and "<b>Starving:</b> sink vm" in banner.group(1)
              and "quota is spent" in banner.group(1),
              "the status page's banner names the sink and its spent quota")
        sinks = page[page.index("<h2>Sinks</h2>"):page.index("<h2>Upstreams</h2>")]
        check("<th>quota left, bits</th>" in sinks and "<th>QUOTA answers</th>" in sinks
              and "(quota)</td>" in sinks,
              "the page's sinks table has the quota column and the reason of the wait")

        # One line, however often the sink asks again: let it retry a while.
        sink.kill()
        sink.wait()
        sink = long_lived(64)
        wait_for("the second sink answered QUOTA too", lambda: [
            s for s in json.loads(brokerctl(b, "sinks", "--json"))["sinks"]
            if s["user"] == "vm" and s["quota_answers"] >= 1], 30)
        if j:
            entries = j.entries(MSGID_QUOTA_SPENT)
            with open(os.path.join(SRC, "catalog", "entropy-broker.catalog")) as f:
                catalog = f.read()
            check(f"-- {MSGID_QUOTA_SPENT}\n" in catalog, "the catalog explains the MESSAGE_ID")
            lines = [e.get("MESSAGE", "") for e in entries]
            check(len(entries) == 1 and entries[0].get("EB_USER") == "vm"
                  and entries[0].get("EB_QUOTA_BITS_PER_HOUR") == str(QUOTA)
                  and int(entries[0].get("EB_RETRY_MS", "0")) > 0
                  and entries[0].get("PRIORITY") == "5",
                  f"one journal entry with its MESSAGE_ID, EB_USER=, EB_QUOTA_BITS_PER_HOUR= and "
                  f"EB_RETRY_MS= for two sinks' QUOTA answers: {entries}")
        else:
            lines = [l for l in b.read_log().splitlines() if "spent its quota" in l]
            check(len(lines) == 1, f"one log line for two sinks' QUOTA answers: {lines}")
        print(f"# the journal: {lines}")
        check(lines and re.search(rf"User vm spent its quota of {QUOTA} bits an hour .* "
                                  r"refills enough in \d+ ms", lines[0]),
              "it names the user, what it spent and when its quota refills")
    finally:
        for p in (sink, exporter, *readers):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        mhold.close()
        b.cleanup()


def test():
    need("systemd-socket-activate")
    if inner_run() or os.geteuid() != 0:
        return inner()
    rerun_unshared(private_run=True, timeout=100)


main(test)
