#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""systemd-analyze verify accepts every shipped unit without a word, catches a broken one (so
this test can fail), and the broker's service keeps a low exposure score."""
import glob
import os
import re
import shutil
import tempfile

from eblib import BUILD, check, main, need, prog, run

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# Services allowed above 2.0, each with the reason it cannot do better. Keep this short.
EXPOSURE_MAX = {
    # Root with CAP_SYS_ADMIN, which RNDADDENTROPY and RNDRESEEDCRNG need, and Internet sockets
    # to reach a broker over TCP; everything else is locked down (eb-seed-vsock.service, without
    # the network, stays under 2.0).
    "eb-seed.service": 2.1,
    "eb-sink-kernel.service": 2.1,
}


def units(tmp):
    """The units as installed, with ExecStart= pointing into the build tree."""
    names = []
    for path in glob.glob(os.path.join(SRC, "units", "*")) + glob.glob(os.path.join(BUILD, "units", "*")):
        name = os.path.basename(path)
        if name.endswith((".in", ".build")) or not re.search(r"\.(service|socket|timer|path)$", name):
            continue
        with open(path) as f:
            text = f.read()
        def fix(m):
            # Our programs run from the build tree; others (kill for ExecReload=) stay as they are.
            name = os.path.basename(m.group(2))
            return m.group(1) + (prog(name) if name.startswith("eb-") else m.group(2))
        text = re.sub(r"^(Exec\w+=[-@+!]*)(\S+)", fix, text, flags=re.M)
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
        names.append(name)
    return sorted(set(names))


def verify(tmp, names):
    return run(["systemd-analyze", "verify", "--man=no", *[os.path.join(tmp, n) for n in names]])


ENV_NAMES = ("source.env", "sink.env", "seed.env", "metrics.env")
# Old names, still read after the new one in the same unit.
ENV_OLD = {"eb-sink-kernel.env": "sink.env", "eb-seed.env": "seed.env"}


def check_env_files():
    """One name per kind of unit for the environment files, each shipped as a commented example
    (installed by meson and by the Debian package) and named in the man pages; old names only
    as a second, optional line after the new one."""
    seen = set()
    for path in sorted(glob.glob(os.path.join(SRC, "units", "*"))):
        with open(path) as f:
            files = re.findall(r"^EnvironmentFile=(-?)(\S+)$", f.read(), flags=re.M)
        names = [os.path.basename(p) for _, p in files]
        for (opt, p), name in zip(files, names):
            check(os.path.dirname(p) == "/etc/entropy-broker" and
                  (name in ENV_NAMES or (name in ENV_OLD and opt == "-" and
                                         ENV_OLD[name] in names[:names.index(name)])),
                  f"{os.path.basename(path)}: EnvironmentFile={opt}{p} is one of {ENV_NAMES} "
                  "(or an old name, optional, after its new one)")
            seen.add(name)
    check(set(ENV_NAMES) <= seen, f"every name is used ({sorted(seen)})")
    with open(os.path.join(SRC, "etc", "meson.build")) as f:
        meson = f.read()
    debian = ""
    for p in glob.glob(os.path.join(SRC, "debian", "*.install")):
        with open(p) as f:
            debian += f.read()
    man = ""
    for p in glob.glob(os.path.join(SRC, "docs", "man", "*")):
        with open(p) as f:
            man += f.read()
    for name in ENV_NAMES:
        with open(os.path.join(SRC, "etc", name)) as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
        check(lines and all(l.startswith("#") for l in lines) and any("=" in l for l in lines),
              f"etc/{name} is a commented example")
        check(f"'{name}'" in meson and "usr/share/doc/entropy-broker/examples/*.env" in debian,
              f"{name}'s example is installed (meson) and packaged (debian/*.install)")
        check(f"/etc/entropy-broker/{name}" in man,
              f"a man page names /etc/entropy-broker/{name}")
    # The kernel's output must not come back to it with credit: the two units exclude each other.
    with open(os.path.join(SRC, "units", "eb-sink-kernel.service.in")) as f:
        check(re.search(r"^Conflicts=eb-source-kernel\.service$", f.read(), flags=re.M),
              "eb-sink-kernel.service conflicts with eb-source-kernel.service")


def test():
    need("systemd-analyze")
    check_env_files()
    tmp = tempfile.mkdtemp(prefix="eb-units-")
    try:
        names = units(tmp)
        check("eb-brokerd.socket" in names and "eb-brokerd.service" in names,
              f"the broker's units are shipped ({', '.join(names)})")
        p = verify(tmp, names)
        out = (p.stdout + p.stderr).decode()
        check(p.returncode == 0 and out.strip() == "", f"systemd-analyze verify accepts all {len(names)} units: {out.strip()}")

        # The check must be able to fail: a misspelt key in a copy.
        with open(os.path.join(tmp, "eb-brokerd.service")) as f:
            good = f.read()
        with open(os.path.join(tmp, "eb-brokerd.service"), "w") as f:
            f.write(good.replace("Type=notify", "Typo=notify"))
        p = verify(tmp, ["eb-brokerd.service"])
        check("Unknown key" in (p.stdout + p.stderr).decode(), "a broken unit is caught")
        with open(os.path.join(tmp, "eb-brokerd.service"), "w") as f:
            f.write(good)

        for name in names:
            if not name.endswith(".service"):
                continue
            p = run(["systemd-analyze", "security", "--offline=yes", "--no-pager",
                     os.path.join(tmp, name)])
            m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", (p.stdout + p.stderr).decode())
            check(m is not None, f"{name}: systemd-analyze security gives a score")
            limit = EXPOSURE_MAX.get(name, 2.0)
            check(float(m.group(1)) <= limit, f"{name}: exposure {m.group(1)} is at most {limit}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main(test)
