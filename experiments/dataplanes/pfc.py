"""PFC on the kernel data plane: the pauses the eBPF switch program decides, carried out
at the sending NICs and at the switch ports.

The program (ebpf/mrc_switch.bpf.c) keeps the lossless class lossless in its model: it
counts the bytes each ingress port has queued in its switch, and past XOFF it pauses
the port at the other end of that link (that port's lossless virtual queue stops
draining, so its own ingress fills in turn: the pause spreads hop by hop), below XON it
resumes it, and it puts an event on its `pfc_events` ring each time. This module reads
the ring in a thread and carries the pauses out, within a millisecond or so:
- a host's NIC port: the host's agent is told (`pause` command, hosts/agent.py) and
  stops sending lossless data on that plane until told again;
- a switch port: its real lossless queue, a tbf leaf under the port's htb
  (controller/ebpf_config.py `lossless_gate`), is shut to a trickle, so what is queued
  there waits, as behind a real PAUSE; at the resume it is opened again, and a wake-up
  frame sent on the port makes its qdisc send at once. htb alone could not do this (a
  class slowed to nothing is next scheduled when its token debt allows, seconds later,
  whatever its rate becomes); a tbf refills its bucket when changed. The shut bucket is
  one largest frame: a pause lets at most that much through, as a real port finishes
  the frame it is sending. Switch ports on another server are held in the model alone.
Two CPUs may put a port's pause and its resume on the ring in the other order than they
happened: each event carries the port's sequence number, and an event older than the
last one heard of its port is stale and ignored (a port left paused after its resume
would wait for ever). Pause counts and paused time are the program's
(experiments/dataplanes/ebpf_switch.py `read_counters`).
"""

from __future__ import annotations

import socket
import threading

from controller import ebpf_config as cfg
from experiments.dataplanes.ebpf_switch import Running
from topologies import netns
from topologies.ebpf_program import LineRing, RingReader
from topologies.linkstate import LinkState
from topologies.remote import is_remote

POLL_S = 0.05  # how long the reader waits for an event before looking at `stop`


class PfcController:
    """Reads the pause events of a running fabric's eBPF program (loaded on its ports
    already) and pauses the NICs they name, through the fabric's agents, and the switch
    ports, through their lossless leaves."""

    def __init__(self, running: Running, gates: SwitchGates | None = None):
        self.running = running
        self.where = running.ebpf_ports.by_index()
        self.hosts = {h.name: h.index for h in running.fabric.hosts}
        self.paused: set[tuple[str, str]] = set()  # host ports paused now
        self.held: set[tuple[str, str]] = set()  # switch ports whose lossless leaf is shut
        self.last_seq: dict[int, int] = {}  # by ifindex: the latest change heard of
        self.gates = gates if gates is not None else SwitchGates(running)
        self.events = 0
        self.switch_events = 0
        self.stale = 0
        self.errors: list[str] = []
        # The ring of every machine the program runs on: on a split fabric, each
        # server's switches pause their own hosts' ports (topologies/placement.py).
        self.readers = [_reader(running, server, program)
                        for server, program in running.ebpf_ports.programs()]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(reader,), name="pfc",
                                          daemon=True) for reader in self.readers]
        for thread in self._threads:
            thread.start()

    def _run(self, reader) -> None:
        while not self._stop.is_set():
            for record in reader.read(POLL_S):
                self.on_event(*cfg.decode_pfc_event(record))

    def on_event(self, kind: int, ifindex: int, seq: int) -> None:
        """One event of a ring: a port is paused or resumed, unless a later change of
        the same port was heard already."""
        port = self.where.get(ifindex)
        if port is None:
            return
        host = port[0] in self.hosts
        if not host and port not in self.gates.ports:
            return  # a switch port of another server: paused in the program's model alone
        with self._lock:  # one ring's thread at a time (a split fabric has several)
            if seq <= self.last_seq.get(ifindex, 0):
                self.stale += 1
                return
            self.last_seq[ifindex] = seq
            pause = kind == cfg.PFC_XOFF
            try:
                if host:
                    self.events += 1
                    self._pause_nic(*port, pause)
                else:
                    self.switch_events += 1
                    (self.held.add if pause else self.held.discard)(port)
                    self.gates.shut(port, pause)
            except Exception as err:  # noqa: BLE001 - reported with the run's counters
                self.errors.append(f"{port[0]} {port[1]}: {err}")

    def _pause_nic(self, host: str, intf: str, pause: bool) -> None:
        (self.paused.add if pause else self.paused.discard)((host, intf))
        agents = self.running.agents  # the AgentSet running now (experiments/run/agents.py)
        if agents is not None:
            agents.command(self.hosts[host], cmd="pause", plane=_plane(intf), on=pause)

    def attach(self, agents) -> None:
        """A new set of agents runs (the running fabric's `agents` now): it hears of
        every host port paused now. Under the lock, so that a resume heard meanwhile
        is not overtaken by its replayed pause."""
        with self._lock:
            for host, intf in sorted(self.paused):
                agents.command(self.hosts[host], cmd="pause", plane=_plane(intf), on=True)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        for reader in self.readers:
            reader.close()
        self.gates.close()


