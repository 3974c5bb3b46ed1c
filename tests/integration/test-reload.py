#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""SIGHUP reloads users, keys and roles without a restart:
- a file that does not load names its file and line, and changes nothing;
- a new user can connect at once, a removed user's session is closed, a rotated key closes
  the sessions the old key opened, a revoked role closes the session that uses it, each with
  one log line, while an unchanged user's session carries on;
- a TLS handshake under way carries on through the reload: held back after the broker looked
  its key up, it is refused with one line if that key was rotated, welcome if not;
- what only a restart can change (capacity) is said so and kept;
- the broker then still serves, and stops cleanly."""
import os
import re
import signal
import subprocess
import time

from eblib import (BUILD, MSG, ROLE_SINK, Broker, Raw, check, donate, draw, main, prog,
                   write_key)

TLS_PEER = os.path.join(BUILD, "tests", "attack-tls-peer")
ERR_AUTH = 3  # docs/protocol.md: unknown user or bad key


def broker_pid(b):
    """The eb-brokerd process: systemd-socket-activate execs it in its own process."""
    deadline = time.time() + 10
    while time.time() < deadline:
        with open(f"/proc/{b.proc.pid}/comm") as f:
            if f.read().strip() == "eb-brokerd":
                return b.proc.pid
        time.sleep(0.05)
    raise AssertionError("eb-brokerd did not start")


def hup(b, done):
    """Sends SIGHUP and waits for the log line that ends the reload."""
    before = len(b.read_log())
    os.kill(broker_pid(b), signal.SIGHUP)
    deadline = time.time() + 10
    while time.time() < deadline:
        new = b.read_log()[before:]
        if done in new:
            return new
        time.sleep(0.05)
    check(False, f"'{done}' logged after SIGHUP; the log says: {b.read_log()[before:]}")


class FifoSource:
    """eb-source-file reading a FIFO that is held open and never written: a TLS session that
    stays connected until the broker closes it."""

    def __init__(self, b, user, key):
        self.path = os.path.join(b.tmp, f"{user}.fifo")
        os.mkfifo(self.path)
        self.proc = subprocess.Popen(
            [prog("eb-source-file"), "-b", b.tcp, "-u", user, "-k", key, self.path],
            stderr=subprocess.PIPE)
        self.fd = os.open(self.path, os.O_WRONLY)  # returns once the source opened it

    def stop(self):
        os.close(self.fd)  # end of input: the source exits
        try:
            self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


class HeldHandshake:
    """attack-tls-peer's hold mode: a TLS handshake stopped before the client's Finished, after
    the broker has looked the key up and sent its own."""

    def __init__(self, b, user, key):
        self.user = user
        self.proc = subprocess.Popen([TLS_PEER, "127.0.0.1", str(b.port), user, key, "hold"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        check(line == "held", f"{user}'s handshake is held ({line!r}, "
                              f"{self.proc.stderr.read() if not line else ''})")

    def finish(self):
        """Sends the Finished and HELLO; returns "welcome", "error CODE" or "closed"."""
        out, err = self.proc.communicate("go\n", timeout=30)
        check(self.proc.returncode == 0, f"{self.user}'s peer exited {self.proc.returncode}: {err}")
        return out.strip()


def test():
    uid = os.getuid()
    b = Broker({
        "alice": {"role": "source"},
        "carol": {"role": "source"},
        "bob": {"role": "sink"},
        "admin": {"role": "admin"},
        "local": {"role": "sink,source", "unix-uid": uid, "key": False},
    })
    # Debug level for the broker alone: its "Accepted" line says when a peer is in a session.
    os.environ["EB_LOG_LEVEL"] = "debug"
    try:
        b.start()
    finally:
        del os.environ["EB_LOG_LEVEL"]
    sources = []
    try:
        data = os.path.join(b.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(64 * 1024))
        check(donate(b, "alice", data).returncode == 0, "alice donates")
        with open(b.conf) as f:
            original = f.read()

        # Sessions that must live through a reload or be closed by it.
        alice = FifoSource(b, "alice", b.keys["alice"])
        carol = FifoSource(b, "carol", b.keys["carol"])
        sources += [alice, carol]
        local = Raw(b.sock)
        t, _ = local.hello(ROLE_SINK)
        check(t == MSG["WELCOME"], "the local sink is welcome")
        check(b.wait_log("user alice connected") and b.wait_log("user carol connected"),
              "alice's and carol's sources are connected")

        # 1. A broken file: named with its line, and nothing changes.
        with open(b.conf, "w") as f:
            f.write(original + "[user dave]\nrole = sink\nbogus-key = 1\n")
        new = hup(b, "Reload failed, keeping the running configuration")
        line = len(original.splitlines()) + 3
        check(f"{b.conf}:{line}" in new, f"the error names {b.conf}:{line}: {new.strip()}")
        check(alice.proc.poll() is None and carol.proc.poll() is None,
              "the sources are still connected")
        check(draw(b, "bob", 256).returncode == 0, "bob still draws")

        # 2. dave is added, carol removed, alice's key rotated, local's sink role revoked, and
        # the capacity changed (which needs a restart).
        dave_key = os.path.join(b.tmp, "dave.key")
        write_key(dave_key)
        b.keys["dave"] = dave_key
        check(draw(b, "dave", 64).returncode != 0, "dave is refused before the reload")
        alice_key = os.path.join(b.tmp, "alice-new.key")
        write_key(alice_key)
        text = original.replace(b.keys["alice"], alice_key)
        text = text.replace("capacity-bits = 1048576", "capacity-bits = 2097152")
        text = re.sub(r"\[user carol\]\n(?:[^\[].*\n)*", "", text)
        text = text.replace("role = sink,source", "role = source")
        text += f"[user dave]\nrole = sink\nkey-file = {dave_key}\n"
        check("carol" not in text and "2097152" in text, "the new file is as intended")
        with open(b.conf, "w") as f:
            f.write(text)
        # Two TLS handshakes under way, their keys looked up in the old file: alice's is the
        # key this reload rotates, bob's stays.
        held_alice = HeldHandshake(b, "alice", b.keys["alice"])
        held_bob = HeldHandshake(b, "bob", b.keys["bob"])
        new = hup(b, "Reloaded")
        for user, why in (("alice", "the key it logged in with was removed or replaced"),
                          ("carol", "its user is gone"),
                          ("local", "a role it uses was revoked")):
            lines = [l for l in new.splitlines() if f"(user {user}): {why}" in l]
            check(len(lines) == 1, f"{user}'s session is closed with one line saying {why!r}"
                  f" ({lines})")
        check("capacity-bits changed to 2097152; it takes effect at the next restart" in new,
              "the capacity change is said to need a restart")
        check("5 users; 2 of 5 sessions kept;" in new and "keys: 2 added, 2 removed, 1 sessions "
              "closed for a removed key" in new,
              f"the reload is summed up, the handshakes kept: "
              f"{[l for l in new.splitlines() if 'Reloaded' in l]}")
        before = len(b.read_log())
        got = held_alice.finish()
        check(got == f"error {ERR_AUTH}",
              f"alice's handshake with the rotated key ends in ERROR(AUTH), not {got!r}")
        check(b.wait_log("(alice): its key was removed or replaced by a reload during the TLS "
                         "handshake"), "with one line naming alice")
        got = held_bob.finish()
        check(got == "welcome", f"bob's handshake with his unchanged key is welcome ({got!r})")
        check(b.read_log()[before:].count("Refusing") == 1, "and nothing else is refused")
        t, payload = local.recv()
        check(t == MSG["ERROR"], f"the local sink got an ERROR ({t})")
        check(local.closed(), "and its connection was closed")
        b.keys["alice"] = alice_key
        check(donate(b, "alice", data).returncode == 0, "alice donates with her new key")
        p = draw(b, "dave", 64)
        check(p.returncode == 0 and len(p.stdout) == 64, "dave draws after the reload")
        check(draw(b, "bob", 256).returncode == 0, "bob, unchanged, still draws")
        st = b.status()
        check(st["capacity_bits"] == 1048576, f"the capacity is kept ({st['capacity_bits']})")
        check(b.alive(), "the broker is still running")
        check(b.stop() == 0, "and stops cleanly on SIGTERM")
    finally:
        for s in sources:
            s.stop()
        b.cleanup()


if __name__ == "__main__":
    main(test)
