"""One switch port's queue over time, on the kernel data plane: what the eBPF switch
program's lossless virtual queue of the port holds (the RoCE class's), sampled every
`SAMPLE_S` in a thread, with how many of the switch's ingress ports have their peer
paused by PFC at that moment.

The MRC paper's Fig. 22 plots a ToR's queue to an incast's destination this way (its
"PFC mode": the ToR pausing its senders). The virtual queues are the switch's model
(ebpf/mrc_switch.bpf.c): its ECN marks, trims, drops and pauses are decided on them,
and the real htb queues behind them are only ever as full (docs/ebpf-switch.md). The
maps are read through the bpf() system call (topologies/ebpf_program.py `MapReader`),
a few microseconds a sample, so sampling does not load the machine it measures.
"""

from __future__ import annotations

import threading
import time

from controller import ebpf_config as cfg
from experiments.dataplanes.ebpf_switch import Running
from topologies.ebpf_program import MapReader

SAMPLE_S = 0.01  # a few frame times at the capped rates: the queue's swings show


class QueueSampler:
    """Samples the queue of `switch`'s port toward `peer` on a running fabric whose
    switches run the eBPF program, from construction to `stop()`; `result(start)` gives
    the samples."""

    def __init__(self, running: Running, switch: str, peer: str, every_s: float = SAMPLE_S):
        (port,) = [p for p in running.fabric.ports(switch) if p.peer == peer]
        ports = running.ebpf_ports.ports
        self.port = f"{switch} {port.intf}"
        self.ifindex = ports[(switch, port.intf)]
        self.ingress_ports = sorted(i for (node, _), i in ports.items() if node == switch)
        program = running.ebpf_ports.program
        configs = MapReader(program.map_path(cfg.PORTS_MAP), program.sizes[cfg.PORTS_MAP])
        config = configs.lookup(cfg.key(self.ifindex))
        configs.close()
        self.rate = dict(zip(cfg.PORT_CONFIG_FIELDS,
                             cfg.PORT_CONFIG.unpack_from(config)))["rate_bytes_per_s"]
        self.state = MapReader(program.map_path(cfg.STATE_MAP), program.sizes[cfg.STATE_MAP])
        self.ingress = MapReader(program.map_path(cfg.INGRESS_MAP),
                                 program.sizes[cfg.INGRESS_MAP])
        self.every_s = every_s
        # (monotonic seconds, lossless bytes, ingress ports pausing a peer)
        self.samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="queue", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        key = cfg.key(self.ifindex)
        while not self._stop.wait(self.every_s):
            value = self.state.lookup(key)
            if value is None:
                continue  # the port's state is being rewritten (a switch reboot)
            now = cfg.queue_now(value, self.rate, time.monotonic_ns())
            pausing = 0
            for ifindex in self.ingress_ports:
                ingress = self.ingress.lookup(cfg.key(ifindex))
                pausing += bool(ingress and cfg.INGRESS_STATE.unpack_from(ingress)[1])
            self.samples.append((time.monotonic(), now.lossless, pausing))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.state.close()
        self.ingress.close()

    def result(self, start: float) -> dict:
        """The samples, [seconds from `start` (a run's time.monotonic() start, as the
        agents' events count it), lossless bytes, ingress ports pausing]."""
        return {"port": self.port, "every_s": self.every_s, "rate_bytes_per_s": self.rate,
                "samples": [[round(t - start, 4), lossless, pausing]
                            for t, lossless, pausing in self.samples]}
