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
import subprocess
import time

from eblib import (SKIP, Broker, Failure, check, donate, main, need, prog, prometheus_query,
                   prometheus_start, reserve_port, run, stop_process, tcp_listening, wait_for)


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
              and m.get("eb_pool_capacity_bits") == 1048576 and 'eb_user_sessions{user="scraper"}' in m,
              f"GET /metrics: the broker's figures ({len(m)} samples)")
        # Prometheus' own parser and linter: the format is right, and the one lint it has is the
        # unit, bits where it would like bytes, which is what entropy is counted in.
        p = run(["promtool", "check", "metrics"], input=body.encode())
        lint = [l for l in p.stderr.decode().splitlines() if l.strip()]
        check(p.returncode in (0, 3) and lint and
              all(re.fullmatch(r'\s*eb_\w+ use base unit "bytes" instead of "bits"', l) for l in lint),
              f"promtool check metrics parses it; its only lint is the unit (exit {p.returncode}: {lint})")
        # OpenMetrics for a client that asks for it, as Prometheus does first.
        status, head, om = http(mport, b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: "
                                b"application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n\r\n")
        check(status == 200 and "application/openmetrics-text; version=1.0.0" in head
              and om.endswith("\n# EOF\n") and "\n# TYPE eb_bits_in counter\n" in om
              and "\neb_bits_in_total " in om and "# TYPE eb_pool_bits gauge" in om
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
        before = prometheus_query(pport, "eb_pool_bits")[0][1]
        check(before == 0, f"prometheus sees the empty pool: eb_pool_bits {before}")

        data = os.path.join(b.tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(65536))
        p = donate(b, "alice", data)
        check(p.returncode == 0, "a source donates 64 KiB")
        level = b.status()["pool_bits"]
        risen = wait_for("prometheus to see the pool rise",
                         lambda: [v for _, v in prometheus_query(pport, "eb_pool_bits") if v > before], 60)
        check(risen[0] == level, f"prometheus: eb_pool_bits rose from {before:.0f} to {risen[0]:.0f}, "
              f"as eb-brokerctl says ({level})")
        rng = prometheus_query(pport, "max_over_time(eb_pool_bits[5m]) - min_over_time(eb_pool_bits[5m])")
        check(rng and rng[0][1] == level, f"the series holds both levels: range {rng}")
        users = {u["name"]: u for u in json.loads(run([prog("eb-brokerctl"), "-b", b.tcp, "-u", "admin", "-k",
                                                        b.keys["admin"], "users", "--json"],
                                                       check=True).stdout)["users"]}
        got = wait_for("alice's bits in prometheus",
                       lambda: prometheus_query(pport, 'eb_user_bits_in_total{user="alice"} > 0'), 30)
        check(got[0][1] == users["alice"]["bits_in"],
              f"eb_user_bits_in_total{{user=\"alice\"}} {got[0][1]:.0f} is eb-brokerctl's {users['alice']['bits_in']}")
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
