"""PFC's controller (experiments/dataplanes/pfc.py) carries out the pauses of the eBPF
program's ring in the order they happened, whatever order they reached the ring in, at
the NICs and at the switch ports of this machine.

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
REMOTE_SWITCH_PORT = 43  # a port of a switch on another server


class Agents:
    """The running agents, as far as PFC's controller talks to them."""

    def __init__(self):
        self.commands: list[tuple[int, dict]] = []

    def command(self, host: int, **cmd) -> None:
        self.commands.append((host, cmd))


class Gates:
    """The switch ports' lossless leaves, as far as PFC's controller shuts them."""

    def __init__(self):
        self.ports = {("t0", "t0-eth1"): None}  # this machine's
        self.shut_calls: list[tuple[tuple[str, str], bool]] = []

    def shut(self, port: tuple[str, str], shut: bool) -> None:
        self.shut_calls.append((port, shut))

    def close(self) -> None:
        pass


def controller() -> tuple[PfcController, Agents]:
    agents = Agents()
    ports = SimpleNamespace(by_index=lambda: {H1_ETH2: ("h1", "h1-eth2"),
                                              SWITCH_PORT: ("t0", "t0-eth1"),
                                              REMOTE_SWITCH_PORT: ("t1", "t1-eth1")},
                            programs=lambda: [])  # no ring: events are fed by hand
    running = SimpleNamespace(ebpf_ports=ports, agents=agents,
                              fabric=SimpleNamespace(hosts=[SimpleNamespace(name="h0", index=0),
                                                            SimpleNamespace(name="h1", index=1)]))
    return PfcController(running, Gates()), agents


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


def test_a_switch_port_s_pause_shuts_its_lossless_leaf_in_order():
    pfc, agents = controller()
    pfc.on_event(cfg.PFC_XOFF, SWITCH_PORT, 1)
    pfc.on_event(cfg.PFC_XON, SWITCH_PORT, 3)  # the resume that overtook ...
    pfc.on_event(cfg.PFC_XOFF, SWITCH_PORT, 2)  # ... the pause it followed
    assert pfc.gates.shut_calls == [(("t0", "t0-eth1"), True), (("t0", "t0-eth1"), False)]
    assert pfc.held == set() and pfc.stale == 1 and pfc.switch_events == 2
    assert agents.commands == [] and pfc.events == 0


def test_a_switch_port_of_another_server_is_paused_in_the_program_alone():
    pfc, agents = controller()
    pfc.on_event(cfg.PFC_XOFF, REMOTE_SWITCH_PORT, 1)
    assert pfc.gates.shut_calls == [] and agents.commands == [] and pfc.switch_events == 0
