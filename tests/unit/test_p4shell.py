"""The read-only p4runtime-shell session, against an in-process P4Runtime server.

The server holds one `my_usid` entry and records every RPC. The session must read the
entry with the shell's own syntax, never open the stream channel (so it never takes
part in arbitration) and refuse writes before any Write request reaches the server.
Finding a running switch from a simple_switch_grpc command line is tested on the
command line topologies/bmv2.py builds.
"""

from __future__ import annotations

from concurrent import futures

import grpc
import pytest
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from experiments.interactive.p4shell import (
    ReadOnlyError,
    RunningSwitch,
    SwitchNotRunning,
    connect,
    disconnect,
    find_switch,
    parse_switch_argv,
)

TABLE, TABLE_ID, ACTION_ID = "MrcIngress.my_usid", 0x02000001, 0x01000001


def _p4info() -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    table = info.tables.add()
    table.preamble.id, table.preamble.name, table.preamble.alias = TABLE_ID, TABLE, "my_usid"
    for i, (name, width) in enumerate((("hdr.ipv6.dst_block", 32),
                                       ("hdr.ipv6.dst_active", 16)), start=1):
        field = table.match_fields.add(id=i, name=name, bitwidth=width)
        field.match_type = p4info_pb2.MatchField.EXACT
    table.action_refs.add(id=ACTION_ID)
    action = info.actions.add()
    action.preamble.id, action.preamble.name = ACTION_ID, "MrcIngress.usid_shift"
    action.preamble.alias = "usid_shift"
    return info


def _entry() -> p4runtime_pb2.TableEntry:
    entry = p4runtime_pb2.TableEntry(table_id=TABLE_ID)
    entry.match.add(field_id=1).exact.value = bytes.fromhex("fcbbbb00")
    entry.match.add(field_id=2).exact.value = bytes.fromhex("1000")
    entry.action.action.action_id = ACTION_ID
    return entry


class FakeSwitch(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self):
        self.calls: list[str] = []

    def GetForwardingPipelineConfig(self, request, context):  # noqa: N802 - gRPC names
        self.calls.append("GetForwardingPipelineConfig")
        reply = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        reply.config.p4info.CopyFrom(_p4info())
        return reply

    def Read(self, request, context):  # noqa: N802
        self.calls.append("Read")
        reply = p4runtime_pb2.ReadResponse()
        reply.entities.add().table_entry.CopyFrom(_entry())
        yield reply

    def Write(self, request, context):  # noqa: N802
        self.calls.append("Write")
        return p4runtime_pb2.WriteResponse()

    def StreamChannel(self, request_iterator, context):  # noqa: N802
        self.calls.append("StreamChannel")
        for _ in request_iterator:
            pass
        return iter(())


@pytest.fixture
def fake_switch():
    servicer = FakeSwitch()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer, RunningSwitch("p0t0r0", 1, f"127.0.0.1:{port}", 0)
    finally:
        disconnect()
        server.stop(None)


def test_reads_the_my_usid_entry_without_arbitration(fake_switch):
    servicer, switch = fake_switch
    shell = connect(switch)
    entries = list(shell.TableEntry(TABLE).read())
    assert len(entries) == 1
    assert entries[0].msg() == _entry()
    assert servicer.calls == ["GetForwardingPipelineConfig", "Read"]


def test_writes_are_refused_before_they_reach_the_switch(fake_switch):
    servicer, switch = fake_switch
    shell = connect(switch)
    entry = shell.TableEntry(TABLE)(action="usid_shift")
    entry.match["hdr.ipv6.dst_block"] = "0xfcbbbb00"
    entry.match["hdr.ipv6.dst_active"] = "0x1001"
    for write in (entry.insert, entry.modify, entry.delete):
        with pytest.raises(ReadOnlyError):
            write()
    with pytest.raises(ReadOnlyError):
        shell.client.stream_out_q.put("a packet-out")
    assert "Write" not in servicer.calls and "StreamChannel" not in servicer.calls


def test_a_switch_is_found_from_its_command_line():
    # The command line topologies/bmv2.py gives each switch (Bmv2Switch.start).
    argv = ["/usr/bin/simple_switch_grpc", "--device-id", "3", "--thrift-port", "9093",
            "--log-file", "build/logs/p0t1s0", "--log-level", "info", "-i", "0@p0t1s0-eth0",
            "build/mrc_switch.json", "--", "--grpc-server-addr", "127.0.0.1:50003",
            "--priority-queues", "8"]
    assert parse_switch_argv(argv, 42) == RunningSwitch("p0t1s0", 3, "127.0.0.1:50003", 42)
    assert parse_switch_argv(["/usr/bin/python3", "-m", "hosts.agent"]) is None
    assert parse_switch_argv(argv[:3]) is None  # no gRPC address, no log file


def test_a_switch_that_is_not_running_is_one_line_naming_the_fix():
    with pytest.raises(SwitchNotRunning) as err:
        find_switch("p9t0r9", "SWITCH")
    line = str(err.value)
    assert "\n" not in line and line.startswith("SWITCH: p9t0r9: no BMv2 switch")
    assert "fix: start a fabric on BMv2" in line


def test_writing_is_for_the_fabric_lock_holder_and_the_shell_it_started():
    # The writing session itself is exercised on a sandbox switch by Lab 07's check
    # (tests/unit/test_lab_shortcuts.py): its entries are read back from the switch.
    from experiments.interactive.p4shell import may_write

    assert may_write(100, pid=100, parent=1)  # a lab check that built its own fabric
    assert may_write(100, pid=200, parent=100)  # `p4shell s write` started by make cli
    assert not may_write(100, pid=200, parent=300)  # someone else's fabric
    assert not may_write(None, pid=200, parent=100)  # no fabric at all
