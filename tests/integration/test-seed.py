#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""SIGTERM saves the pool to the seed file; a restart credits it once (credit-seed-file=yes),
and a crash after that start cannot credit it again. Without credit-seed-file it is mixed in
but never credited."""
import os
import re
import signal

from eblib import Broker, check, donate, main


def loaded_bits(log):
    m = re.findall(r"Loaded the seed file .*?: (\d+) bits credited", log)
    return int(m[-1]) if m else None


def test():
    users = {"alice": {"role": "source"}, "admin": {"role": "admin"}}
    b = Broker(users, broker_extra="credit-seed-file = yes").start()
    try:
        data = os.path.join(b.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(64 * 1024))
        check(donate(b, "alice", data).returncode == 0, "alice donates")
        level = b.status()["pool_bits"]
        check(level > 0, f"the pool holds {level} bits")
        rc = b.stop(signal.SIGTERM)
        check(rc == 0, "SIGTERM stops the broker with exit 0")
        m = re.search(r"Saved (\d+) credited bits", b.read_log())
        check(m is not None and int(m.group(1)) == level,
              f"it saved the whole level to the seed file ({m.group(1) if m else None} bits)")
        check("credited again at the next start: credit-seed-file=yes" in b.read_log(),
              "and says the next start credits them")
        check(os.path.exists(b.seed) and (os.stat(b.seed).st_mode & 0o777) == 0o600,
              "the seed file exists with mode 0600")

        b.start()
        st = b.status()
        check(loaded_bits(b.read_log()) == level, "the restart credits the saved bits once")
        check(st["pool_bits"] == level, f"the pool is back at {level} bits")

        # A crash (no save) and a restart: the file was overwritten uncredited at load.
        b.stop(signal.SIGKILL)
        b.start()
        st = b.status()
        check(loaded_bits(b.read_log()) == 0, "after a crash the seed file credits nothing")
        check(st["pool_bits"] == 0, "and the pool starts empty")
        b.stop(signal.SIGTERM)
    finally:
        b.cleanup()

    # Without credit-seed-file the saved bits are mixed in but not credited.
    b = Broker(users).start()
    try:
        data = os.path.join(b.tmp, "noise")
        with open(data, "wb") as f:
            f.write(os.urandom(64 * 1024))
        check(donate(b, "alice", data).returncode == 0, "alice donates (second broker)")
        b.stop(signal.SIGTERM)
        check("mixed in but not credited at the next start: credit-seed-file=no" in b.read_log(),
              "the stop line says the saved bits will not be credited")
        b.start()
        st = b.status()  # the first connection starts the socket-activated broker
        check(loaded_bits(b.read_log()) == 0, "with credit-seed-file=no nothing is credited")
        check(st["pool_bits"] == 0, "and the pool starts empty")
    finally:
        b.cleanup()


main(test)
