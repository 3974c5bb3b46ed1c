#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Refused peers (issue 21, items 2, 3 and 4). A refused connection is told why (an ERROR), and
the broker then lingers a while, reading and dropping what the peer still sends, so that the
peer reads the ERROR rather than a reset. That linger used to keep the session's slot for up to
hello-timeout-sec, and read for as long as the peer sent:

- unix, a local uid that no [user] maps: 320 connections held open took every local slot, and
  the mapped local users got BUSY;
- TLS, one user at its max-sessions: its refused sessions, held open, took every network slot,
  and the other users were closed before their handshakes;
- unix, streaming into refused connections kept the broker reading (an unbounded recv() loop).

docs/protocol.md section 5: a refused (closing) session leaves its slot at once and is counted
apart, in max-lingering, the oldest dropped first; its linger ends after 64 KiB or 2 s. The
legitimate clients are timed under each attack."""
import os
import subprocess
import sys
import textwrap
import time

from attacklib import (ATTACKER, Legit, Window, check, expect, legit_during, main, need_root,
                       run_attacker, start_broker)

NOBODY = 65534
DURATION_S = 12
# A refused session's linger (docs/protocol.md section 5): 64 KiB read, or 2 s.
LINGER_BYTES = 64 * 1024
LINGER_S = 2

# The unix attacker runs as a uid no [user] maps: it holds n connections open for DURATION_S,
# never reading and never closing (hold), or streaming into each as fast as it takes (stream);
# it replaces those the broker closes, and prints how many it opened and the broker closed, and of
# those closed the most bytes one took and the longest one stayed open.
UNIX_ATTACKER = textwrap.dedent("""
    import select, socket, sys, time
    path, mode, n, duration = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    poll = select.poll()
    socks = {}
    chunk = b"x" * 65536
    opened = closed = failed = 0
    sent, since = {}, {}
    max_bytes = max_open = 0
    t0 = time.monotonic()
    def open_one():
        global opened, failed
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
        except OSError:
            s.close()
            failed += 1
            return
        s.setblocking(False)
        socks[s.fileno()] = s
        sent[s.fileno()], since[s.fileno()] = 0, time.monotonic()
        # Never read, never close: only the broker's own close (POLLHUP) ends one.
        poll.register(s, select.POLLOUT if mode == "stream" else 0)
        opened += 1
    for _ in range(n):
        open_one()
    while time.monotonic() - t0 < duration:
        for fd, ev in poll.poll(50):
            s = socks[fd]
            gone = bool(ev & (select.POLLHUP | select.POLLERR))
            if not gone and ev & select.POLLOUT:
                try:
                    sent[fd] += s.send(chunk)
                except BlockingIOError:
                    pass
                except OSError:
                    gone = True
            if gone:
                max_bytes = max(max_bytes, sent[fd])
                max_open = max(max_open, time.monotonic() - since[fd])
                poll.unregister(fd)
                del socks[fd]
                s.close()
                closed += 1
                if opened < 50 * n:
                    open_one()
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sndbuf = probe.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    probe.close()
    print(f"opened {opened} closed {closed} failed {failed} max_bytes {max_bytes} "
          f"max_open_s {max_open:.1f} sndbuf {sndbuf}", flush=True)
""")



def unix_attack(report, b, mode, n):
    def drop():
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    # The system python: the one running the test may live under a home nobody can enter.
    p = subprocess.run(["/usr/bin/python3", "-c", UNIX_ATTACKER, b.sock, mode, str(n),
                        str(DURATION_S)], capture_output=True, timeout=DURATION_S + 60,
                       preexec_fn=drop, cwd="/")
    report["out"] = p.stdout.decode().strip()
    report["err"] = p.stderr.decode().strip()[-300:]


def unix_refused(b, legit, mode, n):
    w = Window(b, f"refused unix peers ({mode})").begin()
    t, report = run_attacker(unix_attack, b, mode, n)
    time.sleep(1)  # the connections are open and refused
    legit_during(t, legit, w, f"refused unix peers ({mode})", every=1.0,
                 which=("sink-unix", "admin-status", "sink-tls"))
    w.end()
    print(f"# unix attacker ({mode}, {n}): {report}")
    check("opened" in report.get("out", ""), "the unix attacker ran")
    out = report["out"].split()
    counts = dict(zip(out[::2], (float(x) for x in out[1::2])))
    if mode == "stream":
        # A linger reads at most 64 KiB (docs/security.md: "at most 128 KiB taken by one, 64 KiB
        # read, the rest the socket's buffer"): what one connection took is those 64 KiB, what
        # its send buffer held unread, and one 64 KiB send in flight at most.
        most = LINGER_BYTES + counts["sndbuf"] + 65536
        expect(counts["closed"] > 0 and counts["max_bytes"] <= most and
               counts["max_open_s"] < 2 * LINGER_S,
               f"a refused connection streamed into is closed within {2 * LINGER_S} s, having "
               f"taken at most {most:.0f} bytes ({counts['max_bytes']:.0f} bytes, "
               f"{counts['max_open_s']} s)")
    else:
        # Held open and silent, a refused connection lingers 2 s, then is closed.
        expect(counts["closed"] > 0 and counts["max_open_s"] < 2 * LINGER_S,
               f"a refused connection held open is closed within {2 * LINGER_S} s of its linger "
               f"({counts['max_open_s']} s)")
    w.check_cpu()
    w.check_log(100)


def tls_refused(b, legit, peer):
    w = Window(b, "refused TLS sessions").begin()
    p = subprocess.Popen([peer, "127.0.0.1", str(b.port), "hog", b.keys["hog"], "busy=200",
                          ATTACKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    line = p.stdout.readline().decode().strip()
    check(line == "held", f"the hog holds its sessions ({line!r})")
    legit.round("a user at its max-sessions holding refused sessions",
                which=("sink-tls", "admin-status", "source-tls"))
    legit.round("a user at its max-sessions holding refused sessions",
                which=("sink-tls", "admin-status", "source-tls"))
    out, err = p.communicate(b"\n", timeout=60)
    w.end()
    out = out.decode()
    print(f"# hog: {out.split()} {err.decode().strip()[-200:]!r}")
    counts = dict(zip(out.split()[::2], (int(x) for x in out.split()[1::2])))
    expect(counts.get("welcome") == 4, f"the hog has its 4 sessions ({counts})")
    expect(counts.get("refused", 0) == 196,
           f"each of its other 196 is answered ERROR, none closed unanswered for want of a "
           f"slot ({counts})")
    w.check_cpu()


def test():
    need_root(f"to connect as uid {NOBODY}")
    peer = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.environ.get("EB_BUILD_DIR", "build"), "tests", "attack-tls-peer")
    check(os.access(peer, os.X_OK), f"the TLS peer {peer} is built")
    b = start_broker(users={"hog": {"role": "sink"}}, extra="max-sessions = 64",
                     user_keys={"hog": "max-sessions = 4"})
    try:
        legit = Legit(b)
        legit.round("no attack")
        # Item 2: more refused unix connections than there are local slots (256), held open.
        unix_refused(b, legit, "hold", 320)
        # Item 3: a user at its max-sessions (4) holding 196 refused sessions open, against
        # 64 network slots.
        tls_refused(b, legit, peer)
        # Item 4: 8 refused unix connections each streamed into as fast as they take it.
        unix_refused(b, legit, "stream", 8)
        expect(b.alive(), "the broker is still running")
        legit.summary("refused peers")
    finally:
        b.cleanup()


main(test)
