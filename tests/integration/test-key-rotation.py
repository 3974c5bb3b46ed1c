#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A key rotated without an outage (docs/protocol.md 1.1, eb-brokerd.conf(5) "Rotate a key"), for
a sink's key, an admin's and a downstream broker's: while a storm of fresh draws (each a new TLS session, as a booting
VM makes) runs with the user's key, a second key is added with an id (a reload that closes
nothing), the storm moves to it (--key-id), and the old key is removed (a reload that closes
exactly the sessions that logged in with it). Not one draw fails, and the reload lines say what
they did. Sessions held open with each key (attack-tls-peer busy=1) show which ones are closed.
A downstream broker moves by a reload of its own with its [upstream] key-file= and key-id=, under
a storm of fresh draws through it: the reload stages the new key and says so, its session with
the upstream goes on with the old key until the upstream removes that key, which closes it (and
the held one), and the downstream connects again at once with the new key; not one draw through
it fails."""
import os
import signal
import subprocess
import threading
import time

from eblib import BUILD, Broker, check, donate, main, prog, wait_for

TLS_PEER = os.path.join(BUILD, "tests", "attack-tls-peer")
THREADS = 3
ROLE_SINK, ROLE_ADMIN = "2", "4"


def hup(b):
    """Sends SIGHUP and returns the reload's summary line."""
    before = len(b.read_log())
    os.kill(b.proc.pid, signal.SIGHUP)
    line = wait_for("the reload's summary line", lambda: next(
        (l for l in b.read_log()[before:].splitlines() if "Reloaded" in l), None), timeout=20)
    return line, b.read_log()[before:]


class Held:
    """One session held open with identity and key, in the role given."""

    def __init__(self, b, identity, key, roles):
        self.p = subprocess.Popen([TLS_PEER, b.host, str(b.port), identity, key, "busy=1"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=dict(os.environ, TLS_PEER_ROLES=roles))
        check(self.p.stdout.readline().strip() == "held", f"{identity} holds a session")

    def closed(self):
        """Whether the broker closed the session by now; ends the peer."""
        out, _ = self.p.communicate("\n", timeout=20)
        check("welcome 1" in out, f"the held session was welcome ({out.split()})")
        return "closed 1" in out


class Storm:
    """Fresh sessions, one after the other on each of THREADS threads, each with the credentials
    in force when it starts: cmd(creds) is the command line of one."""

    def __init__(self, cmd, creds):
        self.cmd, self.creds = cmd, creds
        self.ok = self.failed = 0
        self.done_with = {}  # creds -> draws finished with them
        self.errors = []
        self.stop = False
        self.go = threading.Event()  # cleared: no new session starts
        self.go.set()
        self.active = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run) for _ in range(THREADS)]
        for t in self.threads:
            t.start()

    def run(self):
        while not self.stop:
            if not self.go.wait(0.1):
                continue
            with self.lock:
                self.active += 1
            creds = self.creds
            p = subprocess.run(self.cmd(creds), capture_output=True, timeout=60)
            with self.lock:
                self.active -= 1
                if p.returncode == 0:
                    self.ok += 1
                    self.done_with[creds] = self.done_with.get(creds, 0) + 1
                else:
                    self.failed += 1
                    self.errors.append(p.stderr.decode(errors="replace").strip())

    def move(self, creds):
        """Moves the storm to creds; returns once every thread finished one session with them,
        so that none with the old ones is still under way."""
        with self.lock:
            start = self.done_with.get(creds, 0)
        self.creds = creds
        wait_for(f"{THREADS} sessions with the new key",
                 lambda: self.done_with.get(creds, 0) >= start + 2 * THREADS, timeout=60)

    def pause(self):
        """No new session starts; returns once those under way are done."""
        self.go.clear()
        wait_for("the storm's sessions under way", lambda: self.active == 0, timeout=60)

    def end(self):
        self.stop = True
        for t in self.threads:
            t.join(90)


def new_key(b, user):
    """A second key for user, written by eb-keygen, which says the line that adds it."""
    new = os.path.join(b.tmp, f"{user}-2.key")
    # eb-keygen writes the key and says the line that adds it.
    p = subprocess.run([prog("eb-keygen"), "--key-id", "2", new], capture_output=True,
                       text=True, timeout=20)
    check(p.returncode == 0 and p.stdout == f"key = 2 {new}\n",
          f"eb-keygen --key-id prints the line to add ({p.stdout.strip()!r})")
    return new, p.stdout


def rotate(b, user, roles, storm_cmd, what, move=None, others_on_old=0):
    """Rotates user's key (key-file= to key = 2 PATH) under a storm; checks what each step did.
    move(new key): moves the clients that are not the storm's, if any. others_on_old: sessions
    besides the held one still on the old key when it is removed (a downstream broker's)."""
    old = b.keys[user]
    new, line = new_key(b, user)
    with open(b.conf) as f:
        original = f.read()
    held_old = Held(b, user, old, roles)
    storm = Storm(storm_cmd, (old, None))
    try:
        wait_for(f"{what}: draws with the old key", lambda: storm.ok >= 2 * THREADS, timeout=60)
        # 1. The new key beside the old: nothing is closed.
        with open(b.conf, "w") as f:
            f.write(original.replace(f"key-file = {old}\n", f"key-file = {old}\n{line}"))
        line, _ = hup(b)
        check("keys: 1 added, 0 removed, 0 sessions closed for a removed key" in line,
              f"{what}: adding a key closes nothing ({line})")
        # 2. The clients move to it, by its id; one session stays on each key.
        if move:
            move(new)
            storm.move(storm.creds)
        else:
            storm.move((new, "2"))
        held_new = Held(b, f"{user}/2", new, roles)
        # 3. The old key goes: its sessions, and only those, are closed.
        with open(b.conf, "w") as f:
            f.write(original.replace(f"key-file = {old}\n", f"key = 2 {new}\n"))
        line, log = hup(b)
        n = 1 + others_on_old
        check(f"keys: 0 added, 1 removed, {n} sessions closed for a removed key" in line,
              f"{what}: removing the old key closes its {n} session(s) ({line})")
        closing = [l for l in log.splitlines()
                   if "the key it logged in with was removed or replaced" in l]
        check(len(closing) == n and all(f"(user {user})" in l for l in closing),
              f"{what}: {n} session(s) closed, saying why ({closing})")
        after = storm.ok
        wait_for(f"{what}: draws after the removal",
                 lambda: storm.ok >= after + 2 * THREADS, timeout=60)
    finally:
        storm.end()
    check(held_old.closed(), f"{what}: the session of the old key was closed")
    check(not held_new.closed(), f"{what}: the session of the new key was not")
    print(f"# {what}: {storm.ok} fresh sessions during the rotation, {storm.failed} failed")
    check(storm.failed == 0, f"{what}: no fresh session failed ({storm.errors[:3]})")
    # The bare name now means the user's one key left: an old client that sends it goes on.
    b.keys[user] = new


