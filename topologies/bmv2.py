"""Mininet node class for the P4 target: one BMv2 `simple_switch_grpc` per switch.

The switch process runs in the root namespace (like Mininet's software switches) with
one port per interface (`-i <port>@<node>-eth<port>`), its own device id, gRPC port and
Thrift port, strict-priority queues (`--priority-queues 8`: the priority class skips
the lossless and data queues) and a log file. `start()` returns once the P4Runtime port
accepts connections (or raises if the process dies or the deadline passes).

Its log goes to `<log_dir>/<switch>` at level `info` (MRC_BMV2_LOG_LEVEL changes it).
Queues live inside BMv2, so that the P4 program sees the backlog it marks and trims
on: `set_queues()` sets each port's queues from its link rate and depth through the
Thrift CLI (`queue_commands()`), which runs under the testbed's own Python
(`cli_argv()`).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from mininet.node import Switch

# The queues p4src/ uses are the protocol's priorities: data, the lossless class, and
# strict priority for control packets and trimmed headers. BMv2 paces each queue in
# packets per second, so the data and lossless queues count full DATA frames (whose
# rate matches the link's bit rate and the agents' pacing), the lossless class's short
# frames (RoCE acks) control frames, and the priority queue trimmed headers (a control
# packet is a little longer).
from controller.tables import lossless_queue, priority_limit
from hosts.protocol import (
    CONTROL_FRAME_BYTES,
    DATA_FRAME_BYTES,
    PRIORITY_CONTROL,
    PRIORITY_DATA,
    PRIORITY_LOSSLESS,
    PRIORITY_LOSSLESS_SHORT,
    PRIORITY_QUEUES,
    TRIMMED_FRAME_BYTES,
    link_pps,
)
from topologies.offloads import OFFLOADS, offloads_off

# BMv2 logs every step of every packet at its default level (trace), which slows a
# switch down by an order of magnitude; experiments log what happens at start-up and
# what goes wrong. MRC_BMV2_LOG_LEVEL=trace brings the per-packet log back.
LOG_LEVEL = os.environ.get("MRC_BMV2_LOG_LEVEL", "info")
# BMv2's own buffer of the data and priority queues, in multiples of the limit the P4
# program admits: the program decides and counts every drop on its estimate of the
# backlog, and a packet it admits while that estimate lags by one (ingress and egress
# race on it) still finds room instead of being dropped uncounted by BMv2.
BUFFER_HEADROOM = 2

# Where a BMv2 switch on another server keeps its log, and that server's controller the
# run's topology, P4Info and program (experiments/dataplanes/bmv2_server.py): a
# server's /tmp is its own (a namespace server's too).
SERVER_FOLDER = "/tmp/mrc-testbed-bmv2"


def queue_commands(port: int, rate_mbit: float, queue: int,
                   trim_size_bytes: int = TRIMMED_FRAME_BYTES,
                   priority_share: float | None = None,
                   frame_bytes: int = DATA_FRAME_BYTES) -> list[str]:
    """simple_switch_CLI commands that make `port` a link of `rate_mbit` with a data
    queue of `queue` full frames. BMv2 paces each priority queue on its own, in
    packets: the data and lossless queues at the packet rate of full frames, the
    lossless class's short frames at that of control frames, the priority queue at
    that of trimmed headers. The limits are the P4 program's
    (controller/tables.py: the priority queue holds as many trimmed headers as fit in
    the data queue's bytes, the lossless queue is never dropped); BMv2's own buffers
    are BUFFER_HEADROOM times deeper, so that the program decides every drop. `priority_share`
    caps the priority queue at that share of the link (a topology's
    `trimming.priority_share`), as the eBPF switch's htb caps its priority class.
    `frame_bytes` is the fabric's full DATA frame."""
    def pps(rate: float, frame: int) -> int:  # BMv2 takes whole packets a second, at least 1
        return max(1, round(link_pps(rate, frame)))

    data_pps = pps(rate_mbit, frame_bytes)
    ack_pps = pps(rate_mbit, CONTROL_FRAME_BYTES)
    share = 1.0 if priority_share is None else priority_share
    header_pps = pps(rate_mbit * share, trim_size_bytes)
    headers = priority_limit(queue, trim_size_bytes, frame_bytes)
    return [f"set_queue_rate {data_pps} {port} {PRIORITY_DATA}",
            f"set_queue_depth {queue * BUFFER_HEADROOM} {port} {PRIORITY_DATA}",
            f"set_queue_rate {data_pps} {port} {PRIORITY_LOSSLESS}",
            f"set_queue_depth {lossless_queue(queue)} {port} {PRIORITY_LOSSLESS}",
            f"set_queue_rate {ack_pps} {port} {PRIORITY_LOSSLESS_SHORT}",
            f"set_queue_depth {lossless_queue(queue)} {port} {PRIORITY_LOSSLESS_SHORT}",
            f"set_queue_rate {header_pps} {port} {PRIORITY_CONTROL}",
            f"set_queue_depth {headers * BUFFER_HEADROOM} "
            f"{port} {PRIORITY_CONTROL}"]


def prepare_ports(intfs: list[str]) -> None:
    """What every BMv2 switch's ports get before the switch starts: no IPv6 (the kernel
    must not answer or originate anything on them) and no segmentation offloads (so
    that libpcap's capture ring holds a burst: topologies/offloads.py)."""
    for intf in intfs:
        subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{intf}.disable_ipv6=1"],
                       capture_output=True)
    offloads_off(intfs)


