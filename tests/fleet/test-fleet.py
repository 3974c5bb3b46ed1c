#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A fleet on one machine, in network namespaces joined by veth pairs: a site broker fed by a
source, two edge brokers drawing from it over TCP ([upstream]), HAProxy in TCP mode with health
checks in front of the edges, dnsmasq with the SRV records, and the guests in a namespace of
their own. The configurations are docs/fleet.md's, read from it.

A boot storm of fresh TLS seeds goes through HAProxy while one edge is killed with SIGKILL in
its middle: every seed is delivered (the guests retry), no two are the same, the survivor
serves the rest, and the killed edge, started again by socket activation, is seen up by
HAProxy's health check and serves again. Then the accounting across the tree, from each
broker's own counters, and one Prometheus scraping the three brokers' eb-metrics with
docs/fleet.md's recording rules; last, the site killed: the edges serve what they hold, then
their guests wait, and Prometheus says so.

Every guest has a key of its own, minted with docs/fleet.md's eb-keygen line; one is revoked
alone, by removing its drop-in and reloading, in the middle of a storm of the others. HAProxy
reads each edge's agent (eb-brokerd-agent.socket): the edge a guest empties once the site is
dead is drained within a stated bound, and new guests all go to the other edge. HAProxy's
cli_abrt for the seed sessions is printed."""
import csv
import io
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))

import netnslib  # noqa: E402
from eblib import (BUILD, SKIP, Broker, Failure, check, main, need, prog,  # noqa: E402
                   prometheus_query, prometheus_start, reserve_port, run, stop_process,
                   tcp_listening, wait_for, write_key)

SEEDS = int(os.environ.get("EB_FLEET_SEEDS", "5000"))
CONCURRENCY = 64
SEED_BITS = 256
# The edge is killed once it has served this share of the storm.
KILL_AFTER = SEEDS // 5
# The SP 800-90B start-up test: the first 1024 bytes a broker takes from an upstream (on each
# connection to it) are tested, not credited.
STARTUP_BITS = 8 * 1024
# What a pool block of 512 full-entropy bits stands for in credited input (docs/pool.md).
BLOCK_LEVEL, BLOCK_CREDIT = 512, 576

GUEST_ADDRS = [f"10.83.0.{10 + i}" for i in range(8)]
# One key per guest, minted by docs/fleet.md's eb-keygen line; the last is revoked alone.
GUESTS = [f"guest-{i:02d}" for i in range(8)]
REVOKED = GUESTS[-1]
# The agent's check every 500 ms (haproxy.cfg): an emptied edge is drained by the next one,
# within a second as docs/fleet.md says; the bound is 2.5 times that.
DRAIN_BOUND_S = 2.5
# A long-lived sink that lists both edges leaves the empty one after 10 to 20 s of EMPTY, at the
# next EMPTY: within 25 s (eb-sink-file(1)); the check allows twice that.
LEAVE_BOUND_S = 25
# docs/fleet.md's named blocks, each used below: placed and run, or read for what it sets.
BLOCKS = ("site.conf", "edge.conf", "haproxy.cfg", "dnsmasq.conf", "fleet-rules.yml",
          "lb.sh", "guests.sh", "edge-a.sh", "resolv.conf", "eb-brokerd.service.d/network.conf",
          "eb-brokerd-agent.socket.d/fleet.conf", "mint-guest.sh",
          "eb-metrics.socket.d/fleet.conf", "prometheus.yml")
# HAProxy's address on the link to each edge: what an edge sees a proxied client come through.
HAPROXY_FROM = {"edge-a": "10.82.1.1", "edge-b": "10.82.2.1"}


def doc_blocks():
    """docs/fleet.md's configuration blocks, by the name after the language: ```ini site.conf."""
    with open(os.path.join(SRC, "docs", "fleet.md")) as f:
        text = f.read()
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^```\w+ (\S+)\n(.*?)^```$", text, re.M | re.S)}


def unit_value(text, key):
    """A systemd unit file's value for key: the last one set (an empty value resets)."""
    value = None
    for line in text.splitlines():
        if line.startswith(key + "="):
            value = line.split("=", 1)[1].strip() or None
    return value


def place(text, tmp, keys):
    """A configuration as written for a machine, with its paths moved into the test's: the
    keys into the one shared key directory, the rest into this broker's own."""
    text = text.replace("/etc/entropy-broker/keys/", keys + "/")
    for d in ("/etc/entropy-broker/", "/var/lib/entropy-broker/", "/run/entropy-broker/",
              "/run/haproxy/"):
        text = text.replace(d, tmp + "/")
    return text


