"""p4runtime-shell on a switch of a running BMv2 fabric: read-only, or writing by hand.

`python3 -m experiments.interactive.p4shell --switch p0t0r0` (or `make p4shell SWITCH=p0t0r0`, or
`p4shell p0t0r0` in `make cli`) opens p4lang's p4runtime-shell (an IPython shell with
`table_entry`, `counter_entry`, `direct_counter_entry`, `p4info`...) on that switch:

    P4Runtime sh >>> for e in table_entry["MrcIngress.my_usid"].read(): print(e)

Read-only (the default), the session never takes part in the P4Runtime arbitration:
it opens no StreamChannel, so the switch never counts it as a controller, primary or
backup. Reads (Read, GetForwardingPipelineConfig, Capabilities) need no arbitration;
writes, pipeline pushes and packet-out are refused here, before any request leaves,
with `ReadOnlyError` (the switch would refuse them too: a client that never arbitrated
is not primary). The testbed's own controller (controller/program.py) stays the only
writer, and the tables it wrote once stay as they are.

With `--write` (`p4shell p0t0r0 write` in `make cli`; the P4Runtime lab, labs/lab07_*)
the session arbitrates as primary with WRITER_ELECTION_ID, above the controller's, so
`te.insert()`, `modify()` and `delete()` reach the switch; pushing a pipeline stays
refused (it would wipe every table). Writing is only for a fabric this session's user
owns: the machine's fabric lock (experiments/run/fabric_lock.py) must be held by this
process or by the one that started it (`make cli`, or a lab check that built its own
fabric), so a shell cannot rewrite the tables under someone else's run.

The switch is found among the running `simple_switch_grpc` processes: each one's
command line (topologies/bmv2.py starts it) holds its device id, its gRPC address and
its log file, which is named after the switch. So the shell reaches the fabric that is
actually running, whichever topology or command started it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from topologies.errors import UserError

SWITCH_PROGRAM = "simple_switch_grpc"
# A writing shell's election id (high, low): above the controller's (1) and the
# counter reads' (2), which have closed their sessions by the time a student writes.
WRITER_ELECTION_ID = (0, 10)


class ReadOnlyError(RuntimeError):
    """A write was asked of a read-only P4Runtime session."""


class SwitchNotRunning(UserError):
    """The named switch is not running on this machine."""


class WriteRefused(UserError):
    """A writing session was asked for on a fabric this process does not own."""


def may_write(holder_pid: int | None, pid: int, parent: int) -> bool:
    """Whether a process (`pid`, started by `parent`) may write to the fabric whose lock
    `holder_pid` holds: only the lock's holder, or the shell it started."""
    return holder_pid is not None and holder_pid in (pid, parent)


def require_fabric_lock() -> None:
    """Raise WriteRefused unless this process or its parent holds the fabric lock."""
    from experiments.run.fabric_lock import Holder, lock_path

    try:
        holder = Holder.parse(lock_path().read_text())
    except OSError:
        holder = None
    if not may_write(holder.pid if holder else None, os.getpid(), os.getppid()):
        who = holder.describe() if holder else "nobody"
        raise WriteRefused("p4shell", "--write", f"the fabric lock is held by {who}, not by "
                           "this shell's own fabric", "write from inside `make cli` (p4shell "
                           "<switch> write), which holds the lock of the fabric it built")


@dataclass(frozen=True)
class RunningSwitch:
    name: str
    device_id: int
    grpc_address: str
    pid: int


def parse_switch_argv(argv: list[str], pid: int = 0) -> RunningSwitch | None:
    """A running switch from the command line of a simple_switch_grpc process, or None
    when it is another program or lacks a device id, a gRPC address or a log file."""
    if not argv or os.path.basename(argv[0]) != SWITCH_PROGRAM:
        return None
    values = {}
    for flag, value in zip(argv, argv[1:]):
        if flag in ("--device-id", "--grpc-server-addr", "--log-file"):
            values[flag] = value
    try:
        return RunningSwitch(Path(values["--log-file"]).name, int(values["--device-id"]),
                             values["--grpc-server-addr"], pid)
    except (KeyError, ValueError):
        return None


def running_switches(proc: Path = Path("/proc")) -> dict[str, RunningSwitch]:
    """Every BMv2 switch running on this machine, by name."""
    found = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:  # the process ended while we looked
            continue
        switch = parse_switch_argv(raw.decode(errors="replace").split("\0"), int(entry.name))
        if switch is not None:
            found[switch.name] = switch
    return found


def find_switch(name: str, source: str = "--switch") -> RunningSwitch:
    switches = running_switches()
    if name in switches:
        return switches[name]
    running = ", ".join(sorted(switches)) or "none"
    raise SwitchNotRunning(source, name, f"no BMv2 switch of that name is running "
                           f"(running: {running})",
                           "start a fabric on BMv2 first (make cli DATAPLANE=bmv2) and name "
                           "one of its switches")


