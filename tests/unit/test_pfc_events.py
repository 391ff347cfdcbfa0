"""PFC's controller (experiments/dataplanes/pfc.py) carries out the pauses of the eBPF
program's ring in the order they happened, whatever order they reached the ring in.

Two CPUs may pause and resume the same NIC port at once; their events can land on the
ring in the other order. Each carries the port's sequence number of the change, and an
event older than the last one heard of its port is dropped: otherwise the NIC would
stay paused after its resume, its lossless data held for ever.
"""

from __future__ import annotations

from types import SimpleNamespace

from controller import ebpf_config as cfg
from experiments.dataplanes.pfc import PfcController

H1_ETH2 = 41  # the ifindex of h1's plane-2 port in these tests
SWITCH_PORT = 42


class Agents:
    """The running agents, as far as PFC's controller talks to them."""

    def __init__(self):
        self.commands: list[tuple[int, dict]] = []

    def command(self, host: int, **cmd) -> None:
        self.commands.append((host, cmd))


def controller() -> tuple[PfcController, Agents]:
    agents = Agents()
    ports = SimpleNamespace(by_index=lambda: {H1_ETH2: ("h1", "h1-eth2"),
                                              SWITCH_PORT: ("t0", "t0-eth1")},
                            programs=lambda: [])  # no ring: events are fed by hand
    running = SimpleNamespace(ebpf_ports=ports, agents=agents,
                              fabric=SimpleNamespace(hosts=[SimpleNamespace(name="h0", index=0),
                                                            SimpleNamespace(name="h1", index=1)]))
    return PfcController(running), agents


def test_a_resume_that_overtook_its_pause_on_the_ring_wins():
    pfc, agents = controller()
    pfc.on_event(cfg.PFC_XON, H1_ETH2, 2)   # the resume, read first
    pfc.on_event(cfg.PFC_XOFF, H1_ETH2, 1)  # the pause it followed, read second
    assert agents.commands == [(1, {"cmd": "pause", "plane": 2, "on": False})]
    assert pfc.paused == set() and pfc.stale == 1


def test_pauses_and_resumes_in_order_are_all_carried_out():
    pfc, agents = controller()
    for seq, kind in enumerate((cfg.PFC_XOFF, cfg.PFC_XON, cfg.PFC_XOFF), start=1):
        pfc.on_event(kind, H1_ETH2, seq)
    assert [cmd["on"] for _, cmd in agents.commands] == [True, False, True]
    assert pfc.paused == {("h1", "h1-eth2")} and pfc.stale == 0
    # A new set of agents hears of the pause that stands.
    fresh = Agents()
    pfc.attach(fresh)
    assert fresh.commands == [(1, {"cmd": "pause", "plane": 2, "on": True})]


def test_a_switch_port_s_pause_stays_in_the_program():
    pfc, agents = controller()
    pfc.on_event(cfg.PFC_XOFF, SWITCH_PORT, 1)
    assert agents.commands == [] and pfc.events == 0
