#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The broker logs to the journal with structured fields: run it with a journal socket of our
own (a private mount namespace with a tmpfs on /run, so no real journald is touched) and read
what sd_journal_sendv() sends: EB_POOL_BITS=, EB_POOL_CAPACITY_BITS=, MESSAGE_ID= from the
catalog, PRIORITY=."""
import os
import re

from eblib import Broker, Journal, check, donate, inner_run, main, need_root, rerun_unshared

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def catalog_ids():
    with open(os.path.join(SRC, "catalog", "entropy-broker.catalog")) as f:
        return set(re.findall(r"^-- ([0-9a-f]{32})$", f.read(), flags=re.M))


def inner():
    j = Journal()
    b = Broker({"alice": {"role": "source"}, "admin": {"role": "admin"}})
    b.log_target = "journal"
    b.start()
    try:
        data = os.path.join(b.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(64 * 1024))
        b.status()
        check(donate(b, "alice", data).returncode == 0, "alice donates")
        st = b.status()
        entries = j.wait("a pool-level entry after the donation",
                         lambda e: "Pool" in e.get("MESSAGE", "") and e.get("EB_POOL_BITS", "0") != "0")
        check(len(entries) > 0, f"the broker wrote {len(entries)} journal entries")
        ready = [e for e in entries if e.get("MESSAGE", "").startswith("Broker ready")]
        check(len(ready) == 1, "one 'Broker ready' entry")
        e = ready[0]
        check(e.get("MESSAGE_ID") in catalog_ids(), "it carries a MESSAGE_ID the catalog explains")
        check(e.get("EB_POOL_CAPACITY_BITS") == "1048576", "EB_POOL_CAPACITY_BITS= is the capacity")
        check(e.get("EB_POOL_BITS") == "0" and e.get("PRIORITY") == "6",
              "EB_POOL_BITS=0 at start, PRIORITY=6 (info)")
        pool = [e for e in entries if e.get("EB_POOL_BITS", "0") != "0"]
        check(len(pool) >= 1, "a pool-level entry follows the donation")
        check(int(pool[-1]["EB_POOL_BITS"]) == st["pool_bits"],
              f"with the level eb-brokerctl reports in EB_POOL_BITS= ({pool[-1]['EB_POOL_BITS']})")
        check(all(k in pool[-1] for k in ("EB_POOL_ZONE", "EB_SOURCES", "EB_SINKS", "EB_BITS_IN",
                                          "EB_BITS_OUT")),
              "and the zone, sources, sinks and totals fields")
        check(all("MESSAGE" in e and "PRIORITY" in e for e in entries),
              "every entry has MESSAGE= and PRIORITY=")
        log = b.read_log()
        check("Broker ready" not in log, "nothing went to stderr instead")
    finally:
        b.cleanup()


def test():
    if inner_run():
        return inner()
    need_root("for a private mount namespace")
    rerun_unshared(private_run=True, timeout=60)


main(test)
