#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The drop-in the package ships (etc/50-local-units.conf) works as installed: a broker whose
configuration directory holds it and nothing else of the kind takes a peer in the group eb-source
as user local-sources and one in eb-sink as local-sinks, over unix, with no key; root and the
members of adm are local-admins, who may read the status ("eb-brokerctl status" as root works out
of the box) and nothing else, while root in a unit's group (eb-sink-kernel) is that group's user;
a peer nobody maps is told its uid, its user name and the section to add, and so is the log; the
main file has the last word: a user there that maps the same group takes it. On a machine without the
package's users (nothing installed), the test runs itself again in a private mount namespace whose
/etc/passwd and /etc/group are copies to which systemd-sysusers added them, as the package would:
this machine's own files are not touched."""
import grp
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

from eblib import (MSG, ROLE_ADMIN, ROLE_SINK, ROLE_SOURCE, Broker, Raw, check, main, need,
                   need_root, prog, run)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def hello(path, uid, gid, roles):
    """HELLO from a peer running as uid:gid; the answer's type and the user WELCOME names."""
    r = Raw(path, uid=uid, gid=gid)
    t, payload = r.hello(roles)
    r.s.close()
    return t, payload[10:].decode() if t == MSG["WELCOME"] else None


def have_users():
    try:
        grp.getgrnam("eb-source")
        grp.getgrnam("eb-sink")
        pwd.getpwnam("entropy-egd")
        return True
    except KeyError:
        return False


def rerun_with_users():
    """Runs this test again in a mount namespace with the package's users; exits with its status."""
    need("systemd-sysusers")
    need("unshare")
    root = tempfile.mkdtemp(prefix="eb-sysusers-")
    try:
        os.makedirs(os.path.join(root, "etc"))
        for f in ("passwd", "group", "shadow", "gshadow"):
            if os.path.exists(os.path.join("/etc", f)):
                shutil.copy2(os.path.join("/etc", f), os.path.join(root, "etc", f))
        with open(os.path.join(ROOT, "sysusers.d", "entropy-broker.conf")) as f:
            lines = [line for line in f.read().splitlines() if line and not line.startswith("#")]
        p = subprocess.run(["systemd-sysusers", "--root", root, "--inline", *lines],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, f"systemd-sysusers makes the package's users in a copy of /etc: "
              f"{p.stderr.strip()}")
        script = ('mount --bind "$1/etc/passwd" /etc/passwd && '
                  'mount --bind "$1/etc/group" /etc/group && shift && exec "$@"')
        p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                            "sh", root, sys.executable, os.path.abspath(__file__)],
                           env=dict(os.environ, EB_DROPIN_USERS_MADE="1"), timeout=600)
        sys.exit(p.returncode)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test():
    need_root("to connect as other users, and to make the package's users where they are missing")
    if not have_users():
        if os.environ.get("EB_DROPIN_USERS_MADE"):
            check(False, "the package's users are there in the private mount namespace")
        rerun_with_users()
    src_gid = grp.getgrnam("eb-source").gr_gid
    sink_gid = grp.getgrnam("eb-sink").gr_gid
    adm_gid = grp.getgrnam("adm").gr_gid
    nobody = pwd.getpwnam("nobody").pw_uid
    nogroup = pwd.getpwnam("nobody").pw_gid

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
        t, user = hello(b.sock, 0, sink_gid, ROLE_SINK)
        check(t == MSG["WELCOME"] and user == "local-sinks",
              f"root in group eb-sink (eb-sink-kernel.service) is local-sinks too ({user})")

        # The administrator's view, out of the box.
        p = run([prog("eb-brokerctl"), "-b", b.unix, "status"], timeout=30)
        check(p.returncode == 0 and b"pool" in p.stdout.lower(),
              f"eb-brokerctl status as root works ({p.returncode}: {p.stdout!r} {p.stderr!r})")
        t, user = hello(b.sock, 0, 0, ROLE_ADMIN)
        check(t == MSG["WELCOME"] and user == "local-admins", f"root is local-admins ({user})")
        check(hello(b.sock, 0, 0, ROLE_SINK)[0] == MSG["ERROR"] and
              hello(b.sock, 0, 0, ROLE_SOURCE)[0] == MSG["ERROR"],
              "who may neither draw nor donate")
        r = Raw(b.sock, uid=nobody, gid=nogroup, groups=[adm_gid])
        t, payload = r.hello(ROLE_ADMIN)
        r.s.close()
        check(t == MSG["WELCOME"] and payload[10:] == b"local-admins",
              "a member of adm (a supplementary group) is local-admins")

        # Nobody maps uid nobody: the peer and the log are told who it is and what to add.
        r = Raw(b.sock, uid=nobody, gid=nogroup)
        t, payload = r.hello(ROLE_ADMIN)
        r.s.close()
        want = f"uid {nobody} (nobody)"
        check(t == MSG["ERROR"] and want.encode() in payload and
              f"unix-uid = {nobody}".encode() in payload,
              f"an unmapped peer's ERROR names {want} and the section to add ({payload!r})")
        check(b.wait_log(f"no [user] section maps {want}") and
              b.wait_log(f"add a [user NAME] section with unix-uid = {nobody}"),
              "and so does the broker's log line")
        p = subprocess.run([prog("eb-brokerctl"), "-b", b.unix, "status"], user=nobody,
                           group=nogroup, extra_groups=[], capture_output=True, timeout=30,
                           env=dict(os.environ, EB_LOG_TARGET="console"))
        err = p.stderr.decode()
        check(p.returncode != 0 and want in err and f"unix-uid = {nobody}" in err,
              f"eb-brokerctl prints it ({err.strip()!r})")
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
