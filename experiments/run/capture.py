"""Packet captures of chosen host and switch ports, written into the results folder.

`CAPTURE=1` captures the default ports; `CAPTURE=h0,p0t1s1:eth2` names others, and
`CAPTURE=default,h3` adds to the default. Each port gets one tcpdump started in its
node (`node.popen`, as the agents are: inside the host's or kernel router's namespace,
in the root namespace for a BMv2 switch), writing `<folder>/pcap/<node>-eth<N>.pcap`.
The files are bounded twice: the snap length keeps the headers (Ethernet, IPv6, UDP,
the MRC header and control body: 118 bytes) but not the payload, and a packet count
per port shares a total size budget among the ports.
tcpdump stops by itself at that count, so a capture holds the *first* packets of a run.

`stop()` sends SIGINT (tcpdump flushes and prints its counters), waits, and kills what
does not end; a run killed before that is cleaned up by experiments/run/cleanup.py, which
finds these tcpdumps by their `-w .../pcap/<node>-ethN.pcap` argument. A port of a
node on another server (docs/scale-out.md) is captured there, its packets written to
this machine's file through the node's ssh session; its SIGINT is sent there, to the
pid it reported; a run killed before that leaves it to end at its next packet, when
the session it writes to has gone.
Open the files with the dissector in tools/wireshark/ (docs/wireshark.md).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from hosts.protocol import CONTROL_PACKET_BYTES, frame_bytes
from topologies.errors import UserError
from topologies.model import Fabric
from topologies.remote import is_remote

# Every control packet whole (118 bytes with Ethernet, IPv6 and UDP), and every DATA
# packet's headers, rounded up to a multiple of 16.
DEFAULT_SNAPLEN = -(-frame_bytes(CONTROL_PACKET_BYTES) // 16) * 16
DEFAULT_BUDGET_MB = 200
PCAP_RECORD_HEADER = 16  # bytes pcap adds to every packet it stores
READY_TIMEOUT_S = 5.0
STOP_TIMEOUT_S = 5.0
SPEC_SOURCE = "CAPTURE"
# What CAPTURE=1 (or "default") means: every port of h0, and every port of the plane-0
# T0 above it, where h0's traffic meets the fabric (uSID lists before and after a shift).
DEFAULT_WORDS = ("", "1", "default", "yes", "true")

# How experiments/run/cleanup.py recognises a tcpdump of ours left by a killed run: its
# output file (tcpdump_argv) and nothing else on the machine.
PROCESS_PATTERN = r"tcpdump .* -w \S*/pcap/\S+-eth\d+\.pcap\b"

# How a tcpdump on another server says its pid there, first on its log.
REMOTE_PID = "tcpdump-pid"

_STATS_RE = re.compile(r"^(\d+) packets? (captured|received by filter|dropped by kernel)",
                       re.MULTILINE)


class CaptureError(UserError):
    """A capture spec that names no port of the topology."""


class CaptureFailed(RuntimeError):
    """tcpdump did not start, or is missing."""


@dataclass(frozen=True)
class CaptureTarget:
    node: str
    intf: str

    def pcap_name(self) -> str:
        # Interface names already begin with their node: h0-eth1.pcap is h0's port 1.
        return f"{self.intf}.pcap"


@dataclass
class CaptureResult:
    node: str
    intf: str
    file: str
    captured: int | None
    dropped: int | None
    bytes: int

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def default_spec(fabric: Fabric) -> str:
    first = fabric.hosts[0]
    return f"{first.name},{fabric.t0(0, first.rack).name}"


def parse_spec(spec: str | None, fabric: Fabric, source: str = SPEC_SOURCE
               ) -> list[CaptureTarget]:
    """The ports a spec names: a comma list of `node` (every port) or `node:intf`.

    `intf` may be the interface name (`p0t0r0-eth2`), its short form (`eth2`) or the
    port number (`2`). The item `default` stands for `default_spec()`, and so does an
    empty spec or `1` (what CAPTURE=1 passes).
    """
    text = (spec or "").strip()
    if text.lower() in DEFAULT_WORDS:
        text = "default"
    items: list[str] = []
    for part in (part.strip() for part in text.split(",")):
        items += default_spec(fabric).split(",") if part == "default" else [part]
    targets: list[CaptureTarget] = []
    nodes = {n.name for n in (*fabric.hosts, *fabric.switches)}
    for item in items:
        if not item:
            raise CaptureError(source, repr(text), "empty item in the comma list",
                               "name nodes or node:port separated by single commas")
        node, _, port = item.partition(":")
        if node not in nodes:
            raise CaptureError(source, item, f"no node {node!r} in {fabric.name}",
                               f"use a node of the topology, e.g. {default_spec(fabric)}")
        intfs = [p.intf for p in fabric.ports(node)]
        if not port:
            chosen = intfs
        else:
            wanted = {port, f"{node}-{port}", f"{node}-eth{port}"}
            chosen = [i for i in intfs if i in wanted]
            if not chosen:
                raise CaptureError(source, item, f"{node} has no port {port!r}",
                                   f"use one of {', '.join(intfs)}")
        for intf in chosen:
            target = CaptureTarget(node, intf)
            if target not in targets:
                targets.append(target)
    return targets


def packets_per_port(ports: int, snaplen: int = DEFAULT_SNAPLEN,
                     budget_mb: float = DEFAULT_BUDGET_MB) -> int:
    """How many packets each port may keep so that all files stay within the budget."""
    if ports < 1:
        raise ValueError("no port to capture")
    per_port = budget_mb * 1_000_000 / ports
    return max(1, int(per_port // (snaplen + PCAP_RECORD_HEADER)))


def tcpdump_argv(intf: str, pcap: Path | str, snaplen: int, count: int,
                 bpf_filter: str = "") -> list[str]:
    """The tcpdump command for one port.

    --immediate-mode hands each packet to tcpdump as it arrives (else the kernel holds
    up to a second of them, lost when SIGINT ends tcpdump); -U writes each packet as it
    comes, so a file is whole up to the last packet even if the run is killed; -Z root
    keeps tcpdump from switching to its own user, who could not write into a results
    folder owned by root; -n: no name lookups.
    """
    argv = ["tcpdump", "-i", intf, "-n", "--immediate-mode", "-U", "-Z", "root",
            "-s", str(snaplen), "-c", str(count), "-w", str(pcap)]
    return argv + ([bpf_filter] if bpf_filter else [])


def _remote_pid(log: Path) -> int | None:
    """The pid on its server of a tcpdump started there (Capture.start), from its log."""
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(REMOTE_PID + " "):
            return int(line.split()[1])
    return None


def parse_stats(text: str) -> dict[str, int]:
    """tcpdump's closing counters: {'captured': n, 'dropped by kernel': m, ...}."""
    return {what: int(n) for n, what in _STATS_RE.findall(text)}