def prepare_ports_line(intfs: list[str]) -> str:
    """What `prepare_ports` does, as one shell line for a switch on another server."""
    offloads = " ".join(f"{name} off" for name in OFFLOADS)
    return "; ".join(f"sysctl -qw net.ipv6.conf.{intf}.disable_ipv6=1; "
                     f"ethtool -K {intf} {offloads} >/dev/null 2>&1" for intf in intfs)


def switch_argv(device_id: int, thrift_port: int, grpc_port: int,
                ports: list[tuple[int, str]], json_path: str | Path, log_file: str | Path,
                log_level: str = LOG_LEVEL) -> list[str]:
    """The command line the testbed starts every simple_switch_grpc with: `ports` as
    (port number, interface) pairs, the log at `log_level` in `log_file`, and strict
    priority queues. bench/bmv2_forwarding.py measures exactly this command."""
    args = ["simple_switch_grpc", "--device-id", str(device_id),
            "--thrift-port", str(thrift_port),
            "--log-file", str(log_file), "--log-level", log_level]
    for port, intf in ports:
        args += ["-i", f"{port}@{intf}"]
    return args + [str(json_path) if json_path else "--no-p4", "--",
                   "--grpc-server-addr", f"127.0.0.1:{grpc_port}",
                   "--priority-queues", str(PRIORITY_QUEUES)]


class Bmv2Error(RuntimeError):
    """A BMv2 switch did not start, or refused a CLI command."""


def cli_argv(thrift_port: int) -> list[str]:
    """The command line of simple_switch_CLI for the switch on `thrift_port`.

    The CLI is a Python script whose `#!/usr/bin/env python3` picks whatever python3
    comes first on PATH, often one without Thrift (pyenv, a venv): it is run under the
    testbed's own interpreter instead, made from the distribution's Python that has
    python3-thrift and BMv2's runtime modules. Raises Bmv2Error with the fix when the
    script or Thrift is missing."""
    script = shutil.which("simple_switch_CLI")
    if script is None:
        raise Bmv2Error("simple_switch_CLI not found: install BMv2 (make deps-p4, or the "
                        "Vagrant VM)")
    try:
        import thrift  # noqa: F401 - only whether simple_switch_CLI can run here
    except ImportError:
        raise Bmv2Error(f"simple_switch_CLI needs Python's thrift module in {sys.executable}: "
                        "apt-get install python3-thrift (make deps installs it)") from None
    return [sys.executable, script, "--thrift-port", str(thrift_port)]


