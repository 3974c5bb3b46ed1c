#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""docs/sources.md's "Stated against measured H" as a test: every source program that runs on this
machine without its device takes N raw samples through its own read path at its default claim
(--samples N --dump-raw against a private broker), its claim is read from its start-up line, and
all ten SP 800-90B estimators (tests/tools/min-entropy, eb-assess's library) must measure at least
that on its samples. The table must state the claim each program makes (the start-up line's, or
the default its --help prints) and have a row for every source program that is built.

Rows that need what a machine may lack (root, /dev/hwrng, Debian's entropybroker) are skipped
with the reason; the kernel, timers and jitter rows run everywhere."""
import json
import os
import re

from eb29 import OldBroker, missing
from eblib import BUILD, ME, Broker, check, main, prog, run

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "sources.md")
MIN_ENTROPY = os.path.join(BUILD, "tests", "tools", "min-entropy")
# Enough for the estimators' bounds to sit well within the margins the claims leave (a uniform
# capture of 10^5 bytes measures 6.3-7.2), few enough that /dev/hwrng gives them in about 10 s.
N = 100000
SOURCES_DIR = os.path.join(BUILD, "sources")


def claims_table():
    """{first cell: stated H} from the table between the claims markers."""
    with open(DOC) as f:
        text = f.read()
    m = re.search(r"<!-- BEGIN claims[^>]*-->\n(.*?)<!-- END claims -->", text, re.S)
    check(m is not None, "docs/sources.md has the claims table")
    rows = {}
    for line in m.group(1).splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = float(cells[1].strip("*"))
    return rows


def row_of(rows, program, kind=None):
    """The stated H of the row for program (and, for eb-source-stream, the device type)."""
    for cell, h in rows.items():
        names = re.findall(r"`([^`]+)`", cell)
        if program in names and (kind is None or kind in names):
            return h
    return None


def started_claim(stderr):
    m = re.search(r"H = (\d+\.\d{3}) bits each", stderr)
    return float(m.group(1)) if m else None


def help_default(program):
    """The default claim --help states, or None when it names none (a type's, for instance)."""
    lines = run([prog(program), "--help"]).stdout.decode().splitlines()
    for i, line in enumerate(lines):
        if re.search(r"--(min-entropy|credit-per-byte) H\s", line):
            text = line
            for more in lines[i + 1:]:
                if not more.startswith(" " * 8) or more.strip().startswith("-"):
                    break
                text += " " + more.strip()
            m = re.search(r"\(default ([0-9.]+)", text)
            if m:
                return float(m.group(1))
    return None


def measure(broker, program, args, tmp):
    raw = os.path.join(tmp, program + ".raw")
    p = run([prog(program), "-b", broker.unix, "--samples", str(N), "--dump-raw", raw, *args],
            timeout=90)
    err = p.stderr.decode(errors="replace")
    check(p.returncode == 0, f"{program} {' '.join(args)} takes {N} samples" +
          ("" if p.returncode == 0 else f" (exit {p.returncode}: {err[-300:]})"))
    claim = started_claim(err)
    check(claim is not None, f"{program} states its claim at start-up" +
          ("" if claim is not None else f": {err[-300:]}"))
    out = run([MIN_ENTROPY, "--json", raw], check=True).stdout
    est = json.loads(out)
    os.unlink(raw)
    return claim, est


def test():
    rows = claims_table()

    # A row for every source program built, and each row's claim the program's own default.
    programs = sorted(n for n in os.listdir(SOURCES_DIR)
                      if re.fullmatch(r"eb-(source|proxy)-[a-z0-9]+", n))
    check(len(programs) >= 12, f"the build has the source programs ({len(programs)})")
    for program in programs:
        stated = row_of(rows, program)
        check(stated is not None, f"docs/sources.md's claims table has a row for {program}")
        default = help_default(program)
        if default is not None:
            check(default == stated,
                  f"{program}: the table states {stated}, as its --help's default {default}")

    b = Broker({"src": {"role": "source", "unix-uid": ME, "key": False}},
               capacity=1 << 31).start()
    old = None
    try:
        runs = [("eb-source-kernel", None, []),
                ("eb-source-timers", None, []),
                ("eb-source-jitter", None, [])]
        if not os.access("/dev/hwrng", os.R_OK):
            print("# skip eb-source-stream hwrng: /dev/hwrng is absent or not readable")
        else:
            runs.append(("eb-source-stream", "hwrng", ["/dev/hwrng"]))
        absent = missing()
        if absent or os.geteuid() != 0:
            print(f"# skip eb-source-egd: needs Debian's entropybroker ({absent}) and root "
                  "(its PID files)" if absent else "# skip eb-source-egd: needs root for "
                  "Entropy Broker 2.9's PID files in /var/run")
        else:
            old = OldBroker(b.tmp)
            old.start()
            runs.append(("eb-source-egd", None, [old.sock]))

        for program, kind, args in runs:
            claim, est = measure(b, program, args, b.tmp)
            stated = row_of(rows, program, kind)
            label = program + (f" {kind}" if kind else "")
            check(claim <= est["min_entropy"],
                  f"{label}: claim {claim} <= {est['min_entropy']:.3f} measured on {N} samples "
                  f"({est['least']} on the {est['least_on']})")
            check(stated == claim,
                  f"{label}: docs/sources.md states {stated}, the program claims {claim}")
    finally:
        if old:
            old.stop()
        b.cleanup()


main(test)
