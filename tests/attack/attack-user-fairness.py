#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One user with 100 sessions, each asking for a block of full entropy again as soon as it is
answered, against a pool fed slowly (about 40 blocks a second: far less than they ask). Sinks
were served in turn by session, so another user's one sink waited behind all 100 and mostly got
EMPTY. Users now take turns: the legitimate sinks (other users) are served in the next turn, as
often as the greedy user's 100 sessions together."""
import selectors
import struct
import threading
import time

from attacklib import (MSG, ROLE_SINK, ROLE_SOURCE, Legit, Raw, Window, check, expect, main,
                       need_root, run_attacker, start_broker)

SESSIONS = 100
ATTACK_S = 20
FEED_BLOCKS = 4  # per PUT, every 0.1 s
# docs/security.md: another user's sink is served within 0.2 s (216 ms at most measured here, the
# wait for the feeder's next PUT included); 3 times that for a loaded machine. Unfair, it was 6.9 s.
SINK_BOUND_MS = 600
# What is timed is a whole client process (its start, its handshake, its wait), and on a loaded
# machine a few of over a hundred are descheduled for longer than the bound whatever the broker
# does: admin status, which never waits for the pool, took up to 843 ms there. So four sinks in
# five are held to the bound, and every one to 3 s; an unfair queue served 3 in 10 within the
# bound and kept sinks waiting up to 4.5 s on the same machine (6.9 s on an idle one).
SINK_SHARE = 0.8
SINK_MAX_MS = 3000
stop = threading.Event()


def feed(report, b):
    """A source of its own (uid 1002) putting FEED_BLOCKS pool blocks every 0.1 s."""
    import os
    r = Raw(b.sock, uid=1002)
    try:
        t, _ = r.hello(ROLE_SOURCE)
        if t != MSG["WELCOME"]:
            report["refused"] = t
            return
        n = 0
        while not stop.is_set():
            data = os.urandom(FEED_BLOCKS * 72)
            r.send(MSG["PUT"], struct.pack(">II", len(data) * 8, len(data)) + data)
            t, _ = r.recv()
            if t == MSG["SLEEP"]:
                t, _ = r.recv()
            n += 1
            time.sleep(0.1)
        report["puts"] = n
    finally:
        r.close()


def greedy(report, b):
    conns = []
    sel = selectors.DefaultSelector()
    try:
        for _ in range(SESSIONS):
            r = Raw(b.sock, uid=1001)
            t, _ = r.hello(ROLE_SINK)
            if t != MSG["WELCOME"]:
                report["refused"] = t
                return
            conns.append(r)
            sel.register(r.s, selectors.EVENT_READ, r)
            r.send(MSG["GET"], struct.pack(">IB3x", 512, 0))  # 64 bytes: one block
        report["ready"] = True
        counts = {}
        while not stop.is_set():
            for key, _ in sel.select(0.2):
                r = key.data
                t, _ = r.recv()
                if t is None:
                    report["closed"] = report.get("closed", 0) + 1
                    sel.unregister(r.s)
                    continue
                counts[t] = counts.get(t, 0) + 1
                r.send(MSG["GET"], struct.pack(">IB3x", 512, 0))  # again, at once
        report["answers"] = counts
    finally:
        for r in conns:
            r.close()


def test():
    need_root("to connect as uids 1001 and 1002")
    b = start_broker(users={"greedy": {"role": "sink", "unix-uid": 1001, "key": False},
                            "feeder": {"role": "source", "unix-uid": 1002, "key": False}},
                     prime_bytes=0)
    try:
        legit = Legit(b)
        # The legitimate source is left out: its 2048 bits a round would feed the pool the
        # attack must find short.
        which = ("sink-tls", "sink-unix", "admin-status")
        tf, fed = run_attacker(feed, b)
        legit.round("no attack", which=which)
        w = Window(b, "user-fairness").begin()
        tg, report = run_attacker(greedy, b)
        deadline = time.monotonic() + 30
        while "ready" not in report and tg.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        check("ready" in report, f"the greedy user's {SESSIONS} sessions are connected "
              f"({report})")
        served = total = 0
        t_end = time.monotonic() + ATTACK_S
        while time.monotonic() < t_end:
            served += legit.round("user-fairness", which=which, must=False)
            total += 1
            w.sample()
        stop.set()
        tg.join(10)
        tf.join(10)
        w.end()
        check("exception" not in report and "exception" not in fed,
              f"the attackers ran ({report}, {fed})")
        print(f"# user-fairness: {served} of {total} legitimate rounds served within "
              f"10 s under {ATTACK_S} s of {SESSIONS} greedy sessions; greedy answers "
              f"{report.get('answers')}; feeder PUTs {fed.get('puts')}")
        expect(served == total, f"every legitimate round is served ({served} of {total})")
        sinks = {k: sorted(v) for k, v in legit.latencies.items() if k.startswith("sink")}
        share = {k: sum(ms < SINK_BOUND_MS for ms in v) / len(v) for k, v in sinks.items()}
        expect(all(f >= SINK_SHARE for f in share.values()),
               f"the other users' sinks are served within {SINK_BOUND_MS} ms "
               f"{SINK_SHARE:.0%} of the time or more ({share})")
        expect(all(v[-1] < SINK_MAX_MS for v in sinks.values()),
               f"the other users' sinks are served within {SINK_MAX_MS} ms each "
               f"({ {k: round(v[-1]) for k, v in sinks.items()} })")
        w.check_cpu()
        w.check_log(50)
        expect(b.alive(), "the broker is still running")
        legit.summary("user-fairness")
    finally:
        stop.set()
        b.cleanup()


main(test)
