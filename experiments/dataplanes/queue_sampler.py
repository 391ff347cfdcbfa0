"""One switch port's queue over time, on the kernel data plane: what the eBPF switch
program's lossless virtual queue of the port holds (the RoCE class's), sampled every
`SAMPLE_S`, with how many of the switch's ingress ports have their peer paused by PFC
at that moment.

The MRC paper's Fig. 22 plots a ToR's queue to an incast's destination this way (its
"PFC mode": the ToR pausing its senders). The virtual queues are the switch's model
(ebpf/mrc_switch.bpf.c): its ECN marks, trims, drops and pauses are decided on them,
and the real htb queues behind them are only ever as full (docs/ebpf-switch.md). The
maps are read through the bpf() system call (topologies/ebpf_program.py `MapReader`),
a few microseconds a sample, so sampling does not load the machine it measures.

The sampling runs where the switch runs. On this machine it is a thread. For a switch
on another server of a split fabric (docs/scale-out.md) it is this module run there:

    python -m experiments.dataplanes.queue_sampler PIN EVERY_S SIZES IFINDEX INGRESS...

(SIZES: the value sizes of the program's ports, state and ingress maps, as
`ports:N,state:N,ingress:N`.) It prints the port's rate, then one line a sample,
`<monotonic ns> <lossless bytes> <ingress ports pausing>`. A line `sync` on its input
is answered `clock <monotonic ns>` between two samples, from which the head takes the
server's clock against its own (the midpoint of the exchange; within half the
session's round trip). It ends when its input closes.
"""

from __future__ import annotations

import select
import subprocess
import sys
import threading
import time
from pathlib import Path

from controller import ebpf_config as cfg
from experiments.dataplanes.ebpf_switch import Running
from topologies.ebpf_program import MapReader
from topologies.remote import is_remote

SAMPLE_S = 0.01  # a few frame times at the capped rates: the queue's swings show


class PortQueue:
    """Reads one port's lossless virtual queue, and its switch's pausing ingress ports,
    from the maps of a program pinned at `pin` (on the machine this runs on), whose
    value sizes are `sizes` (map name -> bytes)."""

    def __init__(self, pin: Path, sizes: dict[str, int], ifindex: int,
                 ingress_ports: list[int]):
        self.key, self.ingress_ports = cfg.key(ifindex), ingress_ports
        configs = MapReader(pin / "maps" / cfg.PORTS_MAP, sizes[cfg.PORTS_MAP])
        config = configs.lookup(self.key)
        configs.close()
        self.rate = dict(zip(cfg.PORT_CONFIG_FIELDS,
                             cfg.PORT_CONFIG.unpack_from(config)))["rate_bytes_per_s"]
        self.state = MapReader(pin / "maps" / cfg.STATE_MAP, sizes[cfg.STATE_MAP])
        self.ingress = MapReader(pin / "maps" / cfg.INGRESS_MAP, sizes[cfg.INGRESS_MAP])

    def sample(self) -> tuple[int, int] | None:
        """(lossless bytes now, ingress ports pausing a peer), or None while the port's
        state is being rewritten (a switch reboot)."""
        value = self.state.lookup(self.key)
        if value is None:
            return None
        now = cfg.queue_now(value, self.rate, time.monotonic_ns())
        pausing = 0
        for ifindex in self.ingress_ports:
            ingress = self.ingress.lookup(cfg.key(ifindex))
            pausing += bool(ingress and cfg.INGRESS_STATE.unpack_from(ingress)[1])
        return now.lossless, pausing

    def close(self) -> None:
        self.state.close()
        self.ingress.close()


