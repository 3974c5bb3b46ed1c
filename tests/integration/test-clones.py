#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The broker notices clones (issue 28): two sessions of one guest's key (a [user] with
guest = yes) drawing at once are copies of one machine. The journal has one warning line with
its own MESSAGE_ID (the catalog's) naming the user, its key and both peers; `eb-brokerctl status`
counts the clones, `eb-brokerctl sinks` marks both sessions, eb-metrics counts them in
eb_clone_sessions_total (promtool check metrics clean); a third copy is counted and marked but
not logged again; every copy is served all it asked for. The sinks are long-lived (eb-sink-file --fifo
keeps its session open while it waits). A user without guest = yes (a fleet's shared key,
max-sessions 128) draws from two sessions at once unflagged, and a guest that draws
from one session after another is no clone. As root the journal is a socket of the test's own
in a private mount namespace (as integration-journal); otherwise the line is read on stderr."""
import json
import os
import re
import socket
import subprocess

from eblib import (Broker, brokerctl, check, donate, inner_run, main, need, prog, private_journal,
                   rerun_unshared, reserve_port, run, tcp_listening, wait_for)

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MSGID_CLONE = "d06b61be4841454e8c5c772acb196431"


def http(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        data = b"".join(iter(lambda: s.recv(65536), b""))
    return data.decode(errors="replace").split("\r\n\r\n", 1)[1]


def metrics(body):
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def sinks(b, user):
    return [s for s in json.loads(brokerctl(b, "sinks", "--json"))["sinks"] if s["user"] == user]


def sink(b, user, n, procs):
    """A long-lived sink (eb-sink-file --fifo keeps its session open, as a guest's feed does) and
    a reader of n bytes from its FIFO: the reader's process is returned, the sink's is kept in
    procs to be stopped. A one-shot sink leaves an empty broker between its retries, and two of
    those seldom hold sessions at once."""
    fifo = os.path.join(b.tmp, f"fifo-{len(procs)}")
    procs.append(subprocess.Popen([prog("eb-sink-file"), "-b", b.tcp, "-u", user, "-k",
                                   b.keys[user], "--fifo", fifo],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    wait_for(f"the FIFO {fifo}", lambda: os.path.exists(fifo), 20)
    reader = subprocess.Popen(["head", "-c", str(n), fifo], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    procs.append(reader)
    return reader


def inner():
    j = private_journal()
    b = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                "vm1": {"role": "sink", "guest": "yes"},
                "fleet": {"role": "sink"},
                "local": {"role": "admin", "unix-uid": os.getuid(), "key": False}})
    if j:
        b.log_target = "journal"
    b.start()
    mhold, mport = reserve_port()
    exporter = None
    procs = []
    try:
        cmd = ["systemd-socket-activate", "--accept", "-l", f"127.0.0.1:{mport}"]
        for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            if var in os.environ:
                cmd += ["-E", f"{var}={os.environ[var]}"]
        cmd += [prog("eb-metrics"), "-b", b.unix, "--timeout", "2"]
        exporter = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                    stderr=open(os.path.join(b.tmp, "metrics.log"), "wb"))
        wait_for("eb-metrics' socket", lambda: tcp_listening(mport), 10)

        # The pool is empty: every sink waits, answered EMPTY, its session live and drawing.
        f1, f2 = sink(b, "fleet", 64, procs), sink(b, "fleet", 64, procs)
        g1, g2 = sink(b, "vm1", 64, procs), sink(b, "vm1", 64, procs)
        rows = wait_for("both of vm1's sessions marked as clones", lambda: (
            lambda v: v if len(v) == 2 and all(s["clone"] for s in v) else None)(sinks(b, "vm1")),
            30)
        print(f"# vm1's sessions: {[(s['id'], s['peer'], s['empty_answers']) for s in rows]}")
        fleet = wait_for("fleet's two sessions drawing", lambda: (
            lambda v: v if len(v) == 2 and all(s["empty_answers"] >= 1 for s in v) else None)(
            sinks(b, "fleet")), 30)
        check(not any(s["clone"] for s in fleet),
              "fleet (no guest = yes) draws from two sessions at once unflagged")
        st = json.loads(brokerctl(b, "status", "--json"))
        check(st.get("clones") == 1, f"eb-brokerctl status counts one clone: {st.get('clones')}")
        text = brokerctl(b, "status")
        check(re.search(r"^Clones: +1 guest sessions", text, re.M),
              f"eb-brokerctl status says it: {text.splitlines()[-3:]}")

        body = http(mport, "/metrics")
        m = metrics(body)
        check(m.get("eb_clone_sessions_total") == 1,
              f"eb_clone_sessions_total is 1: {m.get('eb_clone_sessions_total')}")
        p = run(["promtool", "check", "metrics"], input=body.encode())
        lint = (p.stdout + p.stderr).decode().strip()
        check(p.returncode == 0 and not lint,
              f"promtool check metrics: exit {p.returncode}, {lint or 'no lint'}")

        # A third copy: counted and marked, and the journal is not told again.
        g3 = sink(b, "vm1", 64, procs)
        wait_for("three of vm1's sessions marked", lambda: (
            lambda v: len(v) == 3 and all(s["clone"] for s in v))(sinks(b, "vm1")), 30)
        check(json.loads(brokerctl(b, "status", "--json")).get("clones") == 2,
              "the third copy is counted: 2")
        table = brokerctl(b, "sinks")
        marked = [l for l in table.splitlines() if re.match(r"^\d+\* ", l)]
        print("# " + "\n# ".join(table.splitlines()))
        check(len(marked) == 3 and all(" vm1 " in l for l in marked)
              and "* a clone:" in table,
              "eb-brokerctl sinks marks vm1's three sessions and says what the mark means")

        if j:
            entries = j.entries(MSGID_CLONE)
            with open(os.path.join(SRC, "catalog", "entropy-broker.catalog")) as f:
                catalog = f.read()
            check(f"-- {MSGID_CLONE}\n" in catalog, "the catalog explains the MESSAGE_ID")
            lines = [e.get("MESSAGE", "") for e in entries]
            check(len(entries) == 1 and entries[0].get("EB_USER") == "vm1"
                  and entries[0].get("EB_KEY_ID") == "(default)"
                  and entries[0].get("EB_SESSIONS") == "2"
                  and entries[0].get("EB_PEER", "").startswith("tcp ")
                  and entries[0].get("EB_OTHER_PEER", "").startswith("tcp ")
                  and entries[0].get("PRIORITY") == "4",
                  f"one warning with its MESSAGE_ID, EB_USER=, EB_KEY_ID=, EB_SESSIONS=, "
                  f"EB_PEER= and EB_OTHER_PEER= for three copies: {entries}")
        else:
            lines = [l for l in b.read_log().splitlines() if "sessions at once" in l]
            check(len(lines) == 1, f"one log line for three copies: {lines}")
        print(f"# the journal: {lines}")
        check(lines and re.search(r"Guest vm1 \(key \(default\)\) draws from 2 sessions at once: "
                                  r"tcp \S+ and tcp \S+", lines[0]),
              "the line names the guest, its key and both peers")

        # Every copy, and fleet's sinks, are served all they asked for.
        # A --fifo sink draws ahead of its reader: enough for every one of them.
        data = os.path.join(b.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(131072))
        check(donate(b, "alice", data).returncode == 0, "alice donates 128 KiB")
        for p in (g1, g2, g3, f1, f2):
            out, err = p.communicate(timeout=90)
            check(p.returncode == 0 and len(out) == 64,
                  f"a sink's reader is served its 64 bytes ({err.decode().strip()[-200:]})")

        # One session after another is no clone: the count stays where it was. The copies'
        # long-lived sinks are stopped first.
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(20)
        wait_for("vm1's sessions gone", lambda: not sinks(b, "vm1"), 20)
        for _ in range(2):
            p = run([prog("eb-sink-file"), "-b", b.tcp, "-u", "vm1", "-k", b.keys["vm1"],
                     "--bytes", "32", "--timeout", "20"])
            check(p.returncode == 0 and len(p.stdout) == 32, "vm1 draws alone")
        check(json.loads(brokerctl(b, "status", "--json")).get("clones") == 2,
              "vm1 drawing from one session after another adds no clone")
    finally:
        for p in [exporter, *procs]:
            if p and p.poll() is None:
                p.kill()
                p.wait()
        mhold.close()
        b.cleanup()


def test():
    need("systemd-socket-activate")
    need("promtool")
    if inner_run() or os.geteuid() != 0:
        return inner()
    rerun_unshared(private_run=True, timeout=100)


main(test)