def run_cli(thrift_port: int, commands: list[str], what: str = "BMv2",
            run: Callable[..., subprocess.CompletedProcess] | None = None) -> str:
    """Run simple_switch_CLI commands on the switch on `thrift_port`; raise Bmv2Error
    on a failure or an error reply. `run(argv, stdin, timeout=)` runs the CLI where the
    switch is (topologies/remote.py `rrun`: another server); by default here."""
    stdin = "\n".join(commands) + "\n"
    done = (run(cli_argv(thrift_port), stdin, timeout=30) if run is not None
            else subprocess.run(cli_argv(thrift_port), input=stdin, capture_output=True,
                                text=True, timeout=30))
    if done.returncode != 0 or "Error" in done.stdout:
        raise Bmv2Error(f"{what}: simple_switch_CLI failed: "
                        f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    return done.stdout


def wait_for_port(port: int, proc: subprocess.Popen, deadline_s: float, what: str) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Bmv2Error(f"{what} exited with status {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)  # poll interval, bounded by the deadline
    raise Bmv2Error(f"{what} did not listen on port {port} within {deadline_s:g}s")


class Bmv2Switch(Switch):
    def __init__(self, name, device_id: int = 1, grpc_port: int = 28001,
                 thrift_port: int = 9091, json_path: str = "", log_dir: str = "build/logs",
                 start_timeout_s: float = 20.0, **params):
        super().__init__(name, **params)
        self.device_id, self.grpc_port, self.thrift_port = device_id, grpc_port, thrift_port
        self.json_path, self.log_dir = json_path, Path(log_dir)
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def port_intfs(self) -> list[tuple[int, str]]:
        return [(port, intf.name) for port, intf in sorted(self.intfs.items())
                if intf.name != "lo"]

    def start(self, controllers=None) -> None:
        """Start the switch, unless `launch` did already, and wait until it listens.
        A fabric launches all its switches first (FabricNet.start), so that they come
        up together: one after the other, 48 took 5.7 s on 2 cores."""
        if not self.running():
            self.launch()
        self.wait_ready()

    def running(self) -> bool:
        """Whether the switch process runs."""
        return self.proc is not None and self.proc.poll() is None

    def launch(self) -> None:
        """Start the switch process, without waiting for it."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        prepare_ports([intf for _, intf in self.port_intfs()])
        args = switch_argv(self.device_id, self.thrift_port, self.grpc_port,
                           self.port_intfs(), self.json_path, self.log_dir / self.name)
        out = open(self.log_dir / f"{self.name}.out", "w")
        self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self) -> None:
        wait_for_port(self.grpc_port, self.proc, self.start_timeout_s,
                      f"simple_switch_grpc for {self.name}")

    def end_process(self) -> None:
        """Ask the switch process to end, without waiting for it."""
        if self.running():
            self.proc.terminate()

    @classmethod
    def batchShutdown(cls, switches, run=None):  # noqa: N802 - Mininet's
        """Mininet's stop of a fabric's switches: every process asked to end first,
        then each waited for (one after the other, 48 took 5.8 s)."""
        for switch in switches:
            switch.end_process()
        for switch in switches:
            switch.stop(deleteIntfs=False)
        return switches

    def cli(self, commands: list[str]) -> str:
        """Run simple_switch_CLI commands on this switch; raise on an error reply."""
        return run_cli(self.thrift_port, commands, self.name)

    def set_queues(self, commands: list[str]) -> None:
        """Set every port's queues (queue_commands)."""
        self.cli(commands)

    def set_ports(self, up: bool) -> None:
        """Set every port up or down, for a reboot: only while no BMv2 process holds them,
        since a running switch whose own interface flaps stops forwarding on all its
        ports (link faults use `drop_sent` instead)."""
        for _, intf in self.port_intfs():
            subprocess.run(["ip", "link", "set", intf, "up" if up else "down"], check=True)

    def drop_sent(self, intf: str, on: bool) -> None:
        """Drop everything the switch sends on port `intf` (a root queue that holds no
        packet), or stop: a dead link or a blackhole, with the port left up."""
        command = (["tc", "qdisc", "replace", "dev", intf, "root", "pfifo", "limit", "0"]
                   if on else ["tc", "qdisc", "del", "dev", intf, "root"])
        subprocess.run(command, check=on, capture_output=True)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's signature
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        super().stop(deleteIntfs)
