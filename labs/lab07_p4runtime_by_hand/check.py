"""Check Lab 07: one switch's forwarding entries, written by hand with p4runtime-shell.

The student's `entries.py` holds the p4runtime-shell lines (`table_entry[...]`,
`.match[...]`, `.insert()`) that write the `my_usid` and `next_hop` entries of T1
p0t1s1 of 2tier-2plane, the lines they typed in `p4shell p0t1s1 write` in `make cli`.

1. The file is the student's own: it imports nothing (no table taken from controller/).
2. Sandbox: the lines run in p4runtime-shell's write mode (experiments/interactive/p4shell.py)
   against an in-process P4Runtime switch (`RecordingSwitch`) with the project's P4Info;
   the entries it holds afterwards, read back over P4Runtime, must be exactly the
   controller's for that switch (controller/bmv2_entries.py), compared field by field
   by name (`entry_facts`), so a wrong port or MAC is named.
3. Fabric (root and BMv2; otherwise "not verified: needs BMv2"): 2tier-2plane is built on
   BMv2 behind the fabric lock as a run builds it (experiments/run/lifecycle.py), p0t1s1's
   forwarding entries are deleted, the student's lines write them again on the real
   switch, they are read back, and a datagram goes along every path of the fabric
   (experiments/run/checks.py): every path through p0t1s1 must arrive.
"""

from __future__ import annotations

import ast
import os
import shutil
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

from labs.course import REPO, Report, first_line

LAB_SWITCH = "p0t1s1"
TOPOLOGY = "2tier-2plane"
ENTRIES = "entries.py"
NOT_VERIFIED = "not verified: needs BMv2"


def add_arguments(parser) -> None:
    parser.add_argument("--offline", action="store_true",
                        help="the sandbox only: no fabric (the lab is then not verified)")


# ------------------------------------------------------------------ the student's file
def own_work(path: Path) -> str | None:
    """Why entries.py is not typed by hand (it imports something), or None."""
    try:
        tree = ast.parse(path.read_text())
    except SyntaxError as err:
        return f"entries.py is not Python: {err.msg} (line {err.lineno})"
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return ("entries.py imports a module: write each entry's values by hand, as "
                    "you type them in p4runtime-shell (`tables p0t1s0` in make cli shows "
                    "a sibling's entries)")
    return None


def replay(path: Path, shell) -> None:
    """Run the student's p4runtime-shell lines with the names the shell gives them."""
    from p4runtime_sh.context import P4RuntimeEntity, P4Type
    from p4runtime_sh.shell import P4RuntimeEntityBuilder, TableEntry

    names = {"table_entry": P4RuntimeEntityBuilder(P4Type.table,
                                                    P4RuntimeEntity.table_entry, TableEntry),
             "TableEntry": TableEntry, "p4info": shell.context.p4info}
    # Interactive, the shell prints each message as it is built; replayed, that is noise.
    verbose = shell.global_options["verbose"]
    shell.global_options["verbose"] = False
    try:
        exec(compile(path.read_text(), str(path), "exec"), names)  # noqa: S102 - the lab's input
    finally:
        shell.global_options["verbose"] = verbose


# ------------------------------------------------------------------ comparing entries
def entry_facts(p4info, entry) -> tuple:
    """A table entry by names and integers: (table, ((field, value)...), action,
    ((param, value)...)), whatever byte widths encoded it."""
    table = next(t for t in p4info.info.tables if t.preamble.id == entry.table_id)
    fields = {f.id: f.name for f in table.match_fields}
    action = next(a for a in p4info.info.actions
                  if a.preamble.id == entry.action.action.action_id)
    params = {p.id: p.name for p in action.params}
    return (table.preamble.name,
            tuple(sorted((fields[m.field_id], int.from_bytes(m.exact.value, "big"))
                         for m in entry.match)),
            action.preamble.name,
            tuple(sorted((params[p.param_id], int.from_bytes(p.value, "big"))
                         for p in entry.action.action.params)))


def expected_entries(p4info) -> list:
    """The controller's my_usid and next_hop entries of the lab's switch."""
    from controller.bmv2_entries import MY_USID, NEXT_HOP, table_entries
    from controller.tables import switch_tables
    from topologies.model import load_topology

    fabric = load_topology(TOPOLOGY)
    ids = {p4info.table(name).preamble.id for name in (MY_USID, NEXT_HOP)}
    return [e for e in table_entries(p4info, switch_tables(fabric, fabric.node(LAB_SWITCH)))
            if e.table_id in ids]