def test():
    b = Broker({"guests": {"role": "sink"}, "ops": {"role": "admin"},
                "donor": {"role": "source", "max-credit-per-byte": 8}})
    try:
        b.start()
        data = os.path.join(b.tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(120 * 1024))
        check(donate(b, "donor", data, credit=8).returncode == 0, "the pool is filled")

        def sink(creds):
            key, key_id = creds
            return [prog("eb-sink-file"), "-b", b.tcp, "-u", "guests", "-k", key,
                    *(["--key-id", key_id] if key_id else []), "--bytes", "32",
                    "--timeout", "30"]

        def admin(creds):
            key, key_id = creds
            return [prog("eb-brokerctl"), "-b", b.tcp, "-u", "ops", "-k", key,
                    *(["--key-id", key_id] if key_id else []), "status"]

        rotate(b, "guests", ROLE_SINK, sink, "a sink's key")
        rotate(b, "ops", ROLE_ADMIN, admin, "an admin's key")
        p = subprocess.run(sink((b.keys["guests"], None)), capture_output=True, timeout=60)
        check(p.returncode == 0, "the bare user name draws with the one key left")
        check(b.alive(), "the broker is still running")
    finally:
        b.cleanup()
    downstream()


def downstream():
    """The upstream's user edge is a downstream broker, whose sinks the storm draws through."""
    up = Broker({"edge": {"role": "sink", "downstream-broker": "yes"},
                 "donor": {"role": "source", "max-credit-per-byte": 8}}, capacity=1 << 21)
    down = None
    try:
        up.start()
        data = os.path.join(up.tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(240 * 1024))
        check(donate(up, "donor", data, credit=8).returncode == 0, "the upstream is filled")
        upstream = f"""
[upstream]
broker = {up.tcp}
user = edge
key-file = {up.keys['edge']}
low-water-percent = 50
draw-bits = 16384
"""
        down = Broker({"guest": {"role": "sink"}}, capacity=131072, activate=False,
                      broker_extra=upstream)
        down.start()
        check(down.wait_log(f"Drawing from upstream {up.tcp} as user edge", 20),
              "the downstream draws from the upstream")

        def sink(creds):
            return [prog("eb-sink-file"), "-b", down.tcp, "-u", "guest", "-k",
                    down.keys["guest"], "--bytes", "32", "--timeout", "30"]

        def move(new):
            # eb-brokerd.conf(5), "Rotate a key": a reload of the downstream stages its
            # [upstream] key-file= and key-id=; the session it holds keeps the old key.
            with open(down.conf) as f:
                text = f.read()
            # A key file that does not load fails the reload, as a [user]'s does: nothing
            # changes, and the error names the file.
            missing = os.path.join(down.tmp, "missing.key")
            with open(down.conf, "w") as f:
                f.write(text.replace(f"key-file = {up.keys['edge']}\n",
                                     f"key-file = {missing}\nkey-id = 2\n"))
            before = len(down.read_log())
            os.kill(down.proc.pid, signal.SIGHUP)
            failed = wait_for("the failed reload's line", lambda: next(
                (l for l in down.read_log()[before:].splitlines() if "Reload failed" in l),
                None), timeout=20)
            check("[upstream]: " in failed and missing in failed,
                  f"a missing [upstream] key file fails the reload, named ({failed})")
            with open(down.conf, "w") as f:
                f.write(text.replace(f"key-file = {up.keys['edge']}\n",
                                     f"key-file = {new}\nkey-id = 2\n"))
            line, _ = hup(down)
            check(f"upstream key staged (key id 2, {new}): the next connection uses it" in line,
                  f"the downstream's reload says it staged the new key ({line})")
            line, _ = hup(down)
            check("upstream key" not in line,
                  f"a reload with the same key stages nothing, and says nothing of it ({line})")
            moved["at"] = len(down.read_log())

        moved = {}
        rotate(up, "edge", ROLE_SINK, sink, "a downstream broker's key", move=move,
               others_on_old=1)
        # The upstream closed the downstream's session of the old key; it came back at once with
        # the new one, saying so.
        line = wait_for("the downstream draws again, with its new key", lambda: next(
            (l for l in down.read_log()[moved["at"]:].splitlines()
             if f"Drawing from upstream {up.tcp} as user edge with key id 2 (staged by a reload)"
             in l), None), timeout=20, detail=lambda: down.read_log()[moved["at"]:][-600:])
        print(f"# {line}")
        check(down.alive() and up.alive(), "both brokers are still running")
    finally:
        if down:
            down.cleanup()
        up.cleanup()


main(test)
