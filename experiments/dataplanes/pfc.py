"""PFC on the kernel data plane: the pauses the eBPF switch program decides, carried out
at the sending NICs.

The program (ebpf/mrc_switch.bpf.c) keeps the lossless class lossless in its model: it
counts the bytes each ingress port has queued in its switch, and past XOFF it pauses
the port at the other end of that link (that port's lossless virtual queue stops
draining, so its own ingress fills in turn: the pause spreads hop by hop), below XON it
resumes it, and it puts an event on its `pfc_events` ring each time. This module reads
the ring in a thread and carries out the pauses of the hosts' ports: the agent of a
paused NIC port is told (`pause` command, hosts/agent.py) and stops sending lossless
data on that plane until told again, within a millisecond or so. Two CPUs may put a
port's pause and its resume on the ring in the other order than they happened: each
event carries the port's sequence number, and an event older than the last one heard
of its port is stale and ignored (a NIC left paused after its resume would wait for
ever).

A switch port's pause stays in the model (its virtual queue, counters and paused
time): the real packets behind it are not held. htb, the only scheduler of this kernel
that could hold them (no `plug` qdisc), cannot let a held class go again promptly: a
class slowed to nothing is scheduled to send its next packet when its tokens allow,
seconds later, whatever its rate becomes. So the real lossless queues are deep enough
never to drop (controller/tables.py LOSSLESS_QUEUE_FACTOR) and the senders are held
where a real fabric's pauses end: at their NICs (docs/protocol.md "The RoCE baseline":
what is emulated and what is not). Pause counts and paused time are the program's
(experiments/dataplanes/ebpf_switch.py `read_counters`).
"""

from __future__ import annotations

import threading

from controller import ebpf_config as cfg
from experiments.dataplanes.ebpf_switch import Running
from topologies.ebpf_program import LineRing, RingReader

POLL_S = 0.05  # how long the reader waits for an event before looking at `stop`


class PfcController:
    """Reads the pause events of a running fabric's eBPF program (loaded on its ports
    already) and pauses the NICs they name, through the fabric's agents."""

    def __init__(self, running: Running):
        self.running = running
        self.where = running.ebpf_ports.by_index()
        self.hosts = {h.name: h.index for h in running.fabric.hosts}
        self.paused: set[tuple[str, str]] = set()  # host ports paused now
        self.last_seq: dict[int, int] = {}  # by ifindex: the latest change heard of
        self.events = 0
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
        """One event of a ring: a host port is paused or resumed, unless a later change
        of the same port was heard already."""
        port = self.where.get(ifindex)
        if port is None or port[0] not in self.hosts:
            return  # a switch port: paused in the program's model alone
        with self._lock:  # one ring's thread at a time (a split fabric has several)
            if seq <= self.last_seq.get(ifindex, 0):
                self.stale += 1
                return
            self.last_seq[ifindex] = seq
            self.events += 1
            try:
                self._pause_nic(*port, kind == cfg.PFC_XOFF)
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