def _client_class(write: bool = False):
    """p4runtime-shell's client: without the arbitration and refusing every write, or
    (`write`) arbitrating as primary and refusing only a pipeline push. Imported on use:
    the shell pulls in IPython, which the rest of the testbed does not need."""
    import grpc
    from p4.v1 import p4runtime_pb2_grpc
    from p4runtime_sh.p4runtime import P4RuntimeClient

    class NoStream:
        """Where the shell would queue stream messages (packet-out): there is no stream."""

        def put(self, message):
            raise ReadOnlyError("this p4runtime-shell session has no stream channel: "
                                "no packet-out")

    class ReadOnlyClient(P4RuntimeClient):
        """A P4RuntimeClient that opens no stream and refuses every write."""

        def __init__(self, device_id, grpc_addr, election_id=None, role_name=None,
                     ssl_options=None):
            # Not the parent's __init__: it opens the StreamChannel and arbitrates.
            self.device_id, self.role_name, self.election_id = device_id, None, (0, 0)
            self.stream_out_q = NoStream()
            self.channel = grpc.insecure_channel(grpc_addr)
            self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)

        def _refuse(self, *args, **kwargs):
            raise ReadOnlyError("this p4runtime-shell session is read-only: the testbed's "
                                "controller writes every table once, at start-up")

        write = write_update = set_fwd_pipe_config = _refuse

        def get_stream_packet(self, type_, timeout=1):
            # No stream, so never a packet-in, digest or idle timeout: the shell's
            # receiver threads end at once, as they do when a session closes.
            return None

        def tear_down(self):
            self.channel.close()

    class WriterClient(P4RuntimeClient):
        """The shell's own client, primary by WRITER_ELECTION_ID, that never pushes a
        pipeline (the switch would drop every table the controller wrote)."""

        def __init__(self, device_id, grpc_addr, election_id=None, role_name=None,
                     ssl_options=None):
            super().__init__(device_id, grpc_addr, WRITER_ELECTION_ID, role_name,
                             ssl_options)

        def set_fwd_pipe_config(self, *args, **kwargs):
            raise ReadOnlyError("this p4runtime-shell session writes table entries, not "
                                "a pipeline: the switch keeps its P4 program")

    return WriterClient if write else ReadOnlyClient


def connect(switch: RunningSwitch, write: bool = False):
    """Make p4runtime-shell's module-level session one on `switch` (what
    `p4runtime_sh.shell.setup()` does, minus the pipeline push): read-only, or writing
    (`write`; the caller owns the fabric, require_fabric_lock). Returns the shell
    module; `disconnect()` closes the session."""
    from p4runtime_sh import shell

    client = _client_class(write)(switch.device_id, switch.grpc_address)
    try:
        shell.context.set_p4info(client.get_p4info())
    except BaseException:
        client.tear_down()
        raise
    shell.client = client
    return shell


def disconnect() -> None:
    from p4runtime_sh import shell

    if shell.client is not None:
        shell.teardown()


def interactive(switch: RunningSwitch, write: bool = False) -> None:
    """Run p4runtime-shell's own interactive shell on `switch`, read-only or writing."""
    from p4runtime_sh import shell

    # shell.main() builds its session with setup(), which makes its client from this
    # module-level name: give it ours. No pipeline config is passed, so setup() only
    # reads the P4Info from the switch.
    shell.P4RuntimeClient = _client_class(write)
    mode = ("WRITING: te.insert(), modify() and delete() change the switch's tables"
            if write else "read-only: the switch keeps the controller's tables")
    print(f"p4runtime-shell on {switch.name} (device {switch.device_id}, "
          f"{switch.grpc_address}), {mode}")
    sys.argv = ["p4runtime-sh", "--grpc-addr", switch.grpc_address,
                "--device-id", str(switch.device_id)]
    shell.main()


def main(argv: list[str] | None = None) -> int:
    # Ctrl-C belongs to IPython here (it abandons the line being typed). Started by the
    # CLI, which ignores Ctrl-C while we run, this process inherited SIGINT ignored;
    # Python installs its KeyboardInterrupt handler only where SIGINT is not ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = argparse.ArgumentParser(
        prog="python3 -m experiments.interactive.p4shell",
        description="Open p4runtime-shell on a switch of the running BMv2 fabric, "
                    "read-only unless --write.")
    parser.add_argument("--switch", required=True, help="switch name, e.g. p0t0r0")
    parser.add_argument("--write", action="store_true",
                        help="write table entries by hand (only inside `make cli`, which "
                             "holds the fabric lock)")
    args = parser.parse_args(argv)
    try:
        if args.write:
            require_fabric_lock()
        switch = find_switch(args.switch, "SWITCH")
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    interactive(switch, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
