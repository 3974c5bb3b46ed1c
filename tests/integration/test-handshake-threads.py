#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""TLS handshakes on worker threads (handshake-threads), under a storm of fresh sinks:
- every seed of the storm is delivered while SIGHUP reloads the users again and again (a
  worker looks keys up while the loop swaps the configuration);
- a key rotated by a reload is refused at once, with the log line naming the user, and the new
  one accepted;
- the broker stopped in the middle of a storm, with handshakes still on the workers, exits 0;
- the threads are there (/proc), and the journal says nothing worse than the refusal asked for;
- handshake-threads = auto starts none on one or two CPUs (docs/decisions.md).
scripts/test runs this under ThreadSanitizer too (EB_BUILD_DIR pointing at that build)."""
import os
import re
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import stormlib  # noqa: E402
from eblib import BUILD, check, main, wait_for, write_key  # noqa: E402

USERS = 20
SEEDS = 1500
CONCURRENCY = 64
THREADS = 2


def storm(sb, users_file, count, concurrency=CONCURRENCY):
    return subprocess.Popen(
        [stormlib.client_path(), "--connect", f"127.0.0.1:{sb.broker.port}", "--users-file",
         users_file, "--mode", "fresh", "--count", str(count), "--concurrency",
         str(concurrency), "--threads", "2", "--timeout", "120"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def figures(proc, timeout=600):
    out, err = proc.communicate(timeout=timeout)
    check(proc.returncode == 0, f"bench-storm-client exited {proc.returncode}: {err}")
    return out, stormlib.parse_kv(out)


def hup(sb, n):
    """The n-th reload, waited for by its log line."""
    os.kill(sb.pid, signal.SIGHUP)
    wait_for(f"reload {n} to be logged",
             lambda: sb.broker.read_log().count("Reloaded ") >= n, 60)


def worker_threads(pid):
    """{thread id: name} of the broker's handshake workers."""
    found = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
        except FileNotFoundError:
            continue
        if name.startswith("eb-worker-"):
            found[tid] = name
    return found


def test():
    sb = stormlib.StormBroker(BUILD, sessions=CONCURRENCY, users=USERS, seeds=2 * SEEDS + 64,
                              broker_extra=f"handshake-threads = {THREADS}\n")
    try:
        sb.start()
        workers = worker_threads(sb.pid)
        check(len(workers) == THREADS, f"{THREADS} eb-worker threads, not {workers}")
        before = sum(stormlib.cpu_seconds(sb.pid, thread=t) for t in workers)

        # 1. A storm, with reloads for as long as it lasts.
        proc = storm(sb, sb.users_file, SEEDS)
        reloads = 0
        while proc.poll() is None:
            reloads += 1
            hup(sb, reloads)
        out, r = figures(proc)
        check(r.get("seeds") == SEEDS and r.get("failed") == 0,
              f"all {SEEDS} seeds delivered during {reloads} reloads: {out.strip()}")
        check(reloads >= 2, f"the storm outlasted at least 2 reloads, not {reloads}")
        # 1,500 handshakes at about 0.3 ms each: the workers did them, not the loop.
        spent = sum(stormlib.cpu_seconds(sb.pid, thread=t) for t in workers) - before
        check(spent >= 0.1, f"the workers spent CPU on the handshakes ({spent:.2f} s)")

        # 2. vm0's key rotated: the old one is refused, the new one taken.
        old_key = sb.broker.keys["vm0"]
        new_key = os.path.join(sb.tmp, "vm0-new.key")
        write_key(new_key)
        with open(sb.broker.conf) as f:
            conf = f.read()
        with open(sb.broker.conf, "w") as f:
            f.write(conf.replace(f"key-file = {old_key}", f"key-file = {new_key}"))
        reloads += 1
        hup(sb, reloads)
        for name, key in (("old", old_key), ("new", new_key)):
            path = os.path.join(sb.tmp, f"users-{name}")
            with open(path, "w") as f:
                f.write(f"vm0 {key}\n")
            out, r = figures(storm(sb, path, 4, concurrency=2))
            if name == "old":
                check(r.get("seeds") == 0 and r.get("fail_handshake") == 4,
                      f"vm0's old key refused in the handshake: {out.strip()}")
            else:
                check(r.get("seeds") == 4 and r.get("failed") == 0,
                      f"vm0's new key accepted: {out.strip()}")
        check('wrong key for user "vm0"' in sb.broker.read_log(),
              "the refusal logged, naming vm0")

        # 3. Stopped in the middle of a storm: handshakes are on the workers as it stops.
        cpu0 = stormlib.cpu_seconds(sb.pid)
        proc = storm(sb, sb.users_file, 100000, concurrency=CONCURRENCY)
        wait_for("the broker to be busy with the second storm",
                 lambda: stormlib.cpu_seconds(sb.pid) > cpu0 + 0.5, 120)
        rc = sb.broker.stop(signal.SIGTERM)
        proc.kill()
        proc.wait()
        check(rc == 0, f"the broker stopped in a storm exits 0, not {rc}: "
                       f"{sb.broker.read_log()[-2000:]}")
        check("Broker stopping" in sb.broker.read_log(), "the stop logged")
        bad = re.findall(r".*(?:Assertion|Segmentation|double free|corrupted).*",
                         sb.broker.read_log())
        check(not bad, f"nothing broke: {bad}")
    finally:
        sb.cleanup()
    auto_on_two_cpus()


def auto_on_two_cpus():
    """4. handshake-threads = auto, the broker held to one CPU and to two: no worker either way
    (its children inherit this process's affinity)."""
    mine = os.sched_getaffinity(0)
    for n in sorted({1, min(2, len(mine))}):
        sb = stormlib.StormBroker(BUILD, sessions=4, users=1, seeds=16)
        try:
            os.sched_setaffinity(0, sorted(mine)[:n])
            try:
                sb.start()  # the fill's connection execs the broker
            finally:
                os.sched_setaffinity(0, mine)
            check(len(os.sched_getaffinity(sb.pid)) == n, f"the broker runs on {n} CPUs")
            workers = worker_threads(sb.pid)
            check(not workers, f"no eb-worker thread on {n} CPUs with auto, not {workers}")
        finally:
            sb.cleanup()


if __name__ == "__main__":
    main(test)