def compare(p4info, got: list) -> str | None:
    """What is wrong with the entries read back from the switch, or None."""
    want = {entry_facts(p4info, e) for e in expected_entries(p4info)}
    have = [entry_facts(p4info, e) for e in got]
    missing = sorted(want - set(have))
    extra = sorted(set(have) - want)
    if not missing and not extra and len(have) == len(want):
        return None

    def show(facts: tuple) -> str:
        table, match, action, params = facts
        return (f"{table.split('.')[-1]} {dict((k, hex(v)) for k, v in match)} -> "
                f"{action.split('.')[-1]}{dict((k, hex(v)) for k, v in params)}")

    lines = [f"missing: {show(f)}" for f in missing[:4]]
    lines += [f"not expected: {show(f)}" for f in extra[:4]]
    return "\n".join(lines) or f"{len(have)} entries where {len(want)} are expected"


def read_forwarding(shell, p4info) -> list:
    from controller.bmv2_entries import MY_USID, NEXT_HOP

    return [e.msg() for name in (MY_USID, NEXT_HOP) for e in shell.TableEntry(name).read()]


# ------------------------------------------------------------------ the sandbox switch
def _recording_switch_class():
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

    class RecordingSwitch(p4runtime_pb2_grpc.P4RuntimeServicer):
        """An in-process P4Runtime switch: arbitration, P4Info, and the table entries
        written (insert, modify, delete), served back on Read."""

        def __init__(self, p4info_message):
            self.p4info = p4info_message
            self.entries: dict[bytes, p4runtime_pb2.TableEntry] = {}
            self.writes: list = []

        def Capabilities(self, request, context):  # noqa: N802 - gRPC names
            return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version="1.3.0")

        def StreamChannel(self, request_iterator, context):  # noqa: N802
            for request in request_iterator:
                if request.HasField("arbitration"):
                    response = p4runtime_pb2.StreamMessageResponse()
                    response.arbitration.CopyFrom(request.arbitration)
                    response.arbitration.status.code = 0
                    yield response

        def GetForwardingPipelineConfig(self, request, context):  # noqa: N802
            reply = p4runtime_pb2.GetForwardingPipelineConfigResponse()
            reply.config.p4info.CopyFrom(self.p4info)
            return reply

        def Write(self, request, context):  # noqa: N802
            import grpc

            for update in request.updates:
                entry = update.entity.table_entry
                key = p4runtime_pb2.TableEntry(table_id=entry.table_id, match=entry.match,
                                               priority=entry.priority)
                key = key.SerializeToString(deterministic=True)
                exists = key in self.entries
                if (update.type == p4runtime_pb2.Update.INSERT) == exists:
                    context.abort(grpc.StatusCode.ALREADY_EXISTS if exists
                                  else grpc.StatusCode.NOT_FOUND, "entry")
                if update.type == p4runtime_pb2.Update.DELETE:
                    del self.entries[key]
                else:
                    self.entries[key] = entry
                self.writes.append(update)
            return p4runtime_pb2.WriteResponse()

        def Read(self, request, context):  # noqa: N802
            wanted = {e.table_entry.table_id for e in request.entities}
            reply = p4runtime_pb2.ReadResponse()
            for entry in self.entries.values():
                if 0 in wanted or entry.table_id in wanted:
                    reply.entities.add().table_entry.CopyFrom(entry)
            yield reply

    return RecordingSwitch


@contextmanager
def sandbox(p4info) -> Iterator[tuple[object, object]]:
    """(RecordingSwitch, RunningSwitch) of an in-process P4Runtime switch."""
    import grpc
    from p4.v1 import p4runtime_pb2_grpc

    from experiments.interactive.p4shell import RunningSwitch

    servicer = _recording_switch_class()(p4info.info)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer, RunningSwitch(LAB_SWITCH, 1, f"127.0.0.1:{port}", 0)
    finally:
        server.stop(None)


def p4info_path() -> Path:
    """The project's P4Info (compiled by p4c-bm2-ss into build/ if need be)."""
    from experiments.dataplanes.bmv2_target import compile_program

    return compile_program(REPO / "build")[0]


