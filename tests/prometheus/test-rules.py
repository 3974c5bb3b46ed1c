#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Prometheus rules the project ships, through Debian's promtool: `promtool check rules`
accepts etc/entropy-broker-alerts.yml and docs/fleet.md's fleet-rules.yml, and `promtool test
rules` runs tests/prometheus/alerts.test.yml, which fires each alert on a broker in trouble and
not before its `for:`. (`promtool check metrics` on eb-metrics' answer is in integration-metrics.)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def promtool(*args, cwd=None):
    p = subprocess.run(["promtool", *args], capture_output=True, cwd=cwd, timeout=120)
    out = (p.stdout + p.stderr).decode(errors="replace").strip()
    print("# " + "\n# ".join(out.splitlines()))
    return p.returncode


def main():
    if shutil.which("promtool") is None:
        print("SKIP: needs promtool from Debian's prometheus (scripts/install-deps --test)")
        return 77
    failed = 0
    alerts = os.path.join(SRC, "etc", "entropy-broker-alerts.yml")
    r = promtool("check", "rules", alerts)
    print(f"{'ok' if r == 0 else 'not ok'} - promtool check rules {os.path.basename(alerts)}")
    failed += r != 0
    with open(os.path.join(SRC, "docs", "fleet.md")) as f:
        block = re.search(r"```yaml fleet-rules.yml\n(.*?)```", f.read(), re.S)
    with tempfile.TemporaryDirectory() as tmp:
        fleet = os.path.join(tmp, "fleet-rules.yml")
        with open(fleet, "w") as f:
            f.write(block.group(1) if block else "")
        r = promtool("check", "rules", fleet) if block else 1
        print(f"{'ok' if r == 0 else 'not ok'} - promtool check rules on docs/fleet.md's "
              f"fleet-rules.yml")
        failed += r != 0
    r = promtool("test", "rules", "alerts.test.yml", cwd=os.path.join(SRC, "tests", "prometheus"))
    print(f"{'ok' if r == 0 else 'not ok'} - promtool test rules alerts.test.yml")
    failed += r != 0
    return 1 if failed else 0


sys.exit(main())