class Capture:
    """tcpdumps on a set of ports of a running network: `with Capture(...) as cap:`.

    `net.get(node)` must return a node with Mininet's `popen`. `results` is filled by
    `stop()`, one `CaptureResult` per port.
    """

    def __init__(self, net, targets: list[CaptureTarget], folder: Path,
                 snaplen: int = DEFAULT_SNAPLEN, budget_mb: float = DEFAULT_BUDGET_MB,
                 bpf_filter: str = ""):
        self.net = net
        self.targets = list(targets)
        self.folder = Path(folder) / "pcap"
        self.snaplen = snaplen
        self.count = packets_per_port(len(self.targets), snaplen, budget_mb)
        self.bpf_filter = bpf_filter
        self.procs: list[tuple[CaptureTarget, subprocess.Popen, Path]] = []
        self.results: list[CaptureResult] = []

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Start every tcpdump and wait until each listens (so no early packet is missed)."""
        if shutil.which("tcpdump") is None:
            raise CaptureError(SPEC_SOURCE, "tcpdump", "not installed",
                               "make deps (installs tcpdump), or run without CAPTURE")
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            for target in self.targets:
                pcap = self.folder / target.pcap_name()
                log = pcap.with_suffix(".log")
                node = self.net.get(target.node)
                remote = is_remote(node)
                # A node on another server writes its capture here, through its ssh
                # session: the server's disk is its own. Its pid there, for the stop,
                # heads the log.
                argv = tcpdump_argv(target.intf, "-" if remote else pcap, self.snaplen,
                                    self.count, self.bpf_filter)
                if remote:
                    argv = ["sh", "-c", f'echo "{REMOTE_PID} $$" >&2; exec "$@"', "sh", *argv]
                with open(log, "w") as err, open(pcap if remote else os.devnull, "wb") as out:
                    proc = node.popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
                self.procs.append((target, proc, log))
            self._wait_listening(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _wait_listening(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for target, proc, log in self.procs:
            while "listening on" not in log.read_text(errors="replace"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    detail = log.read_text(errors="replace").strip().splitlines()
                    raise CaptureFailed(f"tcpdump on {target.intf} ({target.node}) did not "
                                        f"start: {detail[-1] if detail else 'no output'}")
                time.sleep(0.02)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> list[CaptureResult]:
        """SIGINT every tcpdump (it flushes and exits), wait, kill the stragglers."""
        for target, proc, log in self.procs:
            if proc.poll() is not None:
                continue
            node = self.net.get(target.node)
            if is_remote(node):  # a signal to its ssh here would not reach it
                pid = _remote_pid(log)
                if pid is not None:
                    node.rrun(["kill", "-INT", str(pid)], timeout=timeout_s)
            else:
                proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + timeout_s
        for target, proc, log in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            pcap = self.folder / target.pcap_name()
            stats = parse_stats(log.read_text(errors="replace")) if log.exists() else {}
            self.results.append(CaptureResult(
                target.node, target.intf, str(pcap), stats.get("captured"),
                stats.get("dropped by kernel"), pcap.stat().st_size if pcap.exists() else 0))
        self.procs = []
        return self.results

    def __enter__(self) -> Capture:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_capture(net, fabric: Fabric, spec: str | None, folder: Path,
                  snaplen: int = DEFAULT_SNAPLEN,
                  budget_mb: float = DEFAULT_BUDGET_MB) -> Capture:
    """Parse the spec, start the tcpdumps, return the running Capture (caller stops it)."""
    capture = Capture(net, parse_spec(spec, fabric), folder, snaplen, budget_mb)
    capture.start()
    return capture