class SwitchGates:
    """The lossless leaves of the switch ports on this machine that run the program,
    shut and opened over netlink: one netlink socket and one packet socket in each
    switch's namespace, made before the first pause (each costs a thread's step into
    the namespace) and kept apart from the fault player's, which another thread uses."""

    def __init__(self, running: Running):
        fabric, net = running.fabric, running.net
        self.link_state = LinkState()
        # (switch, interface) -> (pid of its namespace, ifindex, the leaf open, shut)
        self.ports: dict[tuple[str, str], tuple[int, int, cfg.LosslessGate,
                                                cfg.LosslessGate]] = {}
        self.wake: dict[int, socket.socket] = {}  # by pid: a packet socket there
        frame = fabric.spec.data_frame_bytes
        for switch in fabric.switches:
            node = net.get(switch.name)
            if is_remote(node):
                continue
            for port in fabric.ports(switch.name):
                ifindex = running.ebpf_ports.ports.get((switch.name, port.intf))
                if ifindex is None:
                    continue
                queue = fabric.link_params(port.tier).queue_pkts
                self.ports[(switch.name, port.intf)] = (
                    node.pid, ifindex, cfg.lossless_gate(queue, frame, shut=False),
                    cfg.lossless_gate(queue, frame, shut=True))
            if node.pid not in self.wake:
                self.link_state.open(node.pid)
                self.wake[node.pid] = netns.socket_in(node.pid, socket.AF_PACKET, socket.SOCK_RAW)

    def shut(self, port: tuple[str, str], shut: bool) -> None:
        """Shut a switch port's lossless leaf (a pause), or open it and wake its qdisc
        (a resume)."""
        pid, ifindex, opened, closed = self.ports[port]
        gate = closed if shut else opened
        self.link_state.change_tbf(pid, ifindex, cfg.CLASS_LOSSLESS << 16,
                                   cfg.classid(cfg.CLASS_LOSSLESS), gate.rate_bytes_per_s,
                                   gate.burst_bytes, gate.limit_bytes)
        if not shut:
            self.wake[pid].sendto(WAKE_FRAME, (port[1], cfg.WAKE_ETHERTYPE))

    def close(self) -> None:
        """Close the sockets, which would otherwise keep the namespaces alive."""
        self.link_state.close()
        for sock in self.wake.values():
            sock.close()
        self.wake.clear()


# The wake-up frame: to no one (a locally administered, all-zero address), the
# EtherType the program passes untouched, padded to Ethernet's least frame.
WAKE_FRAME = (bytes([2, 0, 0, 0, 0, 0]) * 2 + cfg.WAKE_ETHERTYPE.to_bytes(2, "big")
              + bytes(46))


def _reader(running: Running, server: str | None, program) -> RingReader | LineRing:
    """The events ring of `program`: mapped here, or read by a process on `server`."""
    path, size = program.map_path(cfg.EVENTS_MAP), program.entries[cfg.EVENTS_MAP]
    if server is None:
        return RingReader(path, size)
    node = next(n for n in running.net.hosts + running.net.switches
                if getattr(n, "server", None) == server)
    return LineRing(node.python("topologies.ebpf_program", "ring", str(path), str(size)))


def _plane(intf: str) -> int:
    """A host port's plane: its interface number (h3-eth1 is plane 1)."""
    return int(intf.rsplit("eth", 1)[1])
