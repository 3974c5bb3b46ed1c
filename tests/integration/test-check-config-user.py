#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-brokerd --check-config run as root and the service agree on README's key layout
(issue 26): a key file root:entropy-broker 0640 is good to both, and a root:root 0600 one is
refused by both with the same fix (chown root:entropy-broker, chmod 0640). Run as root on the
default file, the check reads as eb-brokerd.service's User= (entropy-broker); --as-user names
another, --as-user root reads as root (which refuses the 0640 file: root's group is no
service's); run as entropy-broker (runuser) it reads as itself.

It needs root. The user entropy-broker and the default file are made in a private mount
namespace (systemd-sysusers --root, and a copy of the few files of /etc the programs read
bound over /etc), so that the machine's own /etc is not touched."""
import grp
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

from eblib import check, main, need, need_root, prog, run, write_key

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
USER = "entropy-broker"
# What eb-brokerd and runuser read of /etc, copied into the namespace's own.
ETC_FILES = ("passwd", "group", "shadow", "gshadow", "nsswitch.conf", "ld.so.cache",
             "ld.so.conf", "localtime", "login.defs", "pam.conf", "pam.d", "security",
             "environment", "default")


def check_config(*args, as_service=False):
    cmd = [prog("eb-brokerd"), "--check-config", *args]
    if as_service:
        cmd = ["runuser", "-u", USER, "--"] + cmd
    p = run(cmd, timeout=30)
    return p.returncode, (p.stdout + p.stderr).decode(errors="replace").strip()


def advice(out):
    """The fix a refusal gives: the command after 'run'."""
    return out[out.index("run \""):] if "run \"" in out else None


def inner():
    gid = grp.getgrnam(USER).gr_gid
    os.makedirs("/etc/entropy-broker/keys", exist_ok=True)
    good, bad = "/etc/entropy-broker/keys/alice.key", "/etc/entropy-broker/keys/bob.key"
    # README's layout: eb-keygen --owner root --group entropy-broker.
    p = run([prog("eb-keygen"), "--owner", "root", "--group", USER, good])
    check(p.returncode == 0, f"eb-keygen writes root:{USER} 0640 ({p.stderr.decode()[-200:]})")
    st = os.stat(good)
    check(st.st_uid == 0 and st.st_gid == gid and st.st_mode & 0o777 == 0o640,
          f"{good} is root:{USER} {st.st_mode & 0o777:04o}")
    conf = "/etc/entropy-broker/eb-brokerd.conf"
    with open(conf, "w") as f:
        f.write(f"[broker]\ncapacity-bits = 65536\n[user alice]\nrole = source\n"
                f"key-file = {good}\n")
    os.chmod(conf, 0o644)

    r, out = check_config()
    print(f"# as root, the default file: {out}")
    check(r == 0 and f"Checking as {USER}" in out and "configuration good" in out,
          "as root, the default file is read as the service's user, and is good")
    r, out = check_config(as_service=True)
    check(r == 0 and "configuration good" in out, f"as {USER} itself: good ({out})")
    r, out = check_config("--as-user", "root")
    print(f"# as root, --as-user root: {out}")
    check(r == 2 and "chmod 0600" in out,
          "--as-user root reads as root, which refuses group reading (root's group is no "
          "service's)")
    r, out = check_config(conf, "--as-user", USER)
    check(r == 0, f"a PATH with --as-user {USER}: good ({out})")

    # A key the service cannot read: both say so, with the same fix.
    write_key(bad)
    os.chmod(bad, 0o600)
    with open(conf, "a") as f:
        f.write(f"[user bob]\nrole = sink\nkey-file = {bad}\n")
    r, as_root = check_config()
    r2, as_service = check_config(as_service=True)
    print(f"# root:root 0600, as root: {as_root}")
    print(f"# root:root 0600, as {USER}: {as_service}")
    check(r == 2 and r2 == 2, f"a root:root 0600 key is refused by both ({r}, {r2})")
    fix = f"run \"chown root:{USER} {bad} && chmod 0640 {bad}\""
    check(advice(as_root) == advice(as_service) == fix,
          f"with the same fix, README's layout: {advice(as_root)} / {advice(as_service)}")
    r, out = check_config("--as-user", "nobody-such-user")
    check(r == 2 and "No user nobody-such-user" in out, f"an unknown --as-user is an error ({out})")
    p = run([prog("eb-brokerd"), "--as-user", USER], timeout=30)
    check(p.returncode == 2 and b"--as-user is for --check-config" in p.stderr,
          "--as-user without --check-config is a usage error")


def test():
    if os.environ.get("EB_CHECK_USER_INNER"):
        return inner()
    need_root("a user entropy-broker and /etc/entropy-broker in a private mount namespace")
    for tool in ("unshare", "runuser", "systemd-sysusers"):
        need(tool)
    with tempfile.TemporaryDirectory(prefix="eb-etc-") as root:
        etc = os.path.join(root, "etc")
        os.makedirs(etc)
        os.chmod(root, 0o755)
        for name in ETC_FILES:
            src = os.path.join("/etc", name)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(etc, name), symlinks=True)
            elif os.path.exists(src):
                shutil.copy2(src, os.path.join(etc, name))
        p = run(["systemd-sysusers", f"--root={root}",
                 os.path.join(SRC, "sysusers.d", "entropy-broker.conf")])
        check(p.returncode == 0, f"systemd-sysusers makes the package's users in a copy of "
              f"/etc ({p.stderr.decode()[-200:]})")
        os.chmod(etc, 0o755)
        p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            "mount --bind \"$0\" /etc && exec \"$1\" \"$2\"", etc,
                            sys.executable, os.path.abspath(__file__)],
                           env=dict(os.environ, EB_CHECK_USER_INNER="1"), capture_output=True,
                           timeout=100)
        sys.stdout.write(p.stdout.decode())
        sys.stderr.write(p.stderr.decode())
        check(p.returncode == 0, "--check-config as root and as the service agree (inner run)")


main(test)