class QueueSampler:
    """Samples the queue of `switch`'s port toward `peer` on a running fabric whose
    switches run the eBPF program, from construction to `stop()`; `result(start)` gives
    the samples."""

    def __init__(self, running: Running, switch: str, peer: str, every_s: float = SAMPLE_S):
        (port,) = [p for p in running.fabric.ports(switch) if p.peer == peer]
        ports = running.ebpf_ports.ports
        self.port = f"{switch} {port.intf}"
        ifindex = ports[(switch, port.intf)]
        ingress = sorted(i for (node, _), i in ports.items() if node == switch)
        program = running.ebpf_ports.program_of(switch)
        sizes = {name: program.sizes[name]
                 for name in (cfg.PORTS_MAP, cfg.STATE_MAP, cfg.INGRESS_MAP)}
        self.every_s = every_s
        # (monotonic seconds, lossless bytes, ingress ports pausing)
        self.samples: list[tuple[float, int, int]] = []
        # This machine's clock minus the switch's server's, as estimated (None: the
        # switch is on this machine).
        self.clock_offset_ns: int | None = None
        self._stop = threading.Event()
        node = running.net.get(switch)
        if is_remote(node):
            self._server = _ServerSampler(node, program.pin, sizes, every_s, ifindex, ingress)
            self.rate, target = self._server.rate, self._server.read_into
        else:
            self._server, self._queue = None, PortQueue(program.pin, sizes, ifindex, ingress)
            self.rate, target = self._queue.rate, self._run
        self._thread = threading.Thread(target=target, args=(self.samples,), name="queue",
                                        daemon=True)
        self._thread.start()

    def _run(self, samples: list) -> None:
        while not self._stop.wait(self.every_s):
            found = self._queue.sample()
            if found is not None:
                samples.append((time.monotonic(), *found))

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.stop()
            self._thread.join()
            self.clock_offset_ns = self._server.offset_ns
        else:
            self._thread.join()
            self._queue.close()

    def result(self, start: float) -> dict:
        """The samples, [seconds from `start` (a run's time.monotonic() start, as the
        agents' events count it), lossless bytes, ingress ports pausing]."""
        return {"port": self.port, "every_s": self.every_s, "rate_bytes_per_s": self.rate,
                "samples": [[round(t - start, 4), lossless, pausing]
                            for t, lossless, pausing in self.samples]}


class _ServerSampler:
    """This module run on the server of `node`, its samples put on this machine's
    clock (the module docstring)."""

    def __init__(self, node, pin: Path, sizes: dict[str, int], every_s: float, ifindex: int,
                 ingress: list[int]):
        said = ",".join(f"{name}:{size}" for name, size in sizes.items())
        self.proc = node.python("experiments.dataplanes.queue_sampler", str(pin), str(every_s),
                                said, str(ifindex), *map(str, ingress))
        first = self.proc.stdout.readline().decode().split()
        if first[:1] != ["rate"]:
            self.proc.kill()
            raise RuntimeError(f"the queue sampler on {node.server} did not start: {first}")
        self.rate = int(first[1])
        self.offset_ns: int | None = None  # this machine's clock minus the server's
        self._asked = 0
        self._ask()

    def _ask(self) -> None:
        self._asked = time.monotonic_ns()
        self.proc.stdin.write(b"sync\n")
        self.proc.stdin.flush()

    def read_into(self, samples: list) -> None:
        kept: list[tuple[int, int, int]] = []
        for line in self.proc.stdout:
            words = line.split()
            if words[:1] == [b"clock"]:
                self.offset_ns = (self._asked + time.monotonic_ns()) // 2 - int(words[1])
            elif len(words) == 3:
                kept.append(tuple(map(int, words)))
        offset = self.offset_ns or 0
        samples.extend(((t + offset) / 1e9, lossless, pausing) for t, lossless, pausing in kept)

    def stop(self) -> None:
        self.proc.stdin.close()  # the sampler ends; read_into then has every sample
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    pin, every_s, ifindex, ingress = Path(args[0]), float(args[1]), int(args[3]), args[4:]
    sizes = {name: int(size) for name, size in (item.split(":") for item in args[2].split(","))}
    queue = PortQueue(pin, sizes, ifindex, [int(i) for i in ingress])
    out = sys.stdout
    out.write(f"rate {queue.rate}\n")
    out.flush()
    while True:
        # Wait for the next sample on the input: a `sync` is answered at once; its end
        # (the head has stopped, or died) ends the sampler.
        ready, _, _ = select.select([sys.stdin], [], [], every_s)
        if ready:
            line = sys.stdin.readline()
            if not line:
                break
            out.write(f"clock {time.monotonic_ns()}\n")
        else:
            found = queue.sample()
            if found is None:
                continue
            out.write(f"{time.monotonic_ns()} {found[0]} {found[1]}\n")
        out.flush()  # each line as it comes: the clock's exchange is timed
    queue.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
