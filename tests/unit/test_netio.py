"""The traffic class each transport asks for, on real UDP sockets over the loopback.

No root is needed: two IPv6 UDP sockets on ::1, the sender set up by the agent's own
function (hosts/netio.py set_traffic_classes), the receiver reading the traffic class of
each datagram (IPV6_RECVTCLASS) as the agent does.
"""

from __future__ import annotations

import select
import socket

import pytest

from hosts import protocol
from hosts.netio import received_traffic_class, set_traffic_classes


def test_mrc_data_is_trimmable_and_mrc_no_trim_data_is_not():
    classes = {t: protocol.data_traffic_class(t) for t in protocol.TRANSPORTS}
    assert classes["mrc"] >> 2 == classes["mrc-no-probe"] >> 2 == protocol.DSCP_TRIMMABLE
    assert classes["mrc-no-trim"] >> 2 == protocol.DSCP_NO_TRIM
    # The baseline is RoCE: its own class, which switches mark at every hop.
    assert classes["single-path"] >> 2 == classes["roce-8"] >> 2 == protocol.DSCP_ROCE
    assert classes["mrc"] != classes["mrc-no-trim"]
    # Everything stays ECT(0): switches mark it rather than drop it.
    assert {c & protocol.ECN_MASK for c in classes.values()} == {protocol.ECN_ECT0}
    assert protocol.CONTROL_TRAFFIC_CLASS & protocol.ECN_MASK == protocol.ECN_ECT0
    assert protocol.CONTROL_TRAFFIC_CLASS >> 2 == protocol.DSCP_NO_TRIM


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
def test_a_socket_sends_data_and_control_with_the_transport_classes(receiver, transport):
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sender:
        control_cmsg = set_traffic_classes(sender, transport)
        target = receiver.getsockname()[:2]
        sender.sendto(b"data", target)
        assert arrived_class(receiver) == protocol.data_traffic_class(transport)
        if control_cmsg is None:
            sender.sendto(b"control", target)  # the socket's class is the control class
        else:
            sender.sendmsg([b"control"], control_cmsg, 0, target)
        assert arrived_class(receiver) == protocol.CONTROL_TRAFFIC_CLASS
