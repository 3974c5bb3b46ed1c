#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-source-exec's end is the end of every process its command started, as eb-source-exec(1)
says. Each case runs a shell command whose members write their pids to a file, ends
eb-source-exec one way, and checks that none of them is left:
- SIGTERM to eb-source-exec while a pipeline (sleep | cat) runs: members that write nothing into
  the closed pipe never learn of it on their own; every member gets SIGTERM first (one that
  traps it says so), not SIGKILL alone;
- a member that ignores SIGTERM: SIGKILL 5 s later (the bound here is 3 x that);
- --samples ends the run while the pipeline's other member still runs;
- the command's shell exits by itself while a background job of its own goes on;
- SIGKILL to eb-source-exec: its keeper, warned by PR_SET_PDEATHSIG, stops them all the same, and
  goes too.
eb-source-exec runs with no broker (a --dump-raw capture), its standard error in a file: a
survivor holding a pipe there would hang a reader, which is how this was found."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

from eblib import check, main, prog, wait_for

# The grace eb-source-exec(1) states between SIGTERM and SIGKILL for the command's processes.
GRACE = 5


def alive(pid):
    """True while pid runs (a zombie has ended: only its parent's wait is left)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def pids_in(path):
    try:
        with open(path) as f:
            return [int(w) for w in f.read().split()]
    except FileNotFoundError:
        return []


class Case:
    """eb-source-exec running `sh -c script`; $M runs a command after writing its pid to the
    case's pid file, so that the test knows every member, and `$A N` runs it once the file holds
    N pids, so that the samples (and with them the run's end) wait for every member; $P writes
    its pid to the pid file + ".polite" too, traps SIGTERM and writes it to ".term" at SIGTERM."""

    def __init__(self, tmp, name, script, members, extra=()):
        self.name, self.members = name, members
        self.pids = os.path.join(tmp, name + ".pids")
        env = {k: v for k, v in os.environ.items() if k not in ("EB_BROKER", "EB_USER")}
        env.update(M=os.path.join(tmp, "member"), A=os.path.join(tmp, "after"),
                   P=os.path.join(tmp, "polite"), PIDS=self.pids)
        self.err = open(os.path.join(tmp, name + ".err"), "w+b")
        self.p = subprocess.Popen(
            [prog("eb-source-exec"), "--dump-raw", os.path.join(tmp, name + ".raw"), *extra,
             "--", "sh", "-c", 'echo $$ >> "$PIDS"; ' + script],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.err, env=env)

    def started(self):
        return wait_for(f"{self.name}: all {self.members} processes of the command start",
                        lambda: len(pids_in(self.pids)) >= self.members, timeout=30)

    def log(self):
        self.err.seek(0)
        return self.err.read().decode(errors="replace")[-400:]

    def none_left(self, what, timeout):
        pids = pids_in(self.pids)
        wait_for(f"{self.name}: {what}: no process of the command is left (pids {pids})",
                 lambda: not any(alive(p) for p in pids), timeout=timeout,
                 detail=lambda: f"alive: {[p for p in pids if alive(p)]}; log: {self.log()!r}")

    def cleanup(self):
        """What the old code left behind must not outlive the test."""
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        for pid in pids_in(self.pids):
            if alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.err.close()


def test():
    tmp = tempfile.mkdtemp(prefix="eb-exec-stop-")
    for name, text in (("member", 'echo $$ >> "$PIDS"\nexec "$@"\n'),
                       ("after", 'n=$1\nshift\nwhile [ "$(wc -l < "$PIDS")" -lt "$n" ]; do\n'
                                 '\tsleep 0.1\ndone\nexec "$@"\n'),
                       ("polite", 'echo $$ >> "$PIDS"\necho $$ > "$PIDS.polite"\n'
                                  'trap \'echo $$ >> "$PIDS.term"; exit 0\' TERM\n'
                                  'while :; do sleep 1; done\n')):
        with open(os.path.join(tmp, name), "w") as f:
            f.write("#!/bin/sh\n" + text)
        os.chmod(os.path.join(tmp, name), 0o755)
    cases = []
    try:
        # 1. SIGTERM while a pipeline runs; the output flows from a third member.
        c = Case(tmp, "sigterm",
                 '"$M" sleep 600 | "$M" cat & "$P" & "$M" "$A" 5 od -v -An -tx1 /dev/urandom; wait',
                 5)
        cases.append(c)
        c.started()
        c.p.send_signal(signal.SIGTERM)
        rc = c.p.wait(timeout=3 * GRACE)
        check(rc == -signal.SIGTERM, f"SIGTERM ends eb-source-exec by that signal (rc {rc})")
        c.none_left("SIGTERM", 3 * GRACE)
        polite, told = pids_in(c.pids + ".polite"), pids_in(c.pids + ".term")
        check(polite and told == polite,
              f"a member of the command's group gets SIGTERM, not SIGKILL alone "
              f"({polite}, {told})")

        # 2. A member that ignores SIGTERM gets SIGKILL after the grace.
        c = Case(tmp, "sigkill",
                 '(trap "" TERM; exec "$M" sleep 600) & '
                 'exec "$M" "$A" 3 od -v -An -tx1 /dev/urandom', 3)
        cases.append(c)
        c.started()
        t0 = time.monotonic()
        c.p.send_signal(signal.SIGTERM)
        c.none_left("a member that ignores SIGTERM", 3 * GRACE)
        took = time.monotonic() - t0
        check(took >= GRACE - 0.5,
              f"the member that ignores SIGTERM had its grace before SIGKILL ({took:.1f} s)")
        c.p.wait(timeout=3 * GRACE)

        # 3. --samples ends the run: the member that still feeds the pipe is not the only one.
        c = Case(tmp, "samples", '"$M" sleep 600 | "$M" "$A" 3 od -v -An -tx1 /dev/urandom', 3,
                 extra=("--samples", "4096"))
        cases.append(c)
        c.started()
        rc = c.p.wait(timeout=3 * GRACE + 30)
        check(rc == 0, f"--samples: eb-source-exec exits 0 ({rc}; {c.log()!r})")
        c.none_left("--samples", 3 * GRACE)

        # 4. The command ends by itself while a background job of its own goes on, its standard
        # output elsewhere (standard error still shared: the harness's hang).
        c = Case(tmp, "own-end",
                 '"$M" sleep 600 > /dev/null & "$M" "$A" 3 head -c 5000 /dev/urandom', 3)
        cases.append(c)
        c.started()
        rc = c.p.wait(timeout=3 * GRACE + 30)
        check(rc == 0, f"a command that exits 0: eb-source-exec exits 0 ({rc}; {c.log()!r})")
        c.none_left("the command's own end", 3 * GRACE)

        # 5. SIGKILL: no handler of ours runs; the keeper (our one child) stops the group.
        c = Case(tmp, "sigkill-source",
                 '"$M" sleep 600 | "$M" cat & "$P" & "$M" "$A" 5 od -v -An -tx1 /dev/urandom; wait',
                 5)
        cases.append(c)
        c.started()
        with open(f"/proc/{c.p.pid}/task/{c.p.pid}/children") as f:
            kids = [int(w) for w in f.read().split()]
        c.p.kill()
        c.p.wait(timeout=3 * GRACE)
        c.none_left("SIGKILL to eb-source-exec", 3 * GRACE)
        wait_for(f"SIGKILL to eb-source-exec: its own children go too ({kids})",
                 lambda: not any(alive(k) for k in kids), timeout=3 * GRACE)
    finally:
        for c in cases:
            c.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(test)
