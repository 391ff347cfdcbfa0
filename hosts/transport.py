"""What a host's endpoint asks of a sender, whichever transport it runs.

The endpoint (hosts/endpoint.py) drives every connection's sending side through this
one protocol: the MRC sender (hosts/sender.py) and the RoCE baseline's queue pairs
(hosts/baseline.py RoceSender) both implement it, and the endpoint checks no sender's
type. What it does differently per transport (which sender it makes, how it schedules
MRC senders' timers, how answers go back) it takes from the transport's spec
(hosts/protocol.py `transport_spec`). A method that means nothing to a transport is
still there, and its docstring says why it does nothing (the baseline hears no peer
port state, MRC takes no CNP).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from hosts import wire

PlaneReady = Callable[[int], bool]
Charge = Callable[[int, int], None]  # (plane, datagram bytes) as each packet is made
Outgoing = tuple[int, int, bytes, int]  # (plane, ev, datagram, traffic class)


def always(plane: int) -> bool:
    """A plane_ready that lets everything through (tests, unpaced callers)."""
    return True


def uncharged(plane: int, size: int) -> None:
    """A charge that counts nothing (unpaced callers)."""


class TransportSender(Protocol):
    """The sending side of one connection (this host -> `peer`)."""

    peer: int
    conn_id: int
    srtt: float  # the connection's smoothed RTT in seconds, 0 before the first sample
    stats: dict[str, int]

    # --- messages and sending
    def send_message(self, msg_id: int, data: bytes, now: float) -> None:
        """Queue a message; `on_completed` hears of it once every byte is acknowledged."""

    @property
    def busy(self) -> bool:
        """Anything left to do (the event loop keeps polling a busy sender)."""

    def has_work(self) -> bool:
        """Something to send that only pacing holds back."""

    @property
    def resending(self) -> bool:
        """Retransmissions are queued (the pacer lets them a little ahead of new data)."""

    def wanted_planes(self) -> list[int]:
        """Planes a packet could go out on now."""

    def poll(self, now: float, plane_ready: PlaneReady = always, budget: int = 64,
             charge: Charge = uncharged,
             resend_ready: PlaneReady | None = None) -> list[Outgoing]:
        """Packets to send now."""

    def timer_at(self, now: float) -> float:
        """When poll() has timer work next."""

    # --- answers from the peer
    def on_sack(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        """A selective acknowledgement."""

    def on_nack(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        """A negative acknowledgement (a trimmed packet, or the baseline's GAP NACK)."""

    def on_cnp(self, hdr: wire.Header, ctl: wire.Control, now: float) -> None:
        """A congestion notification packet (DCQCN)."""

    def set_line_rate(self, line_rate_Bps: float) -> None:
        """The NIC's port now carries this many bytes a second (a lane down): a sender
        that paces itself paces to it."""

    def on_probe_reply(self, hdr: wire.Header, ctl: wire.Control, now: float,
                       ce: bool = False) -> None:
        """The answer to one of this connection's probes (`ce`: it arrived CE-marked)."""

    # --- ports and paths
    def port_state(self) -> int:
        """This host's NIC ports as a bitmap, bit p set while plane p's port is up."""

    def set_local_plane(self, plane: int, up: bool, now: float) -> None:
        """This host's NIC port of `plane` lost (or regained) carrier."""

    def remote_ports(self, state: int, now: float) -> None:
        """The peer's port-state bitmap, from one of its control packets."""

    def retired_paths(self) -> int:
        """Paths the connection has taken out of use on a loss verdict, now."""

    def path_states(self, paths: int) -> list[dict]:
        """The EVs it sends on (`paths` per plane to the peer): each one's `ev`,
        `plane`, `path`, `state` and whether it is `active` in the rotation."""
