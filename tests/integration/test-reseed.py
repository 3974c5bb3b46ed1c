#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-sink-kernel --reseed against a live broker, with the kernel doubled (eb-sink-kernel-seam,
tests/seam-kernel.c), as a copy of a VM runs it once restored or cloned (issue 28): it draws from
the broker over the guest's key, mixes the bits in (RNDADDENTROPY, credited as vouched), forces a
reseed (RNDRESEEDCRNG), rewrites the seed file at its size and mode 0600, bumps the generation
file (1, then 2), marks the seed file creditable for systemd (user.random-seed-creditable = 1,
where the file system keeps user xattrs) and logs one line with its MESSAGE_ID and EB_GENERATION=; exit 0. Without the
right to RNDRESEEDCRNG (the seam refuses it, EPERM) it exits 1 with its failure MESSAGE_ID and
EB_STEP=RNDRESEEDCRNG, and leaves the generation and the seed file as they were. As root the
journal is a socket of the test's own in a private mount namespace; otherwise stderr is read."""
import errno
import os
import stat
import subprocess

from eblib import (BUILD, Broker, check, donate, fake_program, inner_run, main, need,
                   private_journal, rerun_unshared, run)

MSGID_RESEEDED = "c4245c3f44154925b549f0f1a3f7d016"
MSGID_RESEED_FAILED = "b06025e086b44e89a07c0a6fa3053877"
MSGID_FORK_SEEN = "989e3ad85bae4fc0ad56c7a564611dfd"
SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def creditable_mark(path):
    """systemd's mark on a seed file, or None where the file system keeps no user xattrs."""
    try:
        return os.getxattr(path, "user.random-seed-creditable")
    except OSError as e:
        if e.errno == errno.EOPNOTSUPP:
            return None
        if e.errno == errno.ENODATA:
            return b""
        raise


