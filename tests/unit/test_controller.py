"""The P4Runtime controller against an in-process fake P4Runtime server.

The fake server answers arbitration, records every request and serves reads from what
was written, so the tests can assert on the exact WriteRequests a switch receives.
"""

from __future__ import annotations

from concurrent import futures
from pathlib import Path

import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from controller.bmv2_entries import table_entries
from controller.p4info import P4Info, P4InfoError, encode
from controller.p4runtime_session import P4RuntimeError, SwitchSession
from controller.program import program_switch
from controller.tables import all_tables
from topologies.model import load_topology

P4INFO = P4Info.load(Path(__file__).parent / "fixtures" / "mrc_switch.p4info.txtpb")


class FakeP4Runtime(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self, drop_writes: int = 0):
        self.writes: list[p4runtime_pb2.WriteRequest] = []
        self.pipelines: list[p4runtime_pb2.SetForwardingPipelineConfigRequest] = []
        self.entries: list[p4runtime_pb2.TableEntry] = []
        self.arbitrations: list = []
        self.drop_writes = drop_writes  # pretend to lose this many entries

    def Capabilities(self, request, context):
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version="1.4.1")

    def StreamChannel(self, request_iterator, context):
        for request in request_iterator:
            if request.HasField("arbitration"):
                self.arbitrations.append(request.arbitration)
                response = p4runtime_pb2.StreamMessageResponse()
                response.arbitration.CopyFrom(request.arbitration)
                response.arbitration.status.code = 0
                yield response

    def SetForwardingPipelineConfig(self, request, context):
        self.pipelines.append(request)
        self.entries = []
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def Write(self, request, context):
        self.writes.append(request)
        kept = request.updates[: len(request.updates) - self.drop_writes]
        self.entries.extend(u.entity.table_entry for u in kept)
        return p4runtime_pb2.WriteResponse()

    def Read(self, request, context):
        response = p4runtime_pb2.ReadResponse()
        for entry in self.entries:
            response.entities.add().table_entry.CopyFrom(entry)
        yield response


@pytest.fixture
def fake():
    servicer = FakeP4Runtime()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(0)


@pytest.fixture(scope="module")
def tables():
    return all_tables(load_topology("2tier-2plane"))


def test_encoding_is_canonical():
    assert encode(0, 9) == b"\x00" and encode(3, 9) == b"\x03" and encode(256, 9) == b"\x01\x00"
    assert encode(0xFCBBBB00, 32) == bytes.fromhex("fcbbbb00")
    with pytest.raises(ValueError):
        encode(512, 9)


