#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An admin acts at runtime with eb-brokerctl (docs/protocol.md 3.14 to 3.17, eb-brokerctl(1)):
drain and undrain, disconnect one session and every session of a user; only the admin role may,
each action is logged with who asked, and a burst past the limit is refused. Reloads, good and
bad, are seen in "eb-brokerctl status" and in eb-metrics, and the journal's reload line says what
changed."""
import json
import os
import re
import signal
import socket
import struct
import subprocess
import time

from eblib import (MSG, ROLE_SINK, Broker, Failure, Raw, check, main, prog, reserve_port, run,
                   tcp_listening, wait_for, write_key)

ERR_FORBIDDEN = 4
ACTION_REQ, ACTION = 16, 17


def ctl(b, *args, ok=True):
    p = run([prog("eb-brokerctl"), "-b", b.tcp, "-u", "admin", "-k", b.keys["admin"], *args])
    if ok and p.returncode != 0:
        raise Failure(f"eb-brokerctl {' '.join(args)} exited {p.returncode}: {p.stderr.decode()}")
    return p


def ctl_json(b, *args, ok=True):
    return json.loads(ctl(b, *args, "--json", ok=ok).stdout)


def sinks(b):
    return json.loads(ctl(b, "sinks", "--json").stdout)["sinks"]


def sink(b, user, n):
    """Sinks that wait on the empty pool: their sessions stay until they are closed. Long-lived
    (eb-sink-file --fifo, each with a reader): a one-shot sink ends its session after each
    EMPTY. The readers come first in the list, so that they are stopped before their sinks."""
    procs = []
    for _ in range(n):
        fifo = os.path.join(b.tmp, f"{user}-{time.monotonic_ns()}.fifo")
        s = subprocess.Popen([prog("eb-sink-file"), "-b", b.tcp, "-u", user, "-k", b.keys[user],
                              "--fifo", fifo],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for(f"the FIFO {fifo}", lambda: os.path.exists(fifo), 20)
        procs += [subprocess.Popen(["head", "-c", "4096", fifo], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL), s]
    return procs


def metrics(b):
    """One scrape of eb-metrics, as eb-metrics.socket runs it."""
    hold, port = reserve_port()
    hold.close()
    p = subprocess.Popen(["systemd-socket-activate", "--accept", "-l", f"127.0.0.1:{port}",
                          prog("eb-metrics"), "-b", b.tcp, "-u", "admin", "-k", b.keys["admin"]],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("eb-metrics' socket", lambda: tcp_listening(port), 10)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
    finally:
        p.terminate()
        p.wait(10)
    out = {}
    for line in data.decode().split("\r\n\r\n", 1)[1].splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def test():
    b = Broker({"admin": {"role": "admin"}, "g1": {"role": "sink"}, "g2": {"role": "sink"},
                "local": {"role": "sink", "unix-uid": os.getuid(), "key": False},
                "src": {"role": "source"}}).start()
    procs = []
    try:
        st = ctl_json(b, "status")
        check(st["drained"] is False and st["reloads"] == 0 and st["last_reload_successful"]
              and abs(st["config_loaded_ms"] / 1000 - time.time()) < 60 and st["upstream"] is None,
              f"status: not drained, no reload, loaded at start, no upstream ({st})")

        # Only the admin role acts: a sink's ACTION_REQ is refused and its session closed.
        raw = Raw(b.sock)
        t, _ = raw.hello(ROLE_SINK)
        raw.send(ACTION_REQ, struct.pack(">B3xQH", 1, 0, 0))
        t, p = raw.recv()
        code = struct.unpack(">H", p[:2])[0] if t == MSG["ERROR"] else None
        check(code == ERR_FORBIDDEN and ctl_json(b, "status")["drained"] is False,
              "a sink's DRAIN is refused with ERROR(FORBIDDEN) and drains nothing")
        raw.close()

        # Drain, twice (the second changes nothing and says so), then undrain.
        p = ctl(b, "drain")
        st = ctl_json(b, "status")
        check(st["drained"] and st["drained_by"] == "admin" and
              "Drained:  yes, by admin" in ctl(b, "status").stdout.decode(),
              f"drained by admin: {p.stdout.decode().strip()}")
        a = ctl_json(b, "drain")
        check(a["result"] == "unchanged", f"a second drain changes nothing: {a}")
        check(metrics(b).get("eb_drained") == 1, "eb-metrics: eb_drained 1")
        ctl(b, "undrain")
        check(ctl_json(b, "status")["drained"] is False, "undrained")

        # Disconnect one session, then every session of a user.
        procs = sink(b, "g1", 1) + sink(b, "g2", 2)
        wait_for("three sinks", lambda: len(sinks(b)) == 3, 20)
        g1 = [s["id"] for s in sinks(b) if s["user"] == "g1"][0]
        a = ctl_json(b, "disconnect", str(g1))
        check(a["result"] == "done" and a["sessions"] == 1 and
              all(s["id"] != g1 for s in sinks(b)), f"session {g1} disconnected: {a}")
        # Another user's sink is there while g2's go, and stays.
        procs += sink(b, "g1", 1)
        wait_for("g1's sink back", lambda: any(s["user"] == "g1" for s in sinks(b)), 20)
        a = ctl_json(b, "disconnect-user", "g2")
        left = [s["user"] for s in sinks(b)]
        check(a["result"] == "done" and a["sessions"] == 2 and "g2" not in left and "g1" in left,
              f"user g2's two sessions, and no one else's: {a}, left {left}")
        a = ctl_json(b, "disconnect", "999999", ok=False)
        check(a["result"] == "not found", f"no session 999999: {a}")
        a = ctl_json(b, "disconnect-user", "nobody", ok=False)
        check(a["result"] == "not found" and "no user nobody" in a["text"], f"no such user: {a}")
        log = b.read_log()
        check(f"Admin admin (tcp " in log and f"disconnected session {g1}" in log and
              "disconnected 2 sessions of user g2" in log and "drained:" in log,
              "each action is in the log with who asked")
        for p in procs:
            p.kill()
            p.wait()
        procs = []

        # A reload that adds, removes, re-keys and re-limits says so, in status and in the log.
        with open(b.conf) as f:
            conf = f.read()
        write_key(os.path.join(b.tmp, "g1-new.key"))
        conf = conf.replace(b.keys["g1"], os.path.join(b.tmp, "g1-new.key"))
        conf = re.sub(r"\[user g2\]\n(?:[^\[].*\n)*", "", conf)
        conf = conf.replace("[user src]\nrole = source\n",
                            "[user src]\nrole = source\nmax-credit-per-byte = 4\n")
        write_key(os.path.join(b.tmp, "g3.key"))
        conf += f"[user g3]\nrole = sink\nkey-file = {b.tmp}/g3.key\n"
        with open(b.conf, "w") as f:
            f.write(conf)
        before = time.time()
        b.proc.send_signal(signal.SIGHUP)
        wait_for("the reload", lambda: ctl_json(b, "status")["reloads"] == 1, 20,
                 detail=lambda: b.read_log()[-1500:])
        st = ctl_json(b, "status")
        want = "users added: g3; users removed: g2; keys changed: g1; limits changed: src"
        check(st["last_reload_text"] == want and st["last_reload_successful"] and
              st["config_loaded_ms"] / 1000 >= before - 1,
              f"status: the reload's changes ({st['last_reload_text']!r})")
        check(want in b.read_log(), "the journal's reload line says what changed")

        # A reload that fails: status and metrics say so, the running file stays.
        with open(b.conf, "a") as f:
            f.write("[user bad]\nrole = sideways\n")
        b.proc.send_signal(signal.SIGHUP)
        wait_for("the failed reload",
                 lambda: ctl_json(b, "status")["reload_failures"] == 1, 20)
        st = ctl_json(b, "status")
        text = ctl(b, "status").stdout.decode()
        check(not st["last_reload_successful"] and "sideways" in st["last_reload_text"] and
              "FAILED" in text, f"status: the failed reload and why ({st['last_reload_text']!r})")
        m = metrics(b)
        check(m.get("eb_config_last_reload_successful") == 0 and
              m.get("eb_config_last_reload_success_timestamp_seconds") == st["config_loaded_ms"] // 1000,
              "eb-metrics: eb_config_last_reload_successful 0, and the last good load's time")

        # A burst past the limit: 10 actions in 10 s at most, the next refused with its wait.
        # 21 in a row span two windows at most, so at least one is refused wherever the
        # window turns.
        answers = [ctl_json(b, "undrain", ok=False) for _ in range(21)]
        results = [a["result"] for a in answers]
        limited = [a for a in answers if a["result"] == "rate-limited"]
        check(limited and all(0 < a["retry_ms"] <= 10000 for a in limited) and
              results.count("unchanged") <= 20,
              f"a burst of actions is cut by the rate limit, with the wait ({results})")
        print(f"# burst of 21 undrains: {results.count('unchanged')} taken, "
              f"{len(limited)} refused")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        b.cleanup()


if __name__ == "__main__":
    main(test)
