#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-sink-kernel --watch-fork's clock trigger, for a VM without a generation ID device (issue 28):
the program itself, on a FIFO standing in for /dev/kmsg, a file of the test's own standing in for
the RTC's /sys/class/rtc/rtc0/since_epoch, and a systemctl of the test's own first in PATH that
counts the reseeds it is asked to start. The RTC jumping ahead of the guest's clock (a copy
resumed from a saved state) starts eb-seed-reseed.service once, with its journal line
(MESSAGE_ID, EB_CLOCK_JUMP_MS=), and the samples after it start nothing more; the RTC set back
starts nothing. With a grace for the kernel's fork line (a VM with a vmgenid device), a jump and
the line, in either order, start one reseed between them, the line's; a jump with no line starts
one when the grace runs out. The decision's arithmetic (suspend, clock steps, the RTC's whole
seconds) is test-clock-jump's. As root the journal is a socket of the test's own in a private
mount namespace; otherwise stderr is read."""
import os
import subprocess
import tempfile
import threading
import time

from eblib import (BUILD, check, fake_program, inner_run, main, private_journal, rerun_unshared,
                   wait_for)

MSGID_CLOCK_JUMP = "efe5014b814841a2b427a9e0ecb8200a"
MSGID_FORK_SEEN = "989e3ad85bae4fc0ad56c7a564611dfd"
FORK = "6,101,9000,-;random: crng reseeded due to virtual machine fork\n"
RTC0 = 1796525653


class Watcher:
    """One --watch-fork run: its RTC file, its kmsg FIFO (held open by the test), the systemctl
    calls it made, and its log lines (journal entries, or stderr lines as {"MESSAGE": line})."""

    def __init__(self, tmp, j, grace):
        self.dir = tempfile.mkdtemp(dir=tmp)
        self.j = j
        self.rtc_path = os.path.join(self.dir, "since_epoch")
        self.set_rtc(RTC0)
        fifo = os.path.join(self.dir, "kmsg")
        os.mkfifo(fifo)
        self.calls_path = os.path.join(self.dir, "systemctl.calls")
        env = fake_program(os.path.join(self.dir, "bin"), "systemctl",
                           f"echo \"$*\" >> {self.calls_path}\n")
        if j:
            env["EB_LOG_TARGET"] = "journal"
        self.p = subprocess.Popen(
            [os.path.join(BUILD, "tests", "eb-sink-kernel-seam"), "--watch-fork", "-v",
             "--kmsg", fifo, "--rtc", self.rtc_path, "--clock-interval", "1",
             "--fork-grace", str(grace)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.kmsg = open(fifo, "w")
        self.lines = []
        self.stderr = []
        self.reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.reader.start()

    def _read_stderr(self):
        for line in self.p.stderr:
            self.stderr.append(line.decode(errors="replace").rstrip("\n"))

    def set_rtc(self, seconds):
        tmp = self.rtc_path + ".new"
        with open(tmp, "w") as f:
            f.write(f"{seconds}\n")
        os.rename(tmp, self.rtc_path)

    def fork_line(self):
        self.kmsg.write(FORK)
        self.kmsg.flush()

    def entries(self):
        if self.j:
            self.lines += self.j.entries()
        else:
            self.lines = [{"MESSAGE": l} for l in self.stderr]
        return self.lines

    def count(self, text):
        return sum(text in e.get("MESSAGE", "") for e in self.entries())

    def calls(self):
        if not os.path.exists(self.calls_path):
            return 0
        with open(self.calls_path) as f:
            got = f.read().splitlines()
        if any(c != "--no-block start eb-seed-reseed.service" for c in got):
            check(False, f"only eb-seed-reseed.service is started: {got}")
        return len(got)

    def samples(self, n, what):
        """Waits for n more RTC samples (one a second): the event that says the watcher has
        looked, instead of a sleep."""
        target = self.count("RTC sample") + n
        wait_for(f"{n} RTC samples {what}", lambda: self.count("RTC sample") >= target,
                 timeout=10 + 3 * n, detail=lambda: str(self.entries()[-3:]))

    def end(self):
        self.kmsg.close()
        self.p.wait(timeout=30)
        self.reader.join(timeout=10)
        check(self.p.returncode == 0, f"--watch-fork ends with its input ({self.stderr[-3:]})")


def no_grace(tmp, j):
    w = Watcher(tmp, j, 0)
    try:
        w.samples(2, "at start")
        # The file holds still, as an RTC that stopped would: its samples fall behind the clock,
        # which is no resume.
        check(w.calls() == 0, "a steady RTC starts no reseed")
        w.set_rtc(RTC0 + 100)
        wait_for("the RTC's jump starts eb-seed-reseed.service", lambda: w.calls() >= 1,
                 timeout=10)
        w.samples(4, "after the jump")
        check(w.calls() == 1, f"one jump, one reseed: {w.calls()}")
        # Set back an hour: no copy resumes backwards.
        w.set_rtc(RTC0 - 3600)
        w.samples(3, "after the RTC was set back")
        check(w.calls() == 1, "the RTC set back starts no reseed")
        if j:
            e = [x for x in w.entries() if x.get("MESSAGE_ID") == MSGID_CLOCK_JUMP]
            print(f"# {[x.get('MESSAGE') for x in e]}")
            check(len(e) == 1 and int(e[0].get("EB_CLOCK_JUMP_MS", "0")) > 90000
                  and e[0].get("EB_CLOCK_RESEEDS") == "1" and e[0].get("PRIORITY") == "5",
                  f"the clock's reseed is one notice with its MESSAGE_ID and EB_CLOCK_JUMP_MS=: {e}")
        else:
            check(w.count("fell") == 1, "one line says the clock fell behind the RTC")
    finally:
        w.end()


def with_grace(tmp, j):
    # 8 s: longer than this test may take, on a loaded machine, to answer the jump's line with
    # the fork line it writes.
    w = Watcher(tmp, j, 8)
    try:
        w.samples(2, "at start")
        # The jump first, then the kernel's line within the grace: the line's reseed alone.
        w.set_rtc(RTC0 + 100)
        wait_for("the jump waits for the kernel's line",
                 lambda: w.count("waiting up to 8 s") >= 1, timeout=10)
        w.fork_line()
        wait_for("the fork line starts eb-seed-reseed.service", lambda: w.calls() >= 1,
                 timeout=10)
        w.samples(10, "past the grace")
        check(w.calls() == 1, f"a jump and its fork line, one reseed: {w.calls()}")
        # The line and the jump at once (the sample may come either side of the line).
        w.set_rtc(RTC0 + 300)
        w.fork_line()
        wait_for("the second fork line starts eb-seed-reseed.service", lambda: w.calls() >= 2,
                 timeout=10)
        w.samples(10, "past the second grace")
        check(w.calls() == 2, f"a fork line with its jump, one reseed: {w.calls()}")
        # A jump and no line (a loadvm that keeps the generation ID): the clock's reseed once
        # the grace runs out.
        w.set_rtc(RTC0 + 600)
        t0 = time.monotonic()
        wait_for("a jump with no fork line starts eb-seed-reseed.service after the grace",
                 lambda: w.calls() >= 3, timeout=25)
        waited = time.monotonic() - t0
        print(f"# the clock's reseed {waited:.1f} s after the jump (grace 8 s, samples every 1 s)")
        check(waited >= 7.5, f"it waited for the grace first ({waited:.1f} s)")
        w.samples(3, "after the clock's reseed")
        check(w.calls() == 3, f"one reseed for the lone jump: {w.calls()}")
        if j:
            forks = [x for x in w.entries() if x.get("MESSAGE_ID") == MSGID_FORK_SEEN]
            clock = [x for x in w.entries() if x.get("MESSAGE_ID") == MSGID_CLOCK_JUMP]
            check(len(forks) == 2 and len(clock) == 1,
                  f"two fork lines and one clock line: {len(forks)}, {len(clock)}")
    finally:
        w.end()


def test():
    if not inner_run() and os.geteuid() == 0:
        rerun_unshared(private_run=True, timeout=200)
    j = private_journal()
    with tempfile.TemporaryDirectory() as tmp:
        no_grace(tmp, j)
        with_grace(tmp, j)


main(test)