# ------------------------------------------------------------------ the check
def check(folder: Path, options=None) -> Report:
    from controller.p4info import P4Info
    from experiments.interactive.p4shell import connect, disconnect

    report = Report(f"Lab 07: P4Runtime by hand, {LAB_SWITCH} of {TOPOLOGY} ({folder})")
    path = folder / ENTRIES
    if not report.add(path.is_file(), f"{ENTRIES} exists", "copy it back from skeleton/"):
        return report
    report.note_todo(ENTRIES, path.read_text())  # a "TODO" value fails the replay below
    borrowed = own_work(path)
    if not report.add(borrowed is None, f"{ENTRIES} is typed by hand", borrowed or ""):
        return report
    if shutil.which("p4c-bm2-ss") is None:
        report.add(False, f"the entries in a sandbox switch: {NOT_VERIFIED} and p4c",
                   "p4c-bm2-ss gives the program's P4Info: `make deps-p4`, or the VM")
        return report
    p4info = P4Info.load(p4info_path())
    with sandbox(p4info) as (_, switch):
        try:
            shell = connect(switch, write=True)
            try:
                replay(path, shell)
                problem = compare(p4info, read_forwarding(shell, p4info))
            finally:
                disconnect()
        except Exception as err:  # noqa: BLE001 - the student's lines may raise anything
            problem = first_line(err)
    report.add(problem is None, f"in a sandbox switch, {ENTRIES} writes exactly "
               f"{LAB_SWITCH}'s my_usid and next_hop entries", problem or "")
    if problem is not None:
        return report
    if getattr(options, "offline", False):
        report.add(False, f"on a BMv2 fabric: {NOT_VERIFIED}", "--offline: run the check "
                   "without it, as root where BMv2 is installed")
        return report
    missing = fabric_missing()
    if missing:
        report.add(False, f"on a BMv2 fabric: {NOT_VERIFIED}", missing)
        return report
    try:
        report.add(*on_fabric(path))
    except Exception as err:  # noqa: BLE001 - one line; the lifecycle tore the fabric down
        report.add(False, "on a BMv2 fabric", first_line(err))
    return report


def fabric_missing() -> str | None:
    """Why the fabric part cannot run here, or None."""
    if shutil.which("simple_switch_grpc") is None:
        return "simple_switch_grpc is not installed (`make deps-p4`, or the Vagrant VM)"
    if os.geteuid() != 0:
        return "building a fabric needs root: `sudo make lab-check LAB=07`"
    return None


def judge_paths(failed: list, checked: int) -> tuple[bool, str, str]:
    """(right, what, hint) for the path check after the student's entries."""
    through = [p for p in failed if p.plane == 0 and p.spine == 1]
    others = [p for p in failed if p not in through]
    what = f"on a BMv2 fabric: every path through {LAB_SWITCH} carries a datagram"
    if through:
        return False, what, (f"{len(through)} paths through {LAB_SWITCH} lost their "
                             f"datagram, e.g. {through[0].label}")
    if others:
        return False, what, (f"{len(others)} other paths failed too (e.g. "
                             f"{others[0].label}): the fabric itself is not healthy")
    return True, f"{what} ({checked} paths checked)", ""


def on_fabric(path: Path) -> tuple[bool, str, str]:
    """Build 2tier-2plane on BMv2 (behind the fabric lock), empty the lab switch's
    forwarding tables, write the student's entries, read them back, send datagrams."""
    from controller.bmv2_entries import MY_USID, NEXT_HOP
    from controller.p4info import P4Info
    from experiments.interactive.p4shell import connect, disconnect, find_switch
    from experiments.run.checks import check_paths
    from experiments.run.lifecycle import Run
    from topologies.model import load_topology

    run = Run.prepare("lab07", load_topology(TOPOLOGY), "bmv2")
    outcome = None
    with run:  # an error inside is reported by the run (run.error), the fabric torn down
        network = run.up()
        p4info = P4Info.load(network.target.p4info_path)
        shell = connect(find_switch(LAB_SWITCH), write=True)  # we hold the fabric lock
        try:
            for table in (MY_USID, NEXT_HOP):  # the lab's switch, as the student found it
                shell.TableEntry(table).read(function=lambda entry: entry.delete())
            replay(path, shell)
            problem = compare(p4info, read_forwarding(shell, p4info))
        finally:
            disconnect()
        if problem is not None:
            outcome = (False, f"on {LAB_SWITCH} of a BMv2 fabric, the entries read back",
                       problem)
        else:
            result = check_paths(network.net, network.fabric, copies=1, timeout_s=2.0)
            outcome = judge_paths(result.failed, result.checked)
        run.status = 0
    return outcome or (False, "on a BMv2 fabric", run.error or "interrupted")
