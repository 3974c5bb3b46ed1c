#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The drop-in the package ships (etc/50-local-units.conf) works as installed: a broker whose
configuration directory holds it and nothing else of the kind takes a peer in the group eb-source
as user local-sources and one in eb-sink as local-sinks, over unix, with no key; the main file
has the last word: a user there that maps the same group takes it."""
import grp
import os
import pwd
import shutil
import sys

from eblib import MSG, ROLE_SINK, ROLE_SOURCE, SKIP, Broker, Raw, check, main

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def hello(path, uid, gid, roles):
    """HELLO from a peer running as uid:gid; the answer's type and the user WELCOME names."""
    r = Raw(path, uid=uid, gid=gid)
    t, payload = r.hello(roles)
    r.s.close()
    return t, payload[10:].decode() if t == MSG["WELCOME"] else None


def test():
    try:
        src_gid = grp.getgrnam("eb-source").gr_gid
        sink_gid = grp.getgrnam("eb-sink").gr_gid
        pwd.getpwnam("entropy-egd")
    except KeyError:
        print("SKIP: needs the users and groups of sysusers.d/entropy-broker.conf "
              "(systemd-sysusers sysusers.d/entropy-broker.conf)")
        sys.exit(SKIP)
    if os.getuid() != 0:
        print("SKIP: needs root to connect as other users")
        sys.exit(SKIP)
    nobody = pwd.getpwnam("nobody").pw_uid

    b = Broker({})
    dropins = b.conf + ".d"
    os.makedirs(dropins)
    shutil.copy(os.path.join(ROOT, "etc", "50-local-units.conf"), dropins)
    b.start()
    try:
        t, user = hello(b.sock, nobody, src_gid, ROLE_SOURCE)
        check(t == MSG["WELCOME"] and user == "local-sources",
              f"a peer in group eb-source is user local-sources, a source, with no key ({user})")
        t, user = hello(b.sock, nobody, src_gid, ROLE_SINK)
        check(t == MSG["ERROR"], "and may not draw")
        t, user = hello(b.sock, nobody, sink_gid, ROLE_SINK)
        check(t == MSG["WELCOME"] and user == "local-sinks",
              f"a peer in group eb-sink is user local-sinks, a sink ({user})")
    finally:
        b.cleanup()

    # The administrator's own file maps the eb-source group to a user of its own: it wins, and
    # the drop-in's local-sources is gone.
    b = Broker({"mine": {"role": "source, sink", "unix-gid": "eb-source", "key": False}})
    os.makedirs(b.conf + ".d")
    shutil.copy(os.path.join(ROOT, "etc", "50-local-units.conf"), b.conf + ".d")
    b.start()
    try:
        t, user = hello(b.sock, nobody, src_gid, ROLE_SINK)
        check(t == MSG["WELCOME"] and user == "mine",
              f"the main file's mapping of eb-source wins over the drop-in's ({user})")
    finally:
        b.cleanup()


if __name__ == "__main__":
    main(test)
