#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""srv:NAME broker addresses against a real DNS server. The test runs itself in a network and
mount namespace of its own (unshare), where Debian's dnsmasq serves the zone fleet.test on
127.0.0.1:53 and a private /etc/resolv.conf (bind-mounted, seen only in that namespace) points
the clients at it; the host's resolver is never touched. Three brokers listen on 127.0.0.1, each
on its own port, named b1, b2, b3.fleet.test; the SRV records of _entropy-broker._tcp.fleet.test
say which to use:
- a sink with srv:fleet.test draws from the priority-0 broker;
- eb-brokerctl with srv: works, and so does a broker's [upstream] with srv:;
- the priority-0 broker killed, the sink fails over to the next;
- weights tested against dnsmasq: two records of one priority, weights 30 and 10, drawn 120
  times, within 4.5 standard deviations of RFC 2782's 31 in 41;
- a long-lived sink while the priority-0 target is dead stays on the one that works when it
  looks the unchanged records up again: one connection to the dead target, no "the SRV records
  changed" line (issue 31, item 7);
- the records changed while a sink runs (dnsmasq restarted with new ones): the sink follows them
  after their TTL (at least 30 s) and a spread of 15 s, saying so once;
- a name with no records: one line naming the address, the name asked for and NXDOMAIN."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from eblib import (Broker, check, inner_run, main, need, need_root, prog, rerun_unshared, run,
                   wait_for)

TTL = 5
# What the clients use a TTL under it for (EB_SRV_TTL_MIN_S), and the spread over which they
# leave a target that changed records no longer put first (EB_SRV_LEAVE_SPREAD_S).
TTL_FLOOR = 30
SPREAD = 15
WEIGHT_DRAWS = 120
QNAME = "_entropy-broker._tcp.fleet.test"