def test_entries_for_a_t0_by_hand(tables):
    t0 = tables["p0t0r0"]
    entries = table_entries(P4INFO, t0)
    # my-SID, 4 routes, per port its settings and its PFC thresholds, 8 classes
    assert len(entries) == t0.entry_count == 1 + 4 + 2 * 4 + 8
    my = entries[0]
    assert my.table_id == P4INFO.table("MrcIngress.my_usid").preamble.id
    assert my.action.action.action_id == P4INFO.action("MrcIngress.usid_shift").preamble.id
    assert [m.exact.value for m in my.match] == [bytes.fromhex("fcbbbb00"),
                                                  bytes.fromhex("1000")]
    route = entries[3]  # to T1 plane 0 spine 0, uplink port 2
    assert [m.exact.value for m in route.match][1] == bytes.fromhex("2000")
    assert [p.value for p in route.action.action.params] == [
        b"\x02", bytes.fromhex("020020000000")]
    # Port 0 faces h0: host-facing; RED from 3 to 9 packets (the slope is 2^16 / 6, in
    # 1/2^32), the last hop's trim threshold 18 (2tier-2plane's BDP is 12 frames:
    # topologies/scale.py), trim size 94, TRIMMED_LASTHOP's DSCP 55, a queue of 64 and
    # 881 trimmed headers; PFC 16 / 8.
    host_port, pfc = entries[5], entries[6]
    assert [m.exact.value for m in host_port.match] == [b"\x00"]
    assert [p.value for p in host_port.action.action.params] == [
        bytes.fromhex("020010000000"), b"\x01", b"\x03", b"\x09",
        (65536 * 65536 // 6).to_bytes(4, "big").lstrip(b"\x00"), b"\x12", b"\x5e", b"\x37",
        b"\x40", bytes.fromhex("0371")]
    assert pfc.table_id == P4INFO.table("MrcIngress.pfc_config").preamble.id
    assert [p.value for p in pfc.action.action.params] == [b"\x10", b"\x08"]
    classes = {e.match[0].exact.value: e.action.action.params[0].value for e in entries[-8:]}
    assert classes[bytes([46])] == bytes([2]) and classes[bytes([26])] == bytes([3])


def test_unknown_names_raise_clear_errors():
    with pytest.raises(P4InfoError, match="no table 'MrcIngress.nope'.*MrcIngress.my_usid"):
        P4INFO.table("MrcIngress.nope")
    with pytest.raises(P4InfoError, match="has no parameter 'vlan'"):
        P4INFO.param("MrcIngress.set_next_hop", "vlan")


def test_program_switch_writes_one_batch_and_reads_it_back(fake, tables):
    servicer, address = fake
    result = program_switch(address, 3, P4INFO, b'{"program": "json"}', tables["p1t1s0"])
    assert result.write_batches == 1 and result.entries == tables["p1t1s0"].entry_count
    assert len(servicer.writes) == 1  # the switch's whole static state in one request
    (write,) = servicer.writes
    assert write.device_id == 3 and write.election_id.low == 1
    assert all(u.type == p4runtime_pb2.Update.INSERT for u in write.updates)
    expected = table_entries(P4INFO, tables["p1t1s0"])
    assert [u.entity.table_entry for u in write.updates] == expected
    (pipeline,) = servicer.pipelines
    assert pipeline.action == p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
    assert pipeline.config.p4_device_config == b'{"program": "json"}'
    assert pipeline.config.p4info == P4INFO.info
    assert servicer.arbitrations[0].device_id == 3


def test_every_switch_gets_exactly_one_write_batch(fake, tables):
    servicer, address = fake
    for device_id, switch_tables in enumerate(tables.values()):
        program_switch(address, device_id, P4INFO, b"{}", switch_tables)
    assert len(servicer.writes) == len(tables) == 8
    assert sum(len(w.updates) for w in servicer.writes) == sum(
        t.entry_count for t in tables.values())


def test_reboot_gets_the_same_entries_again(fake, tables):
    servicer, address = fake
    program_switch(address, 1, P4INFO, b"{}", tables["p0t1s1"])
    program_switch(address, 1, P4INFO, b"{}", tables["p0t1s1"])
    assert servicer.writes[0] == servicer.writes[1]


def test_read_back_catches_lost_entries(tables):
    servicer = FakeP4Runtime(drop_writes=1)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with pytest.raises(P4RuntimeError, match="1 missing"):
            program_switch(f"127.0.0.1:{port}", 1, P4INFO, b"{}", tables["p0t0r1"])
    finally:
        server.stop(0)


def test_switch_that_never_answers_fails_in_one_line(tmp_path):
    log = tmp_path / "p4rt.log"
    with pytest.raises(P4RuntimeError, match=r"did not answer P4Runtime within 0.5s"):
        with SwitchSession("127.0.0.1:1", 7, log_path=log, timeout_s=0.5):
            pass


def test_requests_are_logged(fake, tables, tmp_path):
    _, address = fake
    log = tmp_path / "p4rt.log"
    program_switch(address, 2, P4INFO, b"{}", tables["p0t0r0"], log_path=log)
    text = log.read_text()
    for what in ("CapabilitiesResponse", "StreamMessageRequest",
                 "SetForwardingPipelineConfigRequest", "WriteRequest", "ReadRequest"):
        assert what in text
