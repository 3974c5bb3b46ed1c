#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The kernel seeders' units say what their place in boot depends on: eb-seed-vsock.service runs
with no default dependencies before sysinit.target, cryptsetup-pre.target,
systemd-random-seed.service and ssh.service, only in a VM, with the vsock transport loaded and
nothing that waits for the network or the random seed; eb-seed-virtio.service has the same place,
with the port's driver loaded and ahead of udev's coldplug, started by sysinit.target and again by the port's device unit but
never waiting for that device (udev makes it too late, and a guest without the port would wait
for it), and it gives up on a missing port or a silent host within 20 s; eb-seed.service waits for the network and
still comes before ssh.service; all three are Type=notify and hold up what comes after them at most
--ready-timeout=2 s, below systemd's TimeoutStartSec=, going on in the background; every kernel sink
keeps CAP_SYS_ADMIN and nothing else. Read from the unit files as built (systemd-analyze verify
in test-units.py checks that systemd accepts them); the checker is run on broken copies too, so
this test can fail."""
import os
import re

from eblib import BUILD, check, main

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LISTS = {"Before", "After", "Wants", "Requires", "BindsTo", "Requisite", "Conflicts", "WantedBy",
         "LoadCredential"}
PORT_DEVICE = r"dev-virtio\x2dports-org.entropy\x2dbroker.seed.0.device"


def parse(text):
    """{(section, key): [values]}; list-valued keys are split on spaces, and an empty
    assignment resets, as systemd reads them."""
    units, section = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        m = re.fullmatch(r"\[(\w+)\]", line)
        if m:
            section = m.group(1)
            continue
        key, _, value = line.partition("=")
        values = units.setdefault((section, key), [])
        if value == "":
            values.clear()
        elif key in LISTS:
            values.extend(value.split())
        else:
            values.append(value)
    return units


def load(name):
    for path in (os.path.join(BUILD, "units", name), os.path.join(SRC, "units", name)):
        if os.path.exists(path):
            with open(path) as f:
                return f.read()
    raise FileNotFoundError(name)


def seconds(s):
    m = re.fullmatch(r"(\d+)(s|min)?", s)
    return int(m.group(1)) * (60 if m.group(2) == "min" else 1)


def oneshot_timeouts(u, problems):
    """Boot waits for a seeder only until READY=1: once seeded, or after --ready-timeout (at most
    2 s) of trying, while the seeding goes on to --timeout in the background."""
    cmd = " ".join(u.get(("Service", "ExecStart"), []))
    m = re.search(r"--timeout[= ](\d+)", cmd)
    ready = re.search(r"--ready-timeout[= ](\d+)", cmd)
    if "--oneshot" not in cmd or not m or not ready:
        problems.append("ExecStart= is not eb-sink-kernel --oneshot --ready-timeout=SEC --timeout=SEC")
        return cmd
    limit = u.get(("Service", "TimeoutStartSec"), ["90s"])[-1]
    if int(ready.group(1)) > 2:
        problems.append(f"--ready-timeout={ready.group(1)}: boot waits for the seeder more than 2 s")
    if int(ready.group(1)) >= min(seconds(limit), int(m.group(1))):
        problems.append(f"--ready-timeout={ready.group(1)} does not say READY=1 before "
                        f"TimeoutStartSec={limit} and --timeout={m.group(1)}")
    if int(m.group(1)) > 30:
        problems.append(f"--timeout={m.group(1)}: tries on for more than 30 s, long after the "
                        "kernel's own jitter loop initialised the CRNG")
    if u.get(("Service", "Type")) != ["notify"]:
        problems.append("Type= is not notify (boot would wait for the whole --timeout)")
    if u.get(("Service", "RemainAfterExit")) != ["yes"]:
        problems.append("RemainAfterExit=yes is missing")
    if "eb.key" not in u.get(("Service", "LoadCredential"), []):
        problems.append("the credential eb.key is not loaded")
    return cmd


def caps(u, problems):
    if u.get(("Service", "CapabilityBoundingSet")) != ["CAP_SYS_ADMIN"]:
        problems.append(f"CapabilityBoundingSet= is {u.get(('Service', 'CapabilityBoundingSet'))}"
                        ", not CAP_SYS_ADMIN alone")


def check_early(u, problems):
    """What every seeder that runs before sysinit.target must say; returns its ExecStart=."""
    unit = lambda k: set(u.get(("Unit", k), []))
    if u.get(("Unit", "DefaultDependencies")) != ["no"]:
        problems.append("DefaultDependencies=no is missing")
    want_before = {"sysinit.target", "cryptsetup-pre.target", "systemd-random-seed.service",
                   "ssh.service", "shutdown.target"}
    if not want_before <= unit("Before"):
        problems.append(f"not Before= {sorted(want_before - unit('Before'))}")
    if "shutdown.target" not in unit("Conflicts"):
        problems.append("no Conflicts=shutdown.target")
    if "cryptsetup-pre.target" not in unit("Wants"):
        problems.append("cryptsetup-pre.target is not pulled in (Wants=)")
    late = {"systemd-random-seed.service", "sysinit.target", "basic.target", "local-fs.target",
            "network.target", "network-online.target", "ssh.service", "cryptsetup.target"}
    if unit("After") & late or unit("Requires") & late or unit("Wants") & late:
        problems.append(f"waits for {sorted((unit('After') | unit('Requires') | unit('Wants')) & late)}")
    if u.get(("Unit", "ConditionVirtualization")) != ["vm"]:
        problems.append("ConditionVirtualization=vm is missing")
    if u.get(("Unit", "ConditionCredential")) != ["eb.key"]:
        problems.append("ConditionCredential=eb.key is missing")
    if u.get(("Unit", "ConditionPathExists")) != ["!/run/entropy-broker/initramfs"]:
        problems.append("ConditionPathExists=!/run/entropy-broker/initramfs is missing: boot "
                        "would wait for a second early seed after the initramfs's")
    caps(u, problems)
    return oneshot_timeouts(u, problems)


def check_vsock(text):
    u, problems = parse(text), []
    unit = lambda k: set(u.get(("Unit", k), []))
    cmd = check_early(u, problems)
    modprobe = "modprobe@vmw_vsock_virtio_transport.service"
    if modprobe not in unit("Wants") or modprobe not in unit("After"):
        problems.append(f"not Wants= and After= {modprobe}")
    if "--broker=vsock://2" not in cmd:
        problems.append("the broker is not the host, vsock://2")
    if "sysinit.target" not in u.get(("Install", "WantedBy"), []):
        problems.append("not WantedBy=sysinit.target")
    return problems


def check_virtio(text):
    u, problems = parse(text), []
    unit = lambda k: set(u.get(("Unit", k), []))
    cmd = check_early(u, problems)
    if "--broker=virtio:org.entropy-broker.seed.0" not in cmd:
        problems.append("the broker is not the port virtio:org.entropy-broker.seed.0")
    m = re.search(r"--timeout[= ](\d+)", cmd)
    if m and int(m.group(1)) > 20:
        problems.append(f"--timeout={m.group(1)}: a silent host holds up boot for longer than 20 s")
    # Early by sysinit.target, and again when the port appears; never waiting for the device
    # unit, which udev makes only at coldplug and a guest without the port never gets.
    if set(u.get(("Install", "WantedBy"), [])) != {"sysinit.target", PORT_DEVICE}:
        problems.append(f"not WantedBy=sysinit.target {PORT_DEVICE} ({u.get(('Install', 'WantedBy'))})")
    waits = unit("After") | unit("Requires") | unit("BindsTo") | unit("Requisite")
    if PORT_DEVICE in waits:
        problems.append(f"waits for {PORT_DEVICE}")
    modprobe = "modprobe@virtio_console.service"
    if modprobe not in unit("Wants") or modprobe not in unit("After"):
        problems.append(f"not Wants= and After= {modprobe}")
    # Not competing with coldplug for the CPU, where it lost its race with the jitter loop.
    if "systemd-udev-trigger.service" not in unit("Before"):
        problems.append("not Before=systemd-udev-trigger.service")
    # The port is a real device node: a private /dev would hide it.
    if u.get(("Service", "PrivateDevices"), ["no"])[-1] != "no":
        problems.append("PrivateDevices= hides the port")
    if u.get(("Service", "DevicePolicy")) != ["closed"] or \
            "char-virtio-portsdev rw" not in u.get(("Service", "DeviceAllow"), []):
        problems.append("not DevicePolicy=closed with DeviceAllow=char-virtio-portsdev rw")
    return problems


def check_network(text):
    u, problems = parse(text), []
    unit = lambda k: set(u.get(("Unit", k), []))
    if u.get(("Unit", "DefaultDependencies"), ["yes"]) != ["yes"]:
        problems.append("DefaultDependencies= changed")
    for k in ("Wants", "After"):
        if "network-online.target" not in unit(k):
            problems.append(f"not {k}=network-online.target")
    if "ssh.service" not in unit("Before") or "ssh.service" in unit("After"):
        problems.append("not Before=ssh.service")
    if "systemd-random-seed.service" in unit("After") | unit("Requires"):
        problems.append("waits for systemd-random-seed.service")
    oneshot_timeouts(u, problems)
    caps(u, problems)
    return problems


def check_persistent(text):
    u, problems = parse(text), []
    if u.get(("Service", "Type")) != ["notify"]:
        problems.append("Type= is not notify")
    if "--oneshot" in " ".join(u.get(("Service", "ExecStart"), [])):
        problems.append("ExecStart= has --oneshot")
    caps(u, problems)
    return problems


def test():
    cases = (("eb-seed-vsock.service", check_vsock), ("eb-seed-virtio.service", check_virtio),
             ("eb-seed.service", check_network),
             ("eb-sink-kernel.service", check_persistent))
    for name, checker in cases:
        problems = checker(load(name))
        check(not problems, f"{name}: {'; '.join(problems) or 'ordering, conditions and timeouts as designed'}")

    # The checks can fail: each of these breakages must be caught.
    vsock = load("eb-seed-vsock.service")
    broken = {
        "default dependencies": vsock.replace("DefaultDependencies=no", "DefaultDependencies=yes"),
        "after the random seed": vsock.replace("[Service]", "[Unit]\nAfter=systemd-random-seed.service\n[Service]"),
        "no ssh ordering": vsock.replace(" ssh.service", ""),
        "Before= reset": vsock.replace("[Service]", "[Unit]\nBefore=\n[Service]"),
        "not only in VMs": vsock.replace("ConditionVirtualization=vm", "ConditionVirtualization=yes"),
        "a second try after the initramfs's": vsock.replace("ConditionPathExists=!/run/entropy-broker/initramfs\n", ""),
        "timeout too long": vsock.replace("--timeout=30", "--timeout=60"),
        "boot waiting for the whole --timeout": vsock.replace("Type=notify", "Type=oneshot"),
        "a long bound": vsock.replace("--ready-timeout=2", "--ready-timeout=10"),
        "no bound": vsock.replace("--ready-timeout=2 ", ""),
        "more capabilities": vsock.replace("CapabilityBoundingSet=CAP_SYS_ADMIN",
                                           "CapabilityBoundingSet=CAP_SYS_ADMIN CAP_NET_ADMIN"),
    }
    for what, text in broken.items():
        check(text != vsock and check_vsock(text), f"a vsock unit with {what} is caught")
    virtio = load("eb-seed-virtio.service")
    broken = {
        "default dependencies": virtio.replace("DefaultDependencies=no", "DefaultDependencies=yes"),
        "only the device to start it": virtio.replace("WantedBy=sysinit.target\n", ""),
        "no start by the device": virtio.replace("WantedBy=" + PORT_DEVICE, ""),
        "a wait for the device": virtio.replace("[Service]", f"[Unit]\nBindsTo={PORT_DEVICE}\nAfter={PORT_DEVICE}\n[Service]"),
        "no driver": virtio.replace("After=modprobe@virtio_console.service\n", ""),
        "coldplug alongside": virtio.replace("Before=systemd-udev-trigger.service\n", ""),
        "after the random seed": virtio.replace("[Service]", "[Unit]\nAfter=systemd-random-seed.service\n[Service]"),
        "a long wait for the host": virtio.replace("--timeout=15", "--timeout=40"),
        "boot waiting for the whole --timeout": virtio.replace("Type=notify", "Type=oneshot"),
        "a private /dev": virtio.replace("[Install]", "PrivateDevices=yes\n[Install]"),
        "another port": virtio.replace("virtio:org.entropy-broker.seed.0", "virtio:other"),
        "a second try after the initramfs's": virtio.replace("ConditionPathExists=!/run/entropy-broker/initramfs\n", ""),
    }
    for what, text in broken.items():
        check(text != virtio and check_virtio(text), f"a virtio unit with {what} is caught")
    net = load("eb-seed.service")
    check(check_network(net.replace("Wants=network-online.target\n", "")),
          "a network seeder that does not pull in network-online.target is caught")
    check(check_network(net.replace("Type=notify", "Type=oneshot")),
          "a network seeder that holds up ssh.service for its whole --timeout is caught")


main(test)
