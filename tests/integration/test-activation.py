#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""systemd-socket-activate hands the broker named tcp and unix fds: the broker is not started
until the first connection, uses exactly those sockets (TLS on tcp, plain on unix), and the
same binary binds --listen addresses itself when not activated."""
import os
import time

from eblib import ME, Broker, check, donate, draw, main, prog, run


def test():
    users = {"alice": {"role": "source"}, "bob": {"role": "sink"}, "admin": {"role": "admin"},
             "local": {"role": "sink,admin", "unix-uid": ME, "key": False}}
    b = Broker(users).start()
    try:
        time.sleep(0.3)
        check("Broker ready" not in b.read_log(),
              "the broker is not running before the first connection")
        st = b.status()
        check(b.wait_log("Broker ready"), "the first connection started it")
        check(st["capacity_bits"] == 1048576, "it answered on the tcp fd with TLS")
        p = run([prog("eb-brokerctl"), "-b", b.unix, "status"])
        check(p.returncode == 0 and b"Pool:" in p.stdout, "it answers on the unix fd, no key needed")
        # The broker must not have bound anything itself: its listen lines come only from
        # --listen or the config, and this config has none.
        check("Listening on tcp://" not in b.read_log(), "it bound no address of its own")
    finally:
        b.cleanup()

    b = Broker(users, activate=False).start()
    try:
        check(b.wait_log("Listening on tcp://127.0.0.1"), "without LISTEN_FDS it binds --listen")
        data = os.path.join(b.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(32 * 1024))
        check(donate(b, "alice", data).returncode == 0, "a source donates to the bound tcp socket")
        p = draw(b, "local", 256, uri=b.unix)
        check(p.returncode == 0 and len(p.stdout) == 256, "a sink draws from the bound unix socket")
    finally:
        b.cleanup()


main(test)
