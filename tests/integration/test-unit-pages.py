#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The operators' pages keep up with what is installed: every unit in units/ has a man page of its
own name in docs/man (a group page, or a .so alias to one that names the unit in NAME), installed
by docs/meson.build and put in a Debian package by debian/*.install; entropy-broker(7) names every
unit and every tag and value the udev rules act on, and every template they start; and the pages
format without a warning. A unit, a udev tag or a page added without the rest fails here."""
import fnmatch
import os
import re

from eblib import check, main, run

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MAN = os.path.join(SRC, "docs", "man")


def read(*path):
    with open(os.path.join(SRC, *path), encoding="utf-8") as f:
        return f.read()


def units():
    names = set()
    for f in os.listdir(os.path.join(SRC, "units")):
        name = f[:-3] if f.endswith(".in") else f
        if re.search(r"\.(service|socket|timer|path|target)$", name):
            names.add(name)
    return sorted(names)


def name_section(text):
    """The NAME section's text, with roff escapes for - undone."""
    m = re.search(r"^\.SH NAME\n(.*?)^\.SH ", text, re.S | re.M)
    return m.group(1).replace("\\-", "-") if m else ""


def packaged(path):
    """The debian/*.install lines whose glob takes PATH (relative to the install root)."""
    hits = []
    for f in os.listdir(os.path.join(SRC, "debian")):
        if not f.endswith(".install"):
            continue
        for line in read("debian", f).splitlines():
            pat = line.strip().rstrip("/")
            if pat and (fnmatch.fnmatch(path, pat) or path.startswith(pat + "/")):
                hits.append(f)
    return hits


DOC_DIR = "/usr/share/doc/entropy-broker/"


def check_cited_docs():
    """Every project page the installed man pages and the journal's catalog cite (as
    /usr/share/doc/entropy-broker/NAME.md, or docs/NAME.md) exists, is installed there by
    docs/meson.build and is put in a package by debian/*.install."""
    cited = {}
    sources = [("docs", "man", f) for f in sorted(os.listdir(MAN))] + [("catalog", "entropy-broker.catalog")]
    for where in sources:
        for m in re.finditer(r"(?:docs/|" + re.escape(DOC_DIR) + r")([a-z0-9-]+\.md)", read(*where)):
            cited.setdefault(m.group(1), set()).add("/".join(where))
    check(cited, f"the pages cite project pages ({sorted(cited)})")
    docs_meson = read("docs", "meson.build")
    for name, by in sorted(cited.items()):
        check(os.path.exists(os.path.join(SRC, "docs", name)), f"docs/{name} exists")
        check(f"'{name}'" in docs_meson, f"docs/meson.build installs {name}, cited by {sorted(by)}")
        check(packaged(DOC_DIR.lstrip("/") + name),
              f"a Debian package ships {DOC_DIR}{name}, cited by {sorted(by)}")
    for name, by in sorted(cited.items()):
        for where in by:
            check(f"docs/{name}" not in read(*where.split("/")),
                  f"{where} cites {DOC_DIR}{name}, where it is installed, not docs/{name}")


def check_catalog():
    """Every catalog entry has a Documentation: line, and every MESSAGE_ID the programs log has
    an entry; every refusal the broker logs carries the refusal's MESSAGE_ID."""
    cat = read("catalog", "entropy-broker.catalog")
    entries = re.split(r"^-- ", cat, flags=re.M)[1:]
    ids = set()
    for e in entries:
        mid = e.split("\n", 1)[0].strip()
        ids.add(mid)
        check(re.search(r"^Documentation: \S", e, re.M), f"catalog entry {mid} has Documentation:")
    used = set()
    for d in ("daemon", "shared", "sources", "sinks", "tools"):
        for f in os.listdir(os.path.join(SRC, d)):
            if f.endswith((".c", ".h")):
                used |= set(re.findall(r'#define MSGID_\w+\s+"([0-9a-f]{32})"', read(d, f)))
    check(used and used <= ids, f"every MESSAGE_ID logged has a catalog entry (missing: "
          f"{sorted(used - ids)})")
    for f in sorted(os.listdir(os.path.join(SRC, "daemon"))):
        if not f.endswith(".c"):
            continue
        plain = re.findall(r'log_peer\(\s*[^;]*?"Refusing', read("daemon", f))
        check(not plain, f"daemon/{f}: every \"Refusing\" line of a peer carries the refusal "
              f"MESSAGE_ID (log_peer_refused): {plain[:1]}")


def test():
    check_cited_docs()
    check_catalog()
    docs_meson = read("docs", "meson.build")
    overview = read("docs", "man", "entropy-broker.7").replace("\\-", "-").replace("\\fB", "").replace("\\fI", "").replace("\\fR", "").replace("\\fP", "")
    all_units = units()
    check(len(all_units) >= 20, f"units/ has the units this test knows ({len(all_units)})")

    for unit in all_units:
        page = os.path.join(MAN, f"{unit}.8")
        check(os.path.exists(page), f"{unit} has a man page docs/man/{unit}.8")
        text = read("docs", "man", f"{unit}.8")
        m = re.match(r"\.so man8/(.+\.8)\n$", text)
        if m:
            target = m.group(1)
            check(os.path.exists(os.path.join(MAN, target)), f"{unit}.8 points at {target}, which exists")
            text = read("docs", "man", target)
        check(re.search(r"(^|[ ,])" + re.escape(unit) + r"([ ,]|$)", name_section(text)) is not None,
              f"the NAME section of {unit}'s page names {unit}")
        check(f"'man/{unit}.8'" in docs_meson, f"docs/meson.build installs {unit}.8")
        check(packaged(f"usr/share/man/man8/{unit}.8"), f"a Debian package takes {unit}.8")
        check(packaged(f"lib/systemd/system/{unit}"), f"a Debian package takes {unit}")
        base = unit.split("@")[0] + ("@" if "@" in unit else "")
        check(base in overview, f"entropy-broker(7) names {unit}")
        # systemctl status and help show these: the unit's own page and the overview.
        src = os.path.join("units", unit + ".in") if os.path.exists(os.path.join(SRC, "units", unit + ".in")) else os.path.join("units", unit)
        docs = " ".join(re.findall(r"^Documentation=(.*)$", read(src), re.M)).split()
        check(f"man:{unit}(8)" in docs and "man:entropy-broker(7)" in docs,
              f"{unit}'s Documentation= names man:{unit}(8) and man:entropy-broker(7): {docs}")

    # What the udev rules act on: the tags an administrator sets, their values, and the units.
    rules = read("udev", "60-entropy-broker.rules") + read("udev", "70-entropy-broker-capture.rules")
    tags = set(re.findall(r'ENV\{(EB_[A-Z_]+)\}', rules))
    check({"EB_STREAM_TYPE", "EB_SOURCE"} <= tags, f"the rules' tags are the ones this test knows: {sorted(tags)}")
    for tag in sorted(tags):
        check(tag in overview, f"entropy-broker(7) documents the udev tag {tag}")
    for value in re.findall(r'ENV\{EB_SOURCE\}=="([^"]+)"', rules):
        check(f"EB_SOURCE={value}" in overview, f"entropy-broker(7) documents EB_SOURCE={value}")
    for wanted in re.findall(r'SYSTEMD_WANTS\}\+="([^"]+)"', rules):
        for unit in wanted.split():
            base = unit.split("@")[0] + "@"
            check(base in overview, f"entropy-broker(7) names {base}, which the rules start")

    # The new pages format cleanly, as test-cli checks the programs' pages.
    for page in ["entropy-broker.7"] + [f"{u}.8" for u in all_units]:
        path = os.path.join(MAN, page)
        if read("docs", "man", page).startswith(".so "):
            continue
        p = run(["groff", "-man", "-ww", "-z", path])
        check(p.returncode == 0 and not p.stderr, f"{page} formats without warnings: {p.stderr.decode(errors='replace').strip()}")


if __name__ == "__main__":
    main(test)
