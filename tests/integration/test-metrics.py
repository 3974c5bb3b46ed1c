#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-metrics behind systemd-socket-activate --accept, as eb-metrics.socket runs it: one answer
per connection, refusals for what is not GET /metrics, and Debian's Prometheus scraping it every
second sees the pool level rise while a source donates, with the figures eb-brokerctl shows."""
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import time

from eblib import (MSG, ROLE_ADMIN, SKIP, Broker, Failure, Raw, check, donate, main, need, prog,
                   prometheus_query,
                   prometheus_start, reserve_port, run, stop_process, tcp_listening, wait_for,
                   write_key)


def http(port, request, timeout=20):
    """Sends raw bytes, returns (status, headers text, body) of the one response."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        if request:
            s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else None
    return status, head.decode(errors="replace"), body.decode(errors="replace")


def metrics(text):
    """Samples of the text format: {'name{labels}': value}."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out




def test():
    need("systemd-socket-activate")
    if shutil.which("prometheus") is None:
        print("SKIP: needs Debian's prometheus (scripts/install-deps --test)")
        raise SystemExit(SKIP)
    b = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                "solo": {"role": "sink", "max-sessions": 1},
                "admin": {"role": "admin"},
                "scraper": {"role": "admin", "unix-uid": os.getuid(), "key": False}}).start()
    (mhold, mport), (phold, pport) = reserve_port(), reserve_port()
    exporter = prom = None
    try:
        # As eb-metrics.socket: Accept=yes, the connection is fd 3 of a process of its own.
        env = dict(os.environ)
        cmd = ["systemd-socket-activate", "--accept", "-l", f"127.0.0.1:{mport}"]
        for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            if var in env:
                cmd += ["-E", f"{var}={env[var]}"]
        cmd += [prog("eb-metrics"), "-b", b.unix, "--timeout", "2"]
        exporter = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                    stderr=open(os.path.join(b.tmp, "metrics.log"), "wb"))
        wait_for("eb-metrics' socket", lambda: tcp_listening(mport), 10)

        status, head, body = http(mport, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        m = metrics(body)
        check(status == 200 and "text/plain; version=0.0.4" in head and m.get("eb_broker_up") == 1
              and m.get("eb_pool_capacity_bytes") == 1048576 / 8
              and 'eb_user_sessions{user="scraper"}' in m
              and m.get(f'eb_build_info{{version="{os.environ.get("EB_VERSION", "")}"}}') == 1,
              f"GET /metrics: the broker's figures and its build ({len(m)} samples)")
        check("# TYPE eb_pool_carried_bytes gauge\n" in body
              and "# TYPE eb_pool_dropped_bytes_total counter\n" in body
              and m.get("eb_pool_carried_bytes") == 0 and m.get("eb_pool_dropped_bytes_total") == 0,
              "STATUS version 1's carried and dropped credit: a gauge and a counter, 0 at first")
        # Prometheus' own parser and linter, on an answer with every family: no lint at all.
        p = run(["promtool", "check", "metrics"], input=body.encode())
        lint = (p.stdout + p.stderr).decode().strip()
        check(p.returncode == 0 and not lint,
              f"promtool check metrics: exit {p.returncode}, {lint or 'no lint'}")
        # The sessions against their limits, and refusals counted by reason: a wrong key, an
        # unknown user and a PROXY header from an address not in proxy-protocol-from.
        check(m.get('eb_sessions_max{transport="network"}') == 1024
              and m.get('eb_sessions_max{transport="local"}') == 256
              and m.get('eb_sessions{transport="local"}') == 1 and m.get("eb_handshakes_max") == 64
              and m.get('eb_user_max_sessions{user="alice"}') == 128,
              "sessions against their limits: eb_sessions, eb_sessions_max, eb_handshakes_max, "
              "eb_user_max_sessions")
        check(all(v == 0 for k, v in m.items() if k.startswith(("eb_refusals_total",
                                                                "eb_authentication_failures")))
              and len([k for k in m if k.startswith("eb_refusals_total{")]) == 5,
              "no refusal counted at first, five reasons")
        wrong = os.path.join(b.tmp, "wrong.key")
        write_key(wrong)
        p = run([prog("eb-sink-file"), "-b", b.tcp, "-u", "alice", "-k", wrong, "--bytes", "8"])
        check(p.returncode != 0, "a client with the wrong key is refused")
        p = run([prog("eb-sink-file"), "-b", b.tcp, "-u", "nobody", "-k", wrong, "--bytes", "8"])
        check(p.returncode != 0, "a client with an unknown user is refused")
        with socket.create_connection(("127.0.0.1", b.port), timeout=20) as s:
            s.sendall(b"PROXY TCP4 192.0.2.1 192.0.2.2 40000 55225\r\n")
            s.recv(1)
        # A user at its max-sessions (1): its session waits on the empty pool, a second is
        # refused. An admin that sends a PUT is refused the request.
        first = subprocess.Popen([prog("eb-sink-file"), "-b", b.tcp, "-u", "solo", "-k",
                                  b.keys["solo"], "--bytes", "32", "--timeout", "60"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for("solo's first session", lambda: 'eb_user_sessions{user="solo"} 1' in
                     http(mport, b"GET /metrics HTTP/1.1\r\n\r\n")[2], 20)
            p = run([prog("eb-sink-file"), "-b", b.tcp, "-u", "solo", "-k", b.keys["solo"],
                     "--bytes", "32", "--timeout", "3"])
            check(p.returncode != 0, "solo's second session is refused at its max-sessions")
        finally:
            first.kill()
            first.wait()
        r = Raw(b.sock)
        check(r.hello(ROLE_ADMIN)[0] == MSG["WELCOME"], "a raw admin session")
        r.send(MSG["PUT"], struct.pack(">II", 8, 1) + b"x")
        check(r.recv()[0] == MSG["ERROR"], "its PUT is refused")
        r.close()
        m = wait_for("the refusals counted", lambda: (lambda x: x if x.get(
            'eb_proxy_header_errors_total{reason="not-allowed"}') == 1 else None)(
            metrics(http(mport, b"GET /metrics HTTP/1.1\r\n\r\n")[2])), 20)
        refused = {k: v for k, v in m.items() if k.startswith(("eb_refusals_total",
                                                               "eb_authentication_failures"))}
        print(f"# refusals: {refused}")
        check(m.get('eb_authentication_failures_total{reason="wrong-key"}') == 1
              and m.get('eb_authentication_failures_total{reason="unknown-user"}') == 1
              and m.get('eb_refusals_total{reason="authentication"}') == 2
              and m.get('eb_refusals_total{reason="proxy-header"}') == 1
              # The refused client retries within its --timeout: one refusal or more.
              and m.get('eb_refusals_total{reason="limit"}', 0) >= 1
              and m.get('eb_limit_hits_total{limit="user-max-sessions"}')
              == m.get('eb_refusals_total{reason="limit"}')
              and m.get('eb_refusals_total{reason="request"}') == 1,
              "a wrong key, an unknown user, a PROXY header, a user's max-sessions and a "
              "forbidden request counted by reason")
        # OpenMetrics for a client that asks for it, as Prometheus does first.
        status, head, om = http(mport, b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: "
                                b"application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n\r\n")
        check(status == 200 and "application/openmetrics-text; version=1.0.0" in head
              and om.endswith("\n# EOF\n") and "\n# TYPE eb_entropy_in_bytes counter\n" in om
              and "\neb_entropy_in_bytes_total " in om and "# TYPE eb_pool_bytes gauge" in om
              and {k: v for k, v in metrics(om).items() if k != "eb_uptime_seconds"} ==
              {k: v for k, v in m.items() if k != "eb_uptime_seconds"},
              "OpenMetrics when asked: counters' families without _total, # EOF, the same samples")
        status, head, body = http(mport, b"HEAD /metrics HTTP/1.0\r\n\r\n")
        check(status == 200 and body == "" and "Content-Length: " in head, "HEAD /metrics: the head alone")
        check(http(mport, b"GET /nothing HTTP/1.1\r\n\r\n")[0] == 404, "GET /nothing is 404")
        # The status page and its data (test-status-page.py looks at the page in browsers).
        status, head, page = http(mport, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        check(status == 200 and "Content-Type: text/html; charset=utf-8" in head
              and "Content-Security-Policy: default-src 'none';" in head
              and page.startswith("<!DOCTYPE html>") and "<h2>Sources</h2>" in page,
              "GET / is the status page, under a policy that loads and runs nothing")
        status, head, body = http(mport, b"GET /history.json HTTP/1.1\r\nHost: x\r\n\r\n")
        hist = json.loads(body) if status == 200 else {}
        check("Content-Type: application/json" in head and hist.get("broker_up") is True
              and hist["broker"]["capacity_bits"] == 1048576,
              "GET /history.json is the page's data as JSON")
        status, head, _ = http(mport, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        check(status == 405 and "Allow: GET, HEAD" in head, "POST is 405 with Allow")
        check(http(mport, b"nonsense\r\n\r\n")[0] == 400, "a malformed request line is 400")
        check(http(mport, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n")[0] == 431,
              "a request over 8 KiB is 431")
        t = time.time()
        status, _, _ = http(mport, b"GET /metrics HTTP/1.1\r\n")
        check(status == 408 and time.time() - t < 15,
              f"an unfinished request gets 408 after --timeout ({time.time() - t:.1f} s)")

        # A scrape is routine: neither the broker nor eb-metrics logs a line for each.
        with open(os.path.join(b.tmp, "metrics.log"), "rb") as f:
            mlog0 = len(f.read())
        blog0 = len(b.read_log())
        for _ in range(5):
            check(http(mport, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200,
                  "a scrape is answered")
        new = [l for l in b.read_log()[blog0:].splitlines() if l.strip()]
        with open(os.path.join(b.tmp, "metrics.log"), "rb") as f:
            # systemd-socket-activate's own lines ("Connection from ...") are the activator's.
            mnew = [l for l in f.read()[mlog0:].decode(errors="replace").splitlines()
                    if l.startswith("eb-metrics")]
        check(not new and not mnew, f"5 scrapes log no line (broker: {new[:3]}, eb-metrics: "
              f"{mnew[:3]})")

        # Prometheus, scraping every second.
        conf = os.path.join(b.tmp, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: eb\n    scrape_interval: 1s\n"
                    "    scrape_timeout: 1s\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{mport}']\n")
        prom = prometheus_start(conf, b.tmp, pport)
        up = wait_for("a scrape", lambda: prometheus_query(pport, "eb_broker_up"), 60)
        check(up[0][0].get("job") == "eb" and up[0][1] == 1, f"prometheus scraped eb-metrics: {up}")
        before = prometheus_query(pport, "eb_pool_bytes")[0][1]
        check(before == 0, f"prometheus sees the empty pool: eb_pool_bytes {before}")

        data = os.path.join(b.tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(65536))
        # At 7 bits a byte, which does not divide a block's 576: blocks are cut inside bytes.
        p = donate(b, "alice", data, credit=7)
        check(p.returncode == 0, "a source donates 64 KiB")
        st = b.status()
        level = st["pool_bits"]
        m = metrics(http(mport, b"GET /metrics HTTP/1.1\r\n\r\n")[2])
        check(m.get("eb_pool_carried_bytes") == st["carried_bits"] / 8
              and m.get("eb_pool_dropped_bytes_total") == st["dropped_bits"] / 8
              and st["dropped_bits"] > 0,
              f"eb_pool_carried_bytes {m.get('eb_pool_carried_bytes')} and "
              f"eb_pool_dropped_bytes_total {m.get('eb_pool_dropped_bytes_total')} are "
              f"eb-brokerctl's {st['carried_bits']} and {st['dropped_bits']} bits / 8")
        risen = wait_for("prometheus to see the pool rise",
                         lambda: [v for _, v in prometheus_query(pport, "eb_pool_bytes") if v > before], 60)
        check(risen[0] == level / 8, f"prometheus: eb_pool_bytes rose from {before:.0f} to {risen[0]:.0f}, "
              f"as eb-brokerctl says ({level})")
        rng = prometheus_query(pport, "max_over_time(eb_pool_bytes[5m]) - min_over_time(eb_pool_bytes[5m])")
        check(rng and rng[0][1] == level / 8, f"the series holds both levels: range {rng}")
        users = {u["name"]: u for u in json.loads(run([prog("eb-brokerctl"), "-b", b.tcp, "-u", "admin", "-k",
                                                        b.keys["admin"], "users", "--json"],
                                                       check=True).stdout)["users"]}
        got = wait_for("alice's bits in prometheus",
                       lambda: prometheus_query(pport, 'eb_user_entropy_in_bytes_total{user="alice"} > 0'), 30)
        check(got[0][1] == users["alice"]["bits_in"] / 8,
              f"eb_user_entropy_in_bytes_total{{user=\"alice\"}} {got[0][1]} is eb-brokerctl's "
              f"{users['alice']['bits_in']} bits / 8")
        health = prometheus_query(pport, "eb_sources_by_health")
        check(len(health) == 5 and {s[0]["health"] for s in health} ==
              {"new", "ok", "no-claim", "stuck", "silent"}, "one series per health state")

        # The broker gone, the scrape still answers: eb_broker_up 0.
        b.stop()
        status, _, body = http(mport, b"GET /metrics HTTP/1.1\r\n\r\n")
        check(status == 200 and metrics(body) == {"eb_broker_up": 0.0},
              f"without a broker, eb_broker_up 0 alone: {body!r}")
        status, _, page = http(mport, b"GET / HTTP/1.1\r\n\r\n")
        check(status == 200 and "The broker did not answer:" in page,
              "without a broker, the page says so")
        status, _, body = http(mport, b"GET /history.json HTTP/1.1\r\n\r\n")
        check(status == 200 and json.loads(body)["broker_up"] is False,
              f"without a broker, history.json says broker_up false: {body!r}")
    finally:
        stop_process(prom)
        stop_process(exporter)
        mhold.close()
        phold.close()
        log = os.path.join(b.tmp, "metrics.log")
        report = None
        if os.path.exists(log):
            with open(log, errors="replace") as f:
                report = re.search(r"((ERROR|WARNING): \w+Sanitizer|runtime error:).*", f.read())
        b.cleanup()
        if report:
            raise Failure(f"eb-metrics' log has a sanitizer report: {report.group(0)}")


main(test)