def watch_fork(b, j):
    """--watch-fork on a FIFO standing in for /dev/kmsg, with a systemctl of the test's own first
    in PATH: each fork record, and only those, starts eb-seed-reseed.service."""
    fifo = os.path.join(b.tmp, "kmsg")
    os.mkfifo(fifo)
    calls = os.path.join(b.tmp, "systemctl.calls")
    env = fake_program(os.path.join(b.tmp, "bin"), "systemctl", f"echo \"$*\" >> {calls}\n")
    if j:
        env["EB_LOG_TARGET"] = "journal"
    p = subprocess.Popen([os.path.join(BUILD, "tests", "eb-sink-kernel-seam"), "--watch-fork",
                          "--kmsg", fifo, "--rtc", "none"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    with open(fifo, "w") as k:
        k.write("6,100,5000,-;random: crng init done\n"
                "6,101,9000,-;random: crng reseeded due to virtual machine fork\n"
                "4,102,9100,-;audit: random: crng reseeded due to virtual machine fork\n"
                "6,103,9900,-;random: crng reseeded due to virtual machine fork\n")
    out, err = p.communicate(timeout=30)
    check(p.returncode == 0, f"--watch-fork ends with its input ({err.decode()[-200:]})")
    got = open(calls).read().splitlines() if os.path.exists(calls) else []
    check(got == ["--no-block start eb-seed-reseed.service"] * 2,
          f"two fork records start eb-seed-reseed.service twice, nothing else does: {got}")
    if j:
        entries = j.entries(MSGID_FORK_SEEN)
        check([e.get("EB_FORKS") for e in entries] == ["1", "2"],
              f"each fork seen is a journal line with its MESSAGE_ID and EB_FORKS=: {entries}")


def watch_fork_failing(b):
    """A systemctl that fails: --watch-fork says so with systemctl's own exit status (not the
    raw wait status, 256 times it), and goes on."""
    env = fake_program(os.path.join(b.tmp, "bin-failing"), "systemctl", "exit 3\n")
    fifo = os.path.join(b.tmp, "kmsg-failing")
    os.mkfifo(fifo)
    env.pop("EB_LOG_TARGET", None)
    p = subprocess.Popen([os.path.join(BUILD, "tests", "eb-sink-kernel-seam"), "--watch-fork",
                          "--kmsg", fifo, "--rtc", "none"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    with open(fifo, "w") as k:
        k.write("6,101,9000,-;random: crng reseeded due to virtual machine fork\n")
    out, err = p.communicate(timeout=30)
    err = err.decode()
    check(p.returncode == 0 and "eb-seed-reseed.service exited with status 3;" in err,
          f"a failing systemctl is reported with its exit status, 3 ({p.returncode}: "
          f"{err.strip()[-300:]!r})")


def inner():
    j = private_journal()
    b = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                "vm1": {"role": "sink", "guest": "yes"}}).start()
    try:
        data = os.path.join(b.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(8192))
        check(donate(b, "alice", data).returncode == 0, "alice donates 8 KiB")
        seed = os.path.join(b.tmp, "random-seed")
        with open(seed, "wb") as f:
            f.write(b"\xa5" * 512)
        os.chmod(seed, 0o600)
        gen = os.path.join(b.tmp, "run", "generation")
        seam_log = os.path.join(b.tmp, "ioctls")

        def reseed(**extra):
            env = dict(os.environ, EB_SEAM_LOG=seam_log, **extra)
            if j:
                env["EB_LOG_TARGET"] = "journal"
            return run([os.path.join(BUILD, "tests", "eb-sink-kernel-seam"), "--reseed",
                        "-b", b.tcp, "-u", "vm1", "-k", b.keys["vm1"], "--seed-file", seed,
                        "--generation-file", gen, "--timeout", "20"], env=env, timeout=40)

        for n in (1, 2):
            before = open(seed, "rb").read()
            p = reseed()
            check(p.returncode == 0, f"--reseed {n} exits 0 ({p.stderr.decode().strip()[-300:]})")
            with open(seam_log) as f:
                calls = [l.split(" ", 1)[1].strip() for l in f]
            os.unlink(seam_log)
            print(f"# ioctls: {calls}")
            check(calls == ["RNDADDENTROPY entropy_count=256 buf_size=32", "RNDRESEEDCRNG"],
                  "the broker's 256 bits mixed in with their credit, then a forced reseed")
            after = open(seed, "rb").read()
            check(len(after) == 512 and after != before
                  and stat.S_IMODE(os.stat(seed).st_mode) == 0o600,
                  "the seed file is rewritten: its size, new bytes, mode 0600")
            mark = creditable_mark(seed)
            check(mark in (b"1", None),
                  f"the new seed carries systemd's creditable mark (user.random-seed-creditable"
                  f" = 1), where the file system keeps user xattrs: {mark}")
            check(open(gen).read() == f"{n}\n", f"the generation is {n}")
        if j:
            entries = j.entries(MSGID_RESEEDED)
            print(f"# {[e.get('MESSAGE') for e in entries]}")
            check([e.get("EB_GENERATION") for e in entries] == ["1", "2"]
                  and all(e.get("EB_CREDITED_BITS") == "256" for e in entries),
                  "each reseed's journal line has its MESSAGE_ID and EB_GENERATION=")

        before = open(seed, "rb").read()
        p = reseed(EB_SEAM_RESEED_ERRNO="1")
        err = p.stderr.decode()
        print(f"# {err.strip()[-300:]}")
        check(p.returncode == 1, "without the right to RNDRESEEDCRNG --reseed exits 1")
        check(open(gen).read() == "2\n" and open(seed, "rb").read() == before,
              "the generation and the seed file are left as they were")
        if j:
            entries = j.entries(MSGID_RESEED_FAILED)
            check(len(entries) == 1 and entries[0].get("EB_STEP") == "RNDRESEEDCRNG"
                  and entries[0].get("PRIORITY") == "3"
                  and "Reseed FAILED at RNDRESEEDCRNG" in entries[0].get("MESSAGE", ""),
                  f"one error line with the failure's MESSAGE_ID and EB_STEP=: {entries}")
            with open(os.path.join(SRC, "catalog", "entropy-broker.catalog")) as f:
                catalog = f.read()
            check(f"-- {MSGID_RESEEDED}\n" in catalog and f"-- {MSGID_RESEED_FAILED}\n" in catalog,
                  "the catalog explains both MESSAGE_IDs")
        else:
            check("Reseed FAILED at RNDRESEEDCRNG" in err, "stderr says which step failed")
        watch_fork(b, j)
        watch_fork_failing(b)
    finally:
        b.cleanup()


def test():
    need("systemd-socket-activate")
    if inner_run() or os.geteuid() != 0:
        return inner()
    rerun_unshared(private_run=True, timeout=100)


main(test)
