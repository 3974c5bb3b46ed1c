#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One key per guest (issue 26): `eb-keygen --user NAME --role sink --conf-dir DIR` writes a key
and its [user NAME] drop-in, the broker takes both guests at a reload, each draws with its own
key and neither with the other's; removing guest1's drop-in and reloading revokes guest1 alone:
its session is closed and a new one refused, while guest2's session, drawing all the while,
carries on and is served."""
import json
import os
import signal
import subprocess
import time

from eblib import Broker, check, donate, main, prog, run, wait_for


def broker_pid(b):
    """The eb-brokerd process: systemd-socket-activate execs it in its own process."""
    deadline = time.time() + 10
    while time.time() < deadline:
        with open(f"/proc/{b.proc.pid}/comm") as f:
            if f.read().strip() == "eb-brokerd":
                return b.proc.pid
        time.sleep(0.05)
    raise AssertionError("eb-brokerd did not start")


def reload(b):
    before = len(b.read_log())
    os.kill(broker_pid(b), signal.SIGHUP)
    return wait_for("the reload's line", lambda: [
        l for l in b.read_log()[before:].splitlines() if "Reloaded" in l or "Reload failed" in l],
        10)[0]


def sinks(b):
    p = run([prog("eb-brokerctl"), "-b", b.unix, "sinks", "--json"])
    check(p.returncode == 0, f"eb-brokerctl sinks ({p.stderr.decode().strip()[-200:]})")
    return {s["user"]: s for s in json.loads(p.stdout)["sinks"]}


def sink(b, user, key, n):
    return subprocess.Popen([prog("eb-sink-file"), "-b", b.tcp, "-u", user, "-k", key,
                             "--bytes", str(n), "--timeout", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test():
    me = os.getuid()
    b = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                "local": {"role": "admin", "unix-uid": me, "key": False}}).start()
    procs = []
    try:
        sinks(b)  # the broker is socket-activated: a first connection starts it
        dropins = b.conf + ".d"  # with --config PATH, PATH.d/ is its drop-in directory
        keys = {g: os.path.join(b.tmp, f"{g}.key") for g in ("guest1", "guest2")}
        for g in keys:
            p = run([prog("eb-keygen"), "--user", g, "--role", "sink", "--conf-dir", dropins,
                     keys[g]])
            check(p.returncode == 0 and keys[g].encode() in p.stdout,
                  f"eb-keygen --user {g} writes its key and drop-in ({p.stderr.decode()[-200:]})")
        with open(os.path.join(dropins, "user-guest1.conf")) as f:
            text = f.read()
        print("# " + "\n# ".join(text.splitlines()))
        check("[user guest1]\nrole = sink\nkey-file = " + keys["guest1"] + "\n" in text,
              "the drop-in is the user's section: its role and its key")
        with open(keys["guest1"]) as f1, open(keys["guest2"]) as f2:
            check(f1.read() != f2.read(), "each guest has a key of its own")
        p = run([prog("eb-keygen"), "--user", "guest1", "--role", "sink", "--conf-dir", dropins,
                 os.path.join(b.tmp, "again.key")])
        check(p.returncode == 1 and b"has a drop-in already" in p.stderr
              and not os.path.exists(os.path.join(b.tmp, "again.key")),
              "a second key for guest1 is refused, and no key is written")
        p = run([prog("eb-keygen"), "--user", "guest3", "--role", "sink", "--conf-dir", dropins,
                 keys["guest2"]])
        check(p.returncode == 1 and not os.path.exists(os.path.join(dropins, "user-guest3.conf")),
              "a key that cannot be written (guest2's path) leaves no drop-in naming it")
        line = reload(b)
        check("Reloaded" in line and "4 users" in line and "guest1" in line and "guest2" in line,
              f"the broker reloads with both guests: {line}")

        data = os.path.join(b.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(8192))
        check(donate(b, "alice", data).returncode == 0, "alice donates 8 KiB")
        for g in keys:
            p = run([prog("eb-sink-file"), "-b", b.tcp, "-u", g, "-k", keys[g], "--bytes", "32",
                     "--timeout", "20"])
            check(p.returncode == 0 and len(p.stdout) == 32, f"{g} draws with its own key")
        p = run([prog("eb-sink-file"), "-b", b.tcp, "-u", "guest1", "-k", keys["guest2"],
                 "--bytes", "32", "--timeout", "5"])
        check(p.returncode != 0, "guest1 cannot draw with guest2's key")

        # Both draw more than the pool holds: their sessions wait, answered EMPTY.
        g1 = sink(b, "guest1", keys["guest1"], 16384)
        g2 = sink(b, "guest2", keys["guest2"], 16384)
        procs += [g1, g2]
        before = wait_for("both guests' sessions", lambda: (lambda s: s if {"guest1", "guest2"}
                                                            <= s.keys() else None)(sinks(b)), 20)
        # guest1 revoked alone: its drop-in removed, the broker reloaded.
        os.unlink(os.path.join(dropins, "user-guest1.conf"))
        line = reload(b)
        print(f"# {line}")
        check("Reloaded" in line, f"the reload without guest1's drop-in succeeds: {line}")
        out, err = g1.communicate(timeout=30)
        check(g1.returncode != 0 and b"revoked" in err,
              f"guest1's session is closed: {err.decode().strip()[-200:]}")
        after = sinks(b)
        check("guest1" not in after and after.get("guest2", {}).get("id") == before["guest2"]["id"],
              f"guest2's session carries on (id {before['guest2']['id']})")
        for _ in range(4):
            with open(data, "wb") as f:
                f.write(os.urandom(32768))
            check(donate(b, "alice", data).returncode == 0, "alice donates 32 KiB")
        out, err = g2.communicate(timeout=60)
        check(g2.returncode == 0 and len(out) == 16384,
              f"guest2's session, drawing through the revocation, is served all 16384 bytes "
              f"({err.decode().strip()[-200:]})")
        p = run([prog("eb-sink-file"), "-b", b.tcp, "-u", "guest1", "-k", keys["guest1"],
                 "--bytes", "32", "--timeout", "5"])
        check(p.returncode != 0, "guest1 is refused a new session")
        check('unknown user "guest1"' in b.read_log(), "the broker names it an unknown user")
        p = run([prog("eb-sink-file"), "-b", b.tcp, "-u", "guest2", "-k", keys["guest2"],
                 "--bytes", "32", "--timeout", "20"])
        check(p.returncode == 0 and len(p.stdout) == 32, "guest2 still draws with its key")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        b.cleanup()


main(test)
