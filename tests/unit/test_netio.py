"""The traffic classes each transport sends in, on real UDP sockets over the loopback.

No root is needed: two IPv6 UDP sockets on ::1, the sender set up by the agent's own
function (hosts/netio.py set_traffic_class, and the ancillary data of another class),
the receiver reading the traffic class of each datagram (IPV6_RECVTCLASS) as the agent
does.
"""

from __future__ import annotations

import select
import socket

import pytest

from hosts import protocol
from hosts.netio import received_traffic_class, set_traffic_class, traffic_class_cmsg

DSCP = protocol.DEFAULT_DSCP


def test_each_transport_has_the_classes_of_its_switch_rules():
    specs = {t: protocol.transport_spec(t) for t in protocol.TRANSPORTS}
    assert specs["mrc"].data_class == specs["mrc-no-probe"].data_class == protocol.TRIMMABLE
    assert specs["mrc"].retransmit_class == protocol.TRIMMABLE_RETX
    assert specs["mrc-no-trim"].data_class == specs["mrc-no-trim"].retransmit_class == \
        protocol.NO_TRIM
    # The baseline is RoCE: its own lossless class, marked at every hop; its acks too.
    for name in ("single-path", "roce-8", "roce-16-pfc@planes"):
        assert specs[name].data_class == specs[name].control_class == protocol.ROCE
    assert specs["mrc"].control_class == protocol.CONTROL
    # Every class has a DSCP of its own, and a switch rule.
    assert len(set(DSCP)) == len(DSCP) == len(protocol.CLASS_NAMES)
    assert len(protocol.CLASS_BEHAVIOUR) == len(DSCP)


@pytest.fixture
def receiver():
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        sock.bind(("::1", 0))
    except OSError as err:
        pytest.skip(f"no IPv6 loopback here: {err}")
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
    yield sock
    sock.close()


def arrived_class(receiver: socket.socket) -> int | None:
    assert select.select([receiver], [], [], 2.0)[0], "nothing arrived on ::1"
    _, ancdata, _, _ = receiver.recvmsg(2048, socket.CMSG_SPACE(4))
    return received_traffic_class(ancdata)


@pytest.mark.parametrize("transport", protocol.TRANSPORTS)
def test_a_socket_sends_data_and_other_classes_with_their_dscp(receiver, transport):
    spec = protocol.transport_spec(transport)
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sender:
        set_traffic_class(sender, DSCP[spec.data_class])
        target = receiver.getsockname()[:2]
        sender.sendto(b"data", target)
        ect0 = protocol.ECN_ECT0  # everything ECT(0): switches mark rather than drop
        assert arrived_class(receiver) == protocol.traffic_class(DSCP[spec.data_class], ect0)
        for cls in (spec.retransmit_class, spec.control_class, protocol.ROCE_CNP):
            tclass = protocol.traffic_class(DSCP[cls], ect0)
            sender.sendmsg([b"other"], traffic_class_cmsg(tclass), 0, target)
            assert arrived_class(receiver) == tclass