class Dns:
    """dnsmasq answering for fleet.test (and NXDOMAIN for the rest of .test) on 127.0.0.1:53."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.proc = None
        self.log = os.path.join(tmp, "dnsmasq.log")

    def start(self, srv, hosts):
        """srv: [(priority, weight, target, port)]; hosts: the names that are 127.0.0.1."""
        cmd = ["dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv",
               "--no-hosts", "--no-poll", "--listen-address=127.0.0.1", "--bind-interfaces",
               "--port=53", "--local=/test/", f"--local-ttl={TTL}", "--user=root",
               f"--pid-file={os.path.join(self.tmp, 'dnsmasq.pid')}", "--log-facility=-",
               "--log-queries"]
        cmd += [f"--srv-host={QNAME},{t},{port},{prio},{weight}" for prio, weight, t, port in srv]
        cmd += [f"--host-record={h},127.0.0.1" for h in hosts]
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=self.logf)
        wait_for("dnsmasq answers", lambda: run(["getent", "hosts", hosts[0]]).returncode == 0,
                 timeout=20, detail=lambda: open(self.log, errors="replace").read()[-500:])

    def srv_queries(self):
        """How many SRV queries for the fleet's name dnsmasq has logged."""
        with open(self.log, errors="replace") as f:
            return f.read().count(f"query[SRV] {QNAME}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None


class DeadTarget:
    """A target that takes each connection and closes it at once, counting them."""

    def __init__(self):
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(64)
        self.port = self.s.getsockname()[1]
        self.count = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            self.count += 1
            c.close()

    def close(self):
        self.s.close()


def sink(key, n, broker="srv:fleet.test", extra=()):
    return run([prog("eb-sink-file"), "-v", "-b", broker, "-u", "sink", "-k", key, "--bytes",
                str(n), "-o", "/dev/null", "--timeout", "60", *extra], timeout=90)


def served_by(p):
    """The broker an eb-sink-file -v run says it drew from."""
    err = p.stderr.decode(errors="replace")
    return [l.split("Drawing from ", 1)[1] for l in err.splitlines() if "Drawing from " in l]


def inner():
    tmp = tempfile.mkdtemp(prefix="eb-srv-")
    dns = Dns(tmp)
    brokers, follower = [], None
    try:
        run(["ip", "link", "set", "lo", "up"], check=True)
        # The clients' resolver: this namespace's dnsmasq, through a resolv.conf (and an
        # nsswitch.conf with no other source of names) seen in this mount namespace only.
        with open(os.path.join(tmp, "resolv.conf"), "w") as f:
            f.write("nameserver 127.0.0.1\noptions timeout:2 attempts:2\n")
        with open(os.path.join(tmp, "nsswitch.conf"), "w") as f:
            f.write("hosts: files dns\n")
        for name in ("resolv.conf", "nsswitch.conf"):
            run(["mount", "--bind", os.path.join(tmp, name), f"/etc/{name}"], check=True)

        users = {"sink": {"role": "sink"}, "src": {"role": "source"}, "admin": {"role": "admin"},
                 "edge": {"role": "sink", "downstream-broker": "yes"}}
        keys = None
        for _ in range(3):
            b = Broker(users, keys=keys).start()
            keys = keys or b.keys
            brokers.append(b)
        b1, b2, b3 = brokers
        data = os.path.join(tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(64 * 1024))
        for b in brokers:
            p = run([prog("eb-source-file"), "-b", b.tcp, "-u", "src", "-k", keys["src"],
                     "--credit-per-byte=8", "--max-credit-per-byte=8", data])
            check(p.returncode == 0, f"a source fills broker {b.port}: {p.stderr[-300:]}")

        name = lambda i: f"b{i}.fleet.test"
        dns.start([(0, 10, name(1), b1.port), (1, 10, name(2), b2.port)],
                  [name(1), name(2), name(3)])

        p = sink(keys["sink"], 4096)
        check(p.returncode == 0, f"a sink with srv:fleet.test draws: {p.stderr[-500:]}")
        check(served_by(p) == [f"srv:fleet.test ({name(1)}:{b1.port})"],
              f"from the priority-0 broker: {served_by(p)}")

        p = run([prog("eb-brokerctl"), "-b", "srv:fleet.test", "-u", "admin", "-k",
                 keys["admin"], "status"])
        check(p.returncode == 0 and b"pool" in p.stdout.lower(),
              f"eb-brokerctl -b srv:fleet.test status works: {p.stdout[-300:]} {p.stderr[-300:]}")

        # [upstream] with srv:.
        d = Broker({"admin": {"role": "admin"}}, capacity=65536, broker_extra=f"""
[upstream]
broker = srv:fleet.test
user = edge
key-file = {keys['edge']}
""")
        brokers.append(d)
        d.start()
        d.status()  # the first connection starts it (socket activation)
        check(d.wait_log(f"Drawing from upstream srv:fleet.test ({name(1)}:{b1.port})", 30),
              "a broker's [upstream] with srv: draws from the priority-0 broker:\n" +
              d.read_log()[-800:])
        d.cleanup()
        brokers.remove(d)

        # Weights against the real server: b1 and b2 at one priority, weights 30 and 10. RFC
        # 2782's draw from 0..40 picks b1 for 0..30: 31 times in 41.
        dns.stop()
        dns.start([(0, 30, name(1), b1.port), (0, 10, name(2), b2.port)],
                  [name(1), name(2), name(3)])
        firsts = []
        for _ in range(WEIGHT_DRAWS):
            p = sink(keys["sink"], 8)
            if p.returncode != 0:
                check(False, f"a sink draws: {p.stderr[-300:]}")
            firsts += served_by(p)
        n1 = firsts.count(f"srv:fleet.test ({name(1)}:{b1.port})")
        p1 = 31 / 41
        mean, sd = WEIGHT_DRAWS * p1, (WEIGHT_DRAWS * p1 * (1 - p1)) ** 0.5
        print(f"# weights 30 and 10: b1 first {n1} times in {WEIGHT_DRAWS} (expected {mean:.0f})")
        check(len(firsts) == WEIGHT_DRAWS and abs(n1 - mean) <= 4.5 * sd,
              f"b1 is drawn from about 31 times in 41: {n1} of {len(firsts)}, expected "
              f"{mean:.0f} +- {4.5 * sd:.0f}")
        dns.stop()
        dns.start([(0, 10, name(1), b1.port), (1, 10, name(2), b2.port)],
                  [name(1), name(2), name(3)])

        # The priority-0 broker killed: the next in the records serves.
        b1.stop(signal.SIGKILL)
        p = sink(keys["sink"], 4096)
        check(p.returncode == 0, f"with b1 killed the sink still draws: {p.stderr[-500:]}")
        check(served_by(p) == [f"srv:fleet.test ({name(2)}:{b2.port})"],
              f"from the priority-1 broker: {served_by(p)}")

        # A long-lived sink while the priority-0 target is dead (a balancer that takes each
        # connection and closes it, as HAProxy with no server up does): the sink goes on to b2,
        # and stays there when it looks the unchanged records up again after their TTL (5 s,
        # used for EB_SRV_TTL_MIN_S, 30 s): one connection to the dead target in all, and no
        # "the SRV records changed" (issue 31, item 7: it came back to the dead one every 5 s,
        # saying the records had changed).
        lb = DeadTarget()
        hosts = [name(1), name(2), name(3), "lb.fleet.test"]
        dns.stop()
        dns.start([(0, 10, "lb.fleet.test", lb.port), (1, 10, name(2), b2.port)], hosts)
        flog = open(os.path.join(tmp, "follower.log"), "wb")
        follower = subprocess.Popen(
            [prog("eb-sink-file"), "-v", "-b", "srv:fleet.test", "-u", "sink", "-k",
             keys["sink"], "--bytes", str(1 << 40), "-o", "/dev/null", "--timeout", "300"],
            stdout=flog, stderr=flog)
        flog_text = lambda: open(os.path.join(tmp, "follower.log"), errors="replace").read()
        on_b2 = f"Drawing from srv:fleet.test ({name(2)}:{b2.port})"
        wait_for("the long-running sink draws from b2", lambda: on_b2 in flog_text(),
                 timeout=60, detail=lambda: flog_text()[-800:])
        asked = dns.srv_queries()
        connected = time.monotonic()
        wait_for("the sink looks the records up again after their TTL",
                 lambda: dns.srv_queries() > asked, timeout=2 * TTL_FLOOR,
                 detail=lambda: flog_text()[-800:])
        relookup = time.monotonic() - connected
        # What it does with the answer shows at its next GET, well within a second.
        time.sleep(2)
        print(f"# looked up again {relookup:.1f} s after connecting; {lb.count} connection(s) "
              f"to the dead target")
        check(relookup >= TTL_FLOOR - 2,
              f"the TTL of {TTL} s is used for {TTL_FLOOR} s ({relookup:.1f} s)")
        check(lb.count == 1 and flog_text().count("Drawing from") == 1,
              f"the sink stays on b2: {lb.count} connection(s) to the dead target (1 expected), "
              f"{flog_text().count('Drawing from')} connection(s) made (1 expected)")
        check("the SRV records changed" not in flog_text(),
              "no \"the SRV records changed\" for unchanged records:\n" + flog_text()[-500:])

        # The records change to put b3 first and drop the dead target: after the TTL, and a
        # moment drawn over the next 15 s, the sink leaves b2 for b3, saying why, once.
        dns.stop()
        changed = time.monotonic()
        dns.start([(0, 10, name(3), b3.port), (1, 10, name(2), b2.port)], hosts)
        bound = TTL_FLOOR + SPREAD
        wait_for("the sink follows the changed records to b3",
                 lambda: f"Drawing from srv:fleet.test ({name(3)}:{b3.port})" in flog_text(),
                 timeout=2 * bound, detail=lambda: flog_text()[-800:])
        took = time.monotonic() - changed
        print(f"# the sink followed the new records after {took:.1f} s (TTL {TTL} s, used for "
              f"{TTL_FLOOR} s, then up to {SPREAD} s)")
        check(took <= bound + 5,
              f"it follows within the TTL floor and the spread, {bound} s ({took:.1f} s)")
        check(flog_text().count("the SRV records changed") == 1,
              "and says why it left b2, once:\n" + flog_text()[-500:])
        follower.kill()
        follower.wait()
        follower = None
        lb.close()

        # A name with no records: the line an administrator reads.
        p = sink(keys["sink"], 64, broker="srv:nothing.test", extra=("--timeout", "3"))
        err = p.stderr.decode(errors="replace")
        want = f"srv:nothing.test: no SRV records for _entropy-broker._tcp.nothing.test (NXDOMAIN)"
        check(p.returncode != 0 and want in err and "tcp://HOST[:PORT]" in err,
              f"a name without records is said as such, with what to do:\n{err[-600:]}")
        print("# " + next(l for l in err.splitlines() if want in l))
    finally:
        if follower:
            follower.kill()
            follower.wait()
        dns.stop()
        for b in brokers:
            b.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


def test():
    if inner_run():
        inner()
        return
    need("dnsmasq")
    need("ip")
    need_root("for a network and mount namespace (unshare --net --mount)")
    # The same test, inside the namespaces; its output is this test's.
    rerun_unshared(net=True, timeout=400)


if __name__ == "__main__":
    main(test)