class FleetBroker(Broker):
    """A broker of docs/fleet.md's, socket-activated in its namespace on 0.0.0.0:55225, and an
    edge's agent on the address its eb-brokerd-agent.socket drop-in names."""

    def __init__(self, name, ns, conf, keys, agent=None):
        super().__init__({}, tmp=tempfile.mkdtemp(prefix=f"eb-fleet-{name}-"))
        self.name = name
        self.ns = ns
        self.prefix = ns.cmd([])
        self.host, self.port = "0.0.0.0", 55225
        if agent:
            self.extra_listen = [(agent, "agent")]
        with open(self.conf, "w") as f:
            f.write(place(conf, self.tmp, keys))
        self.dropins = self.conf + ".d"
        os.mkdir(self.dropins)

    def ctl(self, *args):
        p = run([prog("eb-brokerctl"), "-b", self.unix, *args, "--json"], check=True)
        return json.loads(p.stdout)

    def status(self, user=None):
        return self.ctl("status")

    def users(self):
        return {u["name"]: u for u in self.ctl("users")["users"]}

    def broker_pid(self):
        """The pid of eb-brokerd once the activator has exec'd it (the first connection)."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        with open(f"/proc/{self.proc.pid}/comm") as f:
            return self.proc.pid if f.read().strip() == "eb-brokerd" else None


class HAProxy:
    def __init__(self, ns, conf, tmp):
        self.tmp = tmp
        self.sock = os.path.join(tmp, "admin.sock")
        self.cfg = os.path.join(tmp, "haproxy.cfg")
        with open(self.cfg, "w") as f:
            f.write(place(conf, tmp, tmp))
        self.log = os.path.join(tmp, "haproxy.log")
        if os.path.exists(self.sock):
            os.unlink(self.sock)  # a stopped HAProxy's, which the new one makes again
        p = run(["haproxy", "-c", "-f", self.cfg])
        check(p.returncode == 0, f"haproxy -c accepts docs/fleet.md's haproxy.cfg: "
              f"{(p.stdout + p.stderr).decode(errors='replace').strip()[-400:]}")
        self.proc = subprocess.Popen(ns.cmd(["haproxy", "-db", "-f", self.cfg]),
                                     stdout=open(self.log, "wb"), stderr=subprocess.STDOUT)
        wait_for("HAProxy's stats socket", lambda: self.proc.poll() is None and
                 os.path.exists(self.sock), 30, detail=self.read_log)

    def read_log(self):
        with open(self.log, errors="replace") as f:
            return f.read()[-2000:]

    def command(self, line):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(self.sock)
            s.sendall(line.encode() + b"\n")
            out = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return out.decode()
                out += chunk

    def servers(self):
        """{server: row} of `show stat` for the edges backend."""
        text = self.command("show stat").lstrip("# ")
        return {r["svname"]: r for r in csv.DictReader(io.StringIO(text))
                if r["pxname"] == "edges" and r["svname"] not in ("BACKEND",)}

    def state(self, server):
        return self.servers()[server]["status"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def storm(guests, users_file, count, concurrency, tmp, tag, binds=GUEST_ADDRS, retries=1000,
          wait=True):
    """bench-storm-client in the guests' namespace through HAProxy: fresh TLS seeds, retried.
    Its retries follow at once, not after a back-off as a sink's do: until HAProxy's check takes
    the killed edge out (half a second), a seed sent there can fail tens of times (seen: 2 of
    5,000 seeds ran out of 30 tries), hence many."""
    seeds = os.path.join(tmp, f"seeds-{tag}")
    cmd = guests.cmd([os.path.join(BUILD, "tests", "bench", "bench-storm-client"),
                      "--connect", "10.83.0.1:55225", "--users-file", users_file,
                      "--count", str(count), "--concurrency", str(concurrency),
                      "--bits", str(SEED_BITS), "--timeout", "10", "--retries", str(retries),
                      "--bind", ",".join(binds), "--seeds-file", seeds])
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.seeds = seeds
    if wait:
        return finish_storm(p)
    return p


def finish_storm(p, timeout=300):
    out, err = p.communicate(timeout=timeout)
    line = out.decode().strip()
    check(p.returncode == 0 and line.startswith("seeds="),
          f"the storm client ran ({p.returncode}{err.decode(errors='replace')[-500:]})")
    figures = {}
    for m in re.finditer(r"(\w+)=([\d.]+)", line):
        figures[m.group(1)] = float(m.group(2)) if "." in m.group(2) else int(m.group(2))
    with open(p.seeds, "rb") as f:
        data = f.read()
    figures["seed_bytes"] = [data[i:i + SEED_BITS // 8] for i in range(0, len(data), SEED_BITS // 8)]
    return line, figures


def settled(read, what, timeout=60):
    """read() once two readings a second apart agree."""
    last = read()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(1)
        now = read()
        if now == last:
            return now
        last = now
    check(False, f"{what} settles (last {last})")


def metrics_exporter(broker, tmp):
    hold, port = reserve_port()
    cmd = ["systemd-socket-activate", "--accept", "-l", f"127.0.0.1:{port}"]
    for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        if var in os.environ:
            cmd += ["-E", f"{var}={os.environ[var]}"]
    cmd += [prog("eb-metrics"), "-b", broker.unix, "--timeout", "2"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(tmp, f"metrics-{broker.name}.log"), "wb"))
    wait_for(f"eb-metrics for {broker.name}", lambda: tcp_listening(port), 10)
    p.hold = hold
    return p, port




def test():
    need("systemd-socket-activate")
    need("haproxy")
    netnslib.need_netns()
    dnsmasq = shutil.which("dnsmasq") or "/usr/sbin/dnsmasq"
    if not os.path.exists(dnsmasq):
        print("SKIP: needs dnsmasq (scripts/install-deps --test)")
        raise SystemExit(SKIP)

    docs = doc_blocks()
    for name in BLOCKS:
        check(name in docs, f"docs/fleet.md has {name}")
    check(set(docs) == set(BLOCKS), f"the test uses every block of docs/fleet.md: "
          f"{sorted(set(docs) - set(BLOCKS))} are not")
    # The drop-ins for systemd, which the test has not: what each sets, as the test sets it.
    check(unit_value(docs["eb-brokerd.service.d/network.conf"], "PrivateNetwork") == "no",
          "the brokers' service drop-in gives them the network (PrivateNetwork=no)")
    agent_addr = unit_value(docs["eb-brokerd-agent.socket.d/fleet.conf"], "ListenStream")
    check(agent_addr == "10.82.1.2:55226" and
          unit_value(docs["eb-brokerd-agent.socket.d/fleet.conf"], "IPAddressAllow") ==
          HAPROXY_FROM["edge-a"], f"edge-a's agent listens on its link to HAProxy, for HAProxy "
          f"alone ({agent_addr})")
    check(unit_value(docs["eb-metrics.socket.d/fleet.conf"], "ListenStream") ==
          "10.82.1.2:9226", "edge-a's eb-metrics listens on its link to lb")

    tmp = tempfile.mkdtemp(prefix="eb-fleet-")
    os.chmod(tmp, 0o755)
    keys = os.path.join(tmp, "keys")
    os.mkdir(keys, 0o700)
    for k in ("edge-a", "edge-b"):
        write_key(os.path.join(keys, f"{k}.key"))
    users_file = os.path.join(tmp, "users")
    with open(users_file, "w") as f:
        f.writelines(f"{g} {keys}/{g}.key\n" for g in GUESTS)
    # The guests still welcome once REVOKED is gone.
    kept_file = os.path.join(tmp, "users-kept")
    with open(kept_file, "w") as f:
        f.writelines(f"{g} {keys}/{g}.key\n" for g in GUESTS if g != REVOKED)
    guest0 = ["-u", GUESTS[0], "-k", f"{keys}/{GUESTS[0]}.key"]

    site = edges = ha = dns = prom = None
    exporters, holds = [], []
    try:
        # The wiring: every edge has a cable to the site and one to the balancer; the guests,
        # with an address each, have one to the balancer, where HAProxy and dnsmasq listen.
        ns = {n: netnslib.Netns(n) for n in ("site", "edge-a", "edge-b", "lb", "guests")}
        netnslib.link(ns["site"], "10.81.1.1", ns["edge-a"], "10.81.1.2")
        netnslib.link(ns["site"], "10.81.2.1", ns["edge-b"], "10.81.2.2")
        netnslib.link(ns["lb"], "10.82.1.1", ns["edge-a"], "10.82.1.2")
        netnslib.link(ns["lb"], "10.82.2.1", ns["edge-b"], "10.82.2.2")
        netnslib.link(ns["lb"], "10.83.0.1", ns["guests"], GUEST_ADDRS)
        # The routes and the guests' resolver, as docs/fleet.md gives them to each machine.
        for name, script in (("lb", docs["lb.sh"]), ("guests", docs["guests.sh"]),
                             ("edge-a", docs["edge-a.sh"]),
                             ("edge-b", docs["edge-a.sh"].replace("10.82.1.1", "10.82.2.1"))):
            ns[name].run(["sh", "-e", "-c", script], check=True)
        os.makedirs(ns["guests"].etc, exist_ok=True)
        with open(os.path.join(ns["guests"].etc, "resolv.conf"), "w") as f:
            f.write(docs["resolv.conf"])
        print(f"# namespaces: {', '.join(n.name for n in ns.values())}")

        # The site, filled by its source before the edges start drawing.
        site = FleetBroker("site", ns["site"], docs["site.conf"], keys).start()
        fill = os.path.join(tmp, "fill")
        with open(fill, "wb") as f:
            f.write(os.urandom(2 * 1024 * 1024))
        p = run([prog("eb-source-file"), "-b", site.unix, "--credit-per-byte=8",
                 "--max-credit-per-byte=8", fill], timeout=300)
        os.unlink(fill)
        check(p.returncode == 0, f"the site's source donates 2 MiB "
              f"({p.stderr.decode(errors='replace').strip()[-300:]})")
        s0 = site.status()
        check(s0["pool_bits"] >= 12 * 1024 * 1024, f"the site holds {s0['pool_bits']} bits")

        edges = {}
        for name in ("edge-a", "edge-b"):
            conf = docs["edge.conf"]
            if name == "edge-b":
                conf = (conf.replace("10.81.1.1", "10.81.2.1").replace("10.82.1.1", "10.82.2.1")
                        .replace("edge-a", "edge-b"))
            agent = agent_addr if name == "edge-a" else agent_addr.replace("10.82.1.", "10.82.2.")
            edges[name] = FleetBroker(name, ns[name], conf, keys, agent=agent)
        a, b = edges["edge-a"], edges["edge-b"]
        # One key per guest, minted by docs/fleet.md's line on edge-a; its two files copied to
        # edge-b, as the page says.
        for g in GUESTS:
            argv = shlex.split(docs["mint-guest.sh"].replace("guest-03", g))
            check(argv[0] == "eb-keygen", "the minting line runs eb-keygen")
            # The brokers here run as root, not as the service's entropy-broker user: the key is
            # the caller's own, 0600, not root:entropy-broker 0640.
            i = argv.index("--owner")
            check(argv[i:i + 4] == ["--owner", "root", "--group", "entropy-broker"],
                  "the key is minted root:entropy-broker, for the service to read")
            argv = [prog("eb-keygen"), *argv[1:i], *argv[i + 4:]]
            run([*argv, "--conf-dir", a.dropins, f"{keys}/{g}.key"], check=True)
            shutil.copy(os.path.join(a.dropins, f"user-{g}.conf"), b.dropins)
        for e in edges.values():
            e.start()

        ha = HAProxy(ns["lb"], docs["haproxy.cfg"], os.path.join(tmp))
        dnsconf = os.path.join(tmp, "dnsmasq.conf")
        with open(dnsconf, "w") as f:
            f.write(docs["dnsmasq.conf"])
        dns = subprocess.Popen(ns["lb"].cmd([dnsmasq, "--keep-in-foreground", "--log-facility=-",
                                             f"--conf-file={dnsconf}", "--pid-file="]),
                               stdout=subprocess.DEVNULL,
                               stderr=open(os.path.join(tmp, "dnsmasq.log"), "wb"))

        # HAProxy's health checks are the edges' first connections: socket activation starts
        # them, and they fill from the site.
        for name in edges:
            wait_for(f"HAProxy sees {name} up", lambda: ha.state(name) == "UP", 60,
                     detail=ha.read_log)
        for e in edges.values():
            wait_for(f"{e.name} fills from the site to its low water",
                     lambda: e.status()["pool_bits"] >= 3 * 1048576 // 4, 60,
                     detail=lambda: e.read_log()[-1500:])
        check(all(e.wait_log("Drawing from upstream tcp://10.81.", 5) for e in edges.values()),
              "each edge says it draws from the site")

        # The storm, with edge-a killed once it has served a fifth of it.
        before = {n: e.status()["bits_out"] for n, e in edges.items()}
        t0 = time.monotonic()
        st = storm(ns["guests"], users_file, SEEDS, CONCURRENCY, tmp, "storm", wait=False)

        def share():
            out = a.status()["bits_out"]
            return (a.broker_pid(), out) if out - before["edge-a"] >= KILL_AFTER * SEED_BITS \
                else None
        killed_pid, a_out_at_kill = wait_for("edge-a to serve its share of the storm", share,
                                             120, interval=0.05)
        os.kill(killed_pid, signal.SIGKILL)
        t_kill = time.monotonic() - t0
        b_out_at_kill = b.status()["bits_out"]
        a.proc.wait(10)
        a.logf.close()
        print(f"# edge-a (pid {killed_pid}) killed with SIGKILL {t_kill:.2f} s into the storm, "
              f"after serving {(a_out_at_kill - before['edge-a']) // SEED_BITS} seeds")
        down = wait_for("HAProxy's health check to take edge-a out",
                        lambda: ha.state("edge-a").startswith("DOWN"), 30, interval=0.05)
        t_down = time.monotonic() - t0 - t_kill
        line, fig = finish_storm(st)
        t_storm = time.monotonic() - t0
        print(f"# storm: {line}")
        stats = ha.servers()
        redispatched = sum(int(r["wredis"] or 0) for r in stats.values())
        retried = sum(int(r["wretr"] or 0) for r in stats.values())
        print(f"# HAProxy took edge-a out {t_down:.2f} s after the kill; it redispatched "
              f"{redispatched} connections and retried {retried}; the guests tried "
              f"{fig['retries']} seeds again")
        # What HAProxy operators alert on: sessions it counts as aborted by the client.
        abrt = {n: (int(r["cli_abrt"] or 0), int(r["stot"] or 0)) for n, r in stats.items()}
        print("# HAProxy cli_abrt for the seed sessions: " + ", ".join(
            f"{n} {x} of {t} ({100 * x // max(t, 1)}%)" for n, (x, t) in sorted(abrt.items())))
        check(fig["seeds"] == SEEDS and fig["failed"] == 0,
              f"every one of the {SEEDS} seeds was delivered ({fig['seeds']}, "
              f"{fig['failed']} given up) in {t_storm:.1f} s")
        check(len(fig["seed_bytes"]) == SEEDS and len(set(fig["seed_bytes"])) == SEEDS,
              f"all {SEEDS} seeds differ ({len(set(fig['seed_bytes']))} distinct)")
        check(fig["retries"] + redispatched + retried > 0,
              "the kill cost some connections a failover")
        b_after = b.status()["bits_out"]
        served_a = (a_out_at_kill - before["edge-a"]) // SEED_BITS
        served_b_after = (b_after - b_out_at_kill) // SEED_BITS
        served_b_before = (b_out_at_kill - before["edge-b"]) // SEED_BITS
        print(f"# edge-a served {served_a}+ seeds before the kill, edge-b {served_b_before} "
              f"before it and {served_b_after} after it")
        # edge-a may have answered more between the last reading and the kill: at most the
        # seeds in flight then, and those answered in the moment the readings take.
        check(served_b_after > 0 and
              served_b_after >= SEEDS - served_a - served_b_before - 2 * CONCURRENCY,
              f"the survivor served the rest: edge-b {served_b_after} seeds after the kill")

        site_a_before_restart = settled(lambda: site.users()["edge-a"]["bits_out"],
                                        "the site's count for the killed edge-a")

        # The killed edge comes back as systemd would bring it back: its socket made again,
        # HAProxy's health check its first connection.
        a.start()
        wait_for("HAProxy's health check to see edge-a up again",
                 lambda: ha.state("edge-a") == "UP", 60, detail=ha.read_log)
        wait_for("the new edge-a fills from the site",
                 lambda: a.status()["pool_bits"] >= 3 * 1048576 // 4, 60)
        a_new0 = a.status()["bits_out"]
        line2, fig2 = storm(ns["guests"], users_file, 400, 16, tmp, "rejoin")
        print(f"# after the restart: {line2}")
        a_new = a.status()["bits_out"] - a_new0
        check(fig2["seeds"] == 400 and fig2["failed"] == 0 and a_new > 0,
              f"the restarted edge-a serves again: {a_new // SEED_BITS} of 400 seeds")
        # One guest revoked alone while the others draw: its drop-in removed on both edges and
        # both reloaded, in the middle of a storm of the other guests.
        drawing = storm(ns["guests"], kept_file, 600, 16, tmp, "revoke", wait=False)
        for e in edges.values():
            os.unlink(os.path.join(e.dropins, f"user-{REVOKED}.conf"))
            e.proc.send_signal(signal.SIGHUP)
        for e in edges.values():
            wait_for(f"{e.name} reloads without {REVOKED}",
                     lambda: f"users removed: {REVOKED}" in
                     (e.status().get("last_reload_text") or ""), 30)
        p = ns["guests"].run([prog("eb-sink-file"), "-b", "tcp://10.83.0.1:55225", "-u",
                              REVOKED, "-k", f"{keys}/{REVOKED}.key", "--bytes", "32",
                              "--timeout", "10"], timeout=60)
        err = p.stderr.decode(errors="replace").strip()
        line5, fig5 = finish_storm(drawing)
        print(f"# {REVOKED} revoked on both edges during a storm of the others: {line5}; "
              f"its own draw: {err[err.find('failed'):][:160]}")
        check(p.returncode != 0 and "refused" in err and not p.stdout,
              f"{REVOKED} is refused once its drop-in is gone: {err[-300:]}")
        check(fig5["seeds"] == 600 and fig5["failed"] == 0,
              f"the other guests drew on through the reloads: {line5}")
        # The edges' per-address limits see the guests, not HAProxy: a storm from one guest
        # address, more handshakes at once than max-handshakes-per-address, is refused in part
        # while another guest beside it, a few at a time, is not refused once.
        logs0 = {n: len(e.read_log()) for n, e in edges.items()}
        noisy = storm(ns["guests"], kept_file, 600, 48, tmp, "noisy", binds=[GUEST_ADDRS[0]],
                      retries=1000, wait=False)
        line4, fig4 = storm(ns["guests"], kept_file, 200, 4, tmp, "quiet",
                            binds=[GUEST_ADDRS[1]], retries=0)
        line3, fig3 = finish_storm(noisy)
        print(f"# one guest, 48 at a time: {line3}")
        print(f"# another, 4 at a time: {line4}")
        refused, vias = {}, {}
        for n, e in edges.items():
            for m in re.finditer(r"Refusing \S+ ([0-9.]+):\d+(?: via ([0-9.]+))?: "
                                 r"max-handshakes-per-address reached", e.read_log()[logs0[n]:]):
                refused.setdefault(m.group(1), set()).add(m.group(2))
                vias.setdefault(n, set()).add(m.group(2))
        print(f"# refused for max-handshakes-per-address: {refused}, via {vias}")
        check(fig3["seeds"] == 600 and fig3["retries"] > 0 and
              set(refused) == {GUEST_ADDRS[0]},
              f"the edges limit the busy guest {GUEST_ADDRS[0]} by its own address, named in "
              f"their refusals ({refused}), and it is served in the end")
        # Each refusal names HAProxy after the guest: the address it reaches that edge from.
        check(vias and all(v == {HAPROXY_FROM[n]} for n, v in vias.items()),
              f"every refusal says which balancer it came through: via {vias}, HAProxy being "
              f"{HAPROXY_FROM}")
        check(fig4["seeds"] == 200 and fig4["failed"] == 0 and fig4["retries"] == 0,
              f"the guest beside it, {GUEST_ADDRS[1]}, is never refused: {line4}")

        # The guests find their brokers through dnsmasq's SRV records: the balancer first, and
        # with the balancer gone, the edges themselves, further down the list.
        def srv_seed():
            p = ns["guests"].run([prog("eb-sink-file"), "-b", "srv:fleet.example", *guest0,
                                  "--bytes", "32", "--timeout", "60"],
                                 timeout=120)
            return p.stdout, p.stderr.decode(errors="replace").strip()[-300:], p.returncode

        def front():
            text = ha.command("show stat").lstrip("# ")
            return int(next(r["stot"] for r in csv.DictReader(io.StringIO(text))
                            if r["pxname"] == "entropy" and r["svname"] == "FRONTEND"))
        n0 = front()
        out, err, rc = srv_seed()
        check(rc == 0 and len(out) == 32 and front() > n0,
              f"a guest with -b srv:fleet.example gets a seed through HAProxy ({err})")
        ha.stop()
        out2, err, rc = srv_seed()
        check(rc == 0 and len(out2) == 32,
              f"with HAProxy stopped, it gets one from an edge, next in the SRV records ({err})")
        # The balancer back: its checks and the edges' agents see both edges up again.
        ha = HAProxy(ns["lb"], docs["haproxy.cfg"], os.path.join(tmp))
        for name in edges:
            wait_for(f"HAProxy sees {name} up again", lambda: ha.state(name) == "UP", 60,
                     detail=ha.read_log)

        every = fig["seed_bytes"] + fig2["seed_bytes"] + fig3["seed_bytes"] + fig4["seed_bytes"]
        every += [out, out2]
        check(len(set(every)) == len(every), f"all {len(every)} seeds of the storms differ")

        # The accounting across the tree, from each broker's own counters, once every DATA
        # between them has landed.
        def still(status):
            return {k: v for k, v in status.items() if k != "uptime_s"}

        def totals():
            st, us = site.status(), site.users()
            return (still(st), us["edge-a"]["bits_out"], us["edge-b"]["bits_out"],
                    still(a.status()), still(b.status()))
        st, out_a, out_b, sa, sb = settled(totals, "the tree's counters")
        print(f"# site: credited {st['bits_in']}, handed out {st['bits_out']} (to edge-a "
              f"{out_a}, edge-b {out_b}), pool {st['pool_bits']}")
        for name, e, drawn in (("edge-a (restarted)", sa, out_a - site_a_before_restart),
                               ("edge-b", sb, out_b)):
            print(f"# {name}: drew {drawn} from the site, credited {e['bits_in']}, served "
                  f"{e['bits_out']} ({e['bits_out'] // SEED_BITS} seeds), pool {e['pool_bits']}")
        check(st["bits_out"] == out_a + out_b,
              f"the site handed out to its edges alone: {st['bits_out']} = {out_a} + {out_b}")

        def conserved(name, credited, out_level, pool):
            # Every block of 512 full-entropy bits, spent or held, stands for 576 credited
            # (docs/pool.md); at each cut up to 8 bits beyond 576 are dropped with the byte
            # that carried them, and credit short of a block waits outside the level.
            blocks = (out_level + pool) // BLOCK_LEVEL
            rest = credited - blocks * BLOCK_CREDIT
            check(0 <= rest < BLOCK_CREDIT + 8 * blocks,
                  f"{name}: credited {credited} = ({out_level} spent + {pool} in the pool) as "
                  f"{blocks} blocks of {BLOCK_CREDIT} + {rest} dropped at cuts or short of a "
                  f"block; never more out than in")
        conserved("the site", st["bits_in"], st["bits_out"], st["pool_bits"])
        # A seed of 256 bits spends a whole block.
        conserved("edge-b", sb["bits_in"], sb["bits_out"] // SEED_BITS * BLOCK_LEVEL,
                  sb["pool_bits"])
        conserved("edge-a (restarted)", sa["bits_in"], sa["bits_out"] // SEED_BITS * BLOCK_LEVEL,
                  sa["pool_bits"])
        for name, e, drawn in (("edge-b", b, out_b),
                               ("the restarted edge-a", a, out_a - site_a_before_restart)):
            up = [s for s in e.ctl("sources")["sources"] if s["upstream"]]
            check(len(up) == 1, f"{name} lists its upstream among its sources")
            got, credited = 8 * up[0]["bytes_in"], up[0]["bits_credited"]
            withheld = got - credited
            # An alarm on random bytes is rare, not impossible: the tests then credit nothing
            # until enough clean bytes have passed, and say so in one line.
            alarms = len(re.findall(r"its bytes failed the \S+ health test", e.read_log()))
            print(f"# {name}: received {got} bits from the site, credited {credited}; its health "
                  f"tests withheld {withheld} (the start-up test, {STARTUP_BITS}, and "
                  f"{alarms} alarm line(s) in its log)")
            check(got == drawn, f"{name} received every bit the site handed it: {got} = {drawn}")
            check(e.status()["bits_in"] == credited and
                  (withheld == STARTUP_BITS if alarms == 0 else withheld > STARTUP_BITS),
                  f"{name} credited what it drew, {drawn}, less what its health tests withheld: "
                  f"{credited}")
        credited = sa["bits_in"] + sb["bits_in"]
        check(credited + site_a_before_restart <= st["bits_out"],
              f"no bit credited twice: the edges credited {credited} of the {st['bits_out']} the "
              f"site handed out; the killed edge-a's draws ({site_a_before_restart}) died with "
              f"it, credited nowhere else")

        # One Prometheus scraping the three brokers' eb-metrics, with docs/fleet.md's rules. From
        # here on the test reads Prometheus (the site killed, the drain): the only part that
        # needs it, skipped without it once everything above has passed.
        need("prometheus")
        need("promtool")
        targets = []
        for br, tier in ((site, "site"), (a, "edge"), (b, "edge")):
            p, port = metrics_exporter(br, tmp)
            exporters.append(p)
            targets.append((port, br.name, tier))
        rules = os.path.join(tmp, "fleet-rules.yml")
        with open(rules, "w") as f:
            f.write(docs["fleet-rules.yml"])
        p = run(["promtool", "check", "rules", rules])
        check(p.returncode == 0, f"promtool check rules accepts docs/fleet.md's rules: "
              f"{(p.stdout + p.stderr).decode(errors='replace').strip()[-300:]}")
        # docs/fleet.md's scrape configuration, its targets the exporters here, every second.
        alerts = os.path.join(tmp, "entropy-broker-alerts.yml")
        shutil.copy(os.path.join(SRC, "etc", "entropy-broker-alerts.yml"), alerts)
        text = (docs["prometheus.yml"].replace("/etc/prometheus/fleet-rules.yml", rules)
                .replace("/etc/prometheus/entropy-broker-alerts.yml", alerts)
                .replace("15s", "1s"))
        for port, name, tier in targets:
            addr = {"site": "10.81.1.1", "edge-a": "10.82.1.2", "edge-b": "10.82.2.2"}[name]
            check(f"'{addr}:9226'" in text, f"prometheus.yml scrapes {name} at {addr}")
            text = text.replace(f"'{addr}:9226'", f"'127.0.0.1:{port}'")
        conf = os.path.join(tmp, "prometheus.yml")
        with open(conf, "w") as f:
            f.write(text)
        p = run(["promtool", "check", "config", conf])
        check(p.returncode == 0, f"promtool check config accepts docs/fleet.md's prometheus.yml: "
              f"{(p.stdout + p.stderr).decode(errors='replace').strip()[-300:]}")
        phold, pport = reserve_port()
        holds.append(phold)
        prom = prometheus_start(conf, tmp, pport)
        wait_for("prometheus to scrape the three brokers",
                 lambda: len([v for _, v in prometheus_query(pport, "eb_broker_up")
                              if v == 1]) == 3, 60)
        levels = settled(lambda: sum(br.status()["pool_bits"] for br in (site, a, b)),
                         "the three pools")
        total = wait_for("the recording rule fleet:eb_pool_bytes:sum",
                         lambda: [v for _, v in prometheus_query(pport, "fleet:eb_pool_bytes:sum")
                                  if v == levels / 8], 60,
                         detail=lambda: f"{prometheus_query(pport, 'fleet:eb_pool_bytes:sum')}")
        print(f"# prometheus: fleet:eb_pool_bytes:sum {total[0]:.0f}")
        check(total[0] == levels / 8,
              f"Prometheus' fleet pool is the three brokers' levels: {levels} bits / 8")
        waiting = prometheus_query(pport, "fleet:eb_sinks_waiting:edges")
        check(waiting and waiting[0][1] == 0, f"no guest waits at an edge: {waiting}")

        # The site dies: the edges serve what they hold, then their guests wait, and
        # Prometheus shows both the waiting guests and the edges' failing upstream.
        os.kill(site.broker_pid(), signal.SIGKILL)
        site.proc.wait(10)
        t_site = time.monotonic()
        hungry = subprocess.Popen(ns["guests"].cmd([
            prog("eb-sink-file"), "-b", "srv:fleet.example", *guest0,
            "--bytes", str(4 * 1048576 // 8), "--timeout", "120"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            # The edge the hungry guest draws through empties, and HAProxy drains it through
            # its agent: timed from the first reading of the empty pool.
            def empty_edge():
                for n, e in edges.items():
                    if e.status()["pool_bits"] < BLOCK_LEVEL:
                        return n
                return None
            name = wait_for("an edge emptied by the hungry guest", empty_edge, 90, interval=0.02)
            other = "edge-b" if name == "edge-a" else "edge-a"
            t_empty = time.monotonic()
            wait_for(f"HAProxy drains {name} through its agent",
                     lambda: ha.state(name).startswith("DRAIN"), DRAIN_BOUND_S, interval=0.02,
                     detail=lambda: str(ha.servers()[name]))
            t_drained = time.monotonic() - t_empty
            check(ha.state(other) == "UP", f"{other}, which holds entropy, stays UP")
            wait_for("Prometheus to see a guest waiting at an edge",
                     lambda: [v for _, v in prometheus_query(pport, "fleet:eb_sinks_waiting:edges")
                              if v >= 1], 90)
            failing = wait_for("Prometheus to see an edge's upstream failing",
                               lambda: [v for _, v in
                                        prometheus_query(pport, "fleet:eb_upstream_failing:edges")
                                        if v >= 1], 90)
            print(f"# the site killed: {time.monotonic() - t_site:.1f} s later Prometheus shows "
                  f"a guest waiting and {failing[0]:.0f} edge(s) without their upstream")
            # New guests go to the other edge, which still holds entropy.
            out0 = {n: e.status()["bits_out"] for n, e in edges.items()}
            line6, fig6 = storm(ns["guests"], kept_file, 200, 8, tmp, "drained", retries=0)
            got = {n: (e.status()["bits_out"] - out0[n]) // SEED_BITS for n, e in edges.items()}
            print(f"# {name} emptied by a guest {t_empty - t_site:.1f} s after the site was "
                  f"killed: HAProxy drained it {t_drained:.2f} s after its pool read empty "
                  f"(bound {DRAIN_BOUND_S} s); 200 new seeds: {name} {got[name]}, {other} "
                  f"{got[other]}; {line6}")
            check(fig6["seeds"] == 200 and fig6["failed"] == 0 and got[name] == 0 and
                  got[other] >= 200,
                  f"new guests go to {other}, none to the drained {name}: {got}")

            # A long-lived guest that lists both edges, the emptied one first, moves to the other
            # after 10 to 20 s of EMPTY (docs/fleet.md, eb-sink-file(1): within 25 s).
            fifo = os.path.join(tmp, "long-lived.fifo")
            mover = subprocess.Popen(ns["guests"].cmd([
                prog("eb-sink-file"), "-b", f"tcp://{name}.fleet.example", "-b",
                f"tcp://{other}.fleet.example", *guest0, "--fifo", fifo]),
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                wait_for("the long-lived guest's FIFO", lambda: os.path.exists(fifo), 20)
                got1 = []

                def read_one():
                    # The first byte comes only from the other edge, once the guest moved.
                    with open(fifo, "rb") as f:
                        got1.append(f.read(1))
                t_ask = time.monotonic()
                reader = threading.Thread(target=read_one, daemon=True)
                reader.start()
                reader.join(2 * LEAVE_BOUND_S)
                t_moved = time.monotonic() - t_ask
                first = got1 and got1[0]
            finally:
                mover.kill()
                _, err = mover.communicate(timeout=30)
            err = err.decode(errors="replace")
            print(f"# a long-lived guest listing the emptied {name} first moved to {other} "
                  f"{t_moved:.1f} s after it asked (bound {LEAVE_BOUND_S} s)")
            check(first and "only EMPTY" in err and t_moved <= 2 * LEAVE_BOUND_S,
                  f"the long-lived guest left the empty {name} for {other} within "
                  f"{2 * LEAVE_BOUND_S} s: {t_moved:.1f} s ({err.strip()[-200:]})")
        finally:
            hungry.kill()
            hungry.wait()
    finally:
        for p in exporters:
            stop_process(p)
            p.hold.close()
        for h in holds:
            h.close()
        stop_process(prom)
        stop_process(dns)
        if ha:
            ha.stop()
        for br in [site, *(edges or {}).values()]:
            if br:
                try:
                    br.cleanup()
                except Failure as e:
                    print(f"not ok - {e}")
        netnslib.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


main(test)
