#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A broken configuration fails visibly (eb-brokerd(8)):
- eb-brokerd --check-config exits 0 on a good configuration and 2 on a broken one, printing
  every error as FILE:LINE: ..., in the main file and in its drop-ins alike, and a key file's
  error at its key-file= line; it binds nothing and writes no seed file;
- a SIGHUP with a typo keeps the running configuration and the broker serving, ends the reload
  state (RELOADING=1 then READY=1, as systemd requires) with ERRNO= set, and its STATUS= says
  "Reload failed: FILE:LINE: ..." until a reload succeeds, which clears it (ERRNO=0)."""
import grp
import os
import pwd
import signal
import subprocess
import time

from eblib import Broker, Notify, check, closed_port, donate, main, prog, run


def broker_pid(b):
    """The eb-brokerd process: systemd-socket-activate execs it in its own process."""
    deadline = time.time() + 10
    while time.time() < deadline:
        with open(f"/proc/{b.proc.pid}/comm") as f:
            if f.read().strip() == "eb-brokerd":
                return b.proc.pid
        time.sleep(0.05)
    raise AssertionError("eb-brokerd did not start")


def check_config(*args):
    return run([prog("eb-brokerd"), *args], timeout=30)


def lines(p):
    return [l for l in p.stderr.decode().splitlines() if l.strip()]


def test_check_config():
    # Addresses a broker started with this configuration (not socket-activated) would bind: a
    # unix socket, whose file binding would leave behind, and a TCP port held by a socket of the
    # test's own, which a bind would fail on (EADDRINUSE, an error and exit 1).
    held, port = closed_port()
    b = Broker({"alice": {"role": "source"}, "admin": {"role": "admin"}},
               broker_extra="listen = unix:@LISTEN@\nlisten = tcp://127.0.0.1:@PORT@")
    listen_sock = os.path.join(b.tmp, "listen.sock")
    with open(b.conf) as f:
        text = f.read()
    with open(b.conf, "w") as f:
        f.write(text.replace("@LISTEN@", listen_sock).replace("@PORT@", str(port)))
    try:
        p = check_config("--check-config", b.conf)
        check(p.returncode == 0 and b"configuration good: 2 users, 2 key files" in p.stdout,
              f"a good configuration: exit 0 ({p.returncode}, {p.stdout!r} {p.stderr!r})")
        check(not os.path.exists(b.seed) and not os.path.exists(b.sock),
              "no seed file written, no socket made")
        check(not os.path.exists(listen_sock),
              "the configured unix listener is not bound (no socket file), nor the held TCP "
              "port (no EADDRINUSE)")
        # The same configuration started for real binds them: so the above could have failed.
        p = run([prog("eb-brokerd"), "-c", b.conf], timeout=10)
        check(p.returncode != 0 and str(port) in p.stderr.decode(),
              f"started with it, the broker binds those addresses: the held port fails it "
              f"({p.returncode}, {p.stderr.decode().strip()[-300:]!r})")
        p = check_config(f"--check-config={b.conf}")
        check(p.returncode == 0, "--check-config=PATH is the same")
        p = check_config("-c", b.conf, "--check-config")
        check(p.returncode == 0, "so is --config PATH --check-config")
        p = check_config("--check-config", b.conf, "-c", b.conf)
        check(p.returncode == 2 and "give one of them" in p.stderr.decode(),
              f"PATH twice is a usage error: exit 2 ({p.stderr!r})")

        # Errors in a drop-in and in the main file, several in one file: all are named.
        with open(b.conf) as f:
            good = f.read()
        dropins = b.conf + ".d"
        os.makedirs(dropins)
        dropin = os.path.join(dropins, "20-typo.conf")
        with open(dropin, "w") as f:
            f.write("[user bob]\nrole = sink\nkey-fil = /etc/x.key\n")
        with open(b.conf, "w") as f:
            f.write(good.replace("status-interval-sec = 3600",
                                 "status-interval-secs = 3600\nlow-water-percent = lots"))
        p = check_config("--check-config", b.conf)
        errs = lines(p)
        want = [f"{dropin}:3: unknown key \"key-fil\" in [user NAME]",
                f"{b.conf}:4: unknown key \"status-interval-secs\" in [broker]",
                f"{b.conf}:5: invalid value \"lots\" for low-water-percent: expected a number "
                "0..100"]
        check(p.returncode == 2, f"a broken configuration: exit 2 ({p.returncode})")
        for w in want:
            check(any(l.endswith(w) for l in errs), f"the error is printed: {w} ({errs})")
        check(len(errs) == 3, f"one line per error, nothing else ({errs})")

        # A key file is checked too, and its error names the key-file= line.
        os.unlink(dropin)
        with open(b.conf, "w") as f:
            f.write(good)
        os.chmod(b.keys["alice"], 0o644)
        key_line = good.splitlines().index(f"key-file = {b.keys['alice']}") + 1
        p = check_config("--check-config", b.conf)
        errs = lines(p)
        check(p.returncode == 2 and len(errs) == 1 and
              f"{b.conf}:{key_line}: [user alice]: key file {b.keys['alice']}" in errs[0],
              f"a key file readable by others: exit 2, at its key-file= line ({errs})")
        os.chmod(b.keys["alice"], 0o600)
    finally:
        b.cleanup()
        held.close()


def test_key_owner():
    """A key root:GROUP 0640, written by eb-keygen --owner root --group GROUP, is read by a
    broker running in GROUP (as the service runs in entropy-broker); 0644 is refused with who
    runs and the fix."""
    nobody = pwd.getpwnam("nobody")
    group = grp.getgrgid(nobody.pw_gid).gr_name
    b = Broker({"admin": {"role": "admin", "key": False, "unix-uid": 0}})
    try:
        key = os.path.join(b.tmp, "svc.key")
        p = run([prog("eb-keygen"), "--owner", "root", "--group", group, key])
        st = os.stat(key)
        check(p.returncode == 0 and st.st_uid == 0 and st.st_gid == nobody.pw_gid and
              st.st_mode & 0o7777 == 0o640,
              f"eb-keygen --owner root --group {group}: root:{group} 0640 "
              f"({st.st_uid}:{st.st_gid} {st.st_mode & 0o7777:o}, {p.stderr!r})")
        with open(b.conf, "a") as f:
            f.write(f"[user svc]\nrole = source\nkey-file = {key}\n")
        os.chmod(b.conf, 0o644)

        def as_service():
            return subprocess.run([prog("eb-brokerd"), "--check-config", b.conf],
                                  user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
                                  capture_output=True, timeout=30,
                                  env=dict(os.environ, EB_LOG_TARGET="console"))
        p = as_service()
        check(p.returncode == 0, f"read as nobody:{group}: accepted ({p.stderr!r})")
        os.chmod(key, 0o644)
        p = as_service()
        err = p.stderr.decode()
        check(p.returncode == 2 and f"is root:{group} 0644 and this runs as nobody:{group}" in err
              and f'run "chown root:{group} {key} && chmod 0640 {key}"' in err,
              f"0644 refused, naming the owner, who runs, and the fix ({err.strip()!r})")
        os.chmod(key, 0o600)
        p = as_service()
        err = p.stderr.decode()
        check(p.returncode == 2 and "it cannot read it" in err and "chmod 0640" in err,
              f"root:{group} 0600, which the service cannot read, says so ({err.strip()!r})")
    finally:
        b.cleanup()


def status_of(m):
    for field in m.split("\n"):
        if field.startswith("STATUS="):
            return field[len("STATUS="):]
    return None


def test_reload():
    b = Broker({"alice": {"role": "source"}, "admin": {"role": "admin"}})
    n = Notify(os.path.join(b.tmp, "notify"))
    b.env = {"NOTIFY_SOCKET": n.path}
    try:
        b.start()
        b.status()  # systemd-socket-activate starts the broker at the first connection
        check(n.wait(lambda m: "READY=1" in m) is not None, "the broker says READY=1")
        with open(b.conf) as f:
            good = f.read()
        with open(b.conf, "w") as f:
            f.write(good.replace("status-interval-sec = 3600", "status-interval-secs = 3600"))
        where = f"{b.conf}:4: unknown key \"status-interval-secs\" in [broker]"

        mark = len(n.msgs)
        os.kill(broker_pid(b), signal.SIGHUP)
        m = n.wait(lambda m: "RELOADING=1" in m, start=mark)
        check(m is not None and "MONOTONIC_USEC=" in m,
              f"SIGHUP: RELOADING=1 with MONOTONIC_USEC= ({m!r})")
        ready = n.wait(lambda m: "READY=1" in m, start=n.msgs.index(m))
        check(ready is not None and "ERRNO=22" in ready,
              f"the reload state ends with READY=1, and ERRNO=22 says it failed ({ready!r})")
        st = n.wait(lambda m: (status_of(m) or "").startswith("Reload failed: "), start=mark)
        check(st is not None and where in status_of(st) and
              "running the previous configuration" in status_of(st),
              f"STATUS= says the reload failed, and where ({st!r})")
        check(b.wait_log("Reload failed, keeping the running configuration: " + where),
              "the journal line says so too")

        # The old configuration still serves; the next STATUS= (the pool moved) still says it.
        mark = len(n.msgs)
        data = os.path.join(b.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(4096))
        check(donate(b, "alice", data).returncode == 0, "alice still donates")
        st = n.wait(lambda m: status_of(m) is not None and "Pool 0/" not in m, start=mark)
        check(st is not None and status_of(st).startswith("Reload failed: " + where),
              f"a later STATUS= keeps the failure in front ({st!r})")
        p = check_config("--check-config", b.conf)
        check(p.returncode == 2 and where in p.stderr.decode(),
              "what ExecReload= runs first refuses the same file")

        # A good reload clears it.
        with open(b.conf, "w") as f:
            f.write(good)
        mark = len(n.msgs)
        os.kill(broker_pid(b), signal.SIGHUP)
        ready = n.wait(lambda m: "READY=1" in m, start=mark)
        check(ready is not None and "ERRNO=0" in ready, f"a good reload: READY=1, ERRNO=0 ({ready!r})")
        st = n.wait(lambda m: status_of(m) is not None, start=n.msgs.index(ready))
        check(st is not None and status_of(st).startswith("Pool "),
              f"and STATUS= is the pool's again ({st!r})")
        check(b.status()["pool_bits"] > 0, "the broker serves its admin")
    finally:
        b.cleanup()
        n.close()


def test():
    test_check_config()
    test_key_owner()
    test_reload()


if __name__ == "__main__":
    main(test)
