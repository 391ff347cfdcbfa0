"""One lifecycle for every entry point that builds a fabric: run-experiment, make paper and
make cli all go through a `Run`.

    run = Run.prepare("paper", fabric, dataplane="auto", results="results")  # pre-flight
    with run:                                   # leftovers removed, results folder made
        network = run.up(run.fabric, faults)    # built, programmed, topology.json, capture
        ...                                     # the entry point's work; run.status = 0
        network = run.up(twin)                  # the first fabric torn down, the twin up
    # every fabric torn down, on every exit path; run.status, run.error, run.facts

Everything a user can fix is found in the pre-flight (`Run.prepare`), before anything
on the machine changes or the results folder exists: the data-plane choice, the root
check, the machine's one-fabric lock (experiments/run/fabric_lock.py: a second run stops
here, naming the first), the data-plane target (for BMv2, compiling the P4 program), a
writable results root, and the fabric at the rate the target runs it. A mistake there
is a `UserError`, `PermissionError` or `TargetError`: the entry point prints it in one
line and exits 2 (`PREFLIGHT_ERRORS`).

Inside `with run:` SIGTERM and SIGHUP end the run as Ctrl-C does (`Interrupted`);
whatever ends it (its end, Ctrl-C, an error) the fabric's capture is stopped, the eBPF
ports' counters read, the network torn down with Ctrl-C held off, and what a broken
stop left of it removed (experiments/run/cleanup.py `remove`: what the run recorded in
the lock's file as its own). What a run killed with SIGKILL recorded is removed by the
next holder of the lock, and nothing another tool made. An interruption sets `status`
130 and an error 1, each said in one progress line and kept in `error`; the entry
point writes its own files after the `with` block from `status`, `error` and `facts`.

Only one fabric exists at a time. A run that compares MRC with RoCE brings up the
multi-plane fabric and then its single-plane twin (experiments/dataplanes/twin.py): `up()` tears
the first down before building the next, and `facts["fabrics"]` keeps each one's
bring-up figures.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from topologies.errors import UserError
from topologies.model import Fabric
from topologies.shaping import as_emulated_here


class Interrupted(Exception):
    """SIGTERM or SIGHUP arrived; handled like Ctrl-C."""


class NetworkGone(Interrupted):
    """The fabric's nodes disappeared from under the run (experiments/run/fabric_watch.py):
    it ends as on an interruption, with an error, and its teardown only removes what is
    left."""


class TargetError(Exception):
    """The data-plane target could not be created (e.g. the P4 program did not compile)."""


PREFLIGHT_ERRORS = (UserError, PermissionError, TargetError)
USAGE_ERROR, INTERRUPTED = 2, 130


class Progress:
    """Progress lines with the time since the run started."""

    def __init__(self, stream=sys.stdout):
        self.start = time.monotonic()
        self.stream = stream

    def __call__(self, message: str) -> None:
        try:
            print(f"[{time.monotonic() - self.start:6.1f}s] {message}", file=self.stream,
                  flush=True)
        except BrokenPipeError:
            # The reader went away (`make run-experiment | head`): the run goes on to its
            # end and its teardown, its lines (and every later write to the stream)
            # going nowhere; its results are in their folder. Stopping at the failed
            # write left a BMv2 fabric's switches running.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)


def require_root(what: str = "the run") -> None:
    """Fail, before anything is built, when Mininet cannot run."""
    if os.geteuid() != 0:
        raise PermissionError(f"{what} needs root (Mininet creates namespaces and links); "
                              "fix: run it with sudo")


def results_root(name: str | Path) -> Path:
    """The folder that gets one results folder per run, made and writable."""
    root = Path(name)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"--results {name}", "", f"cannot be made ({err.strerror or err})",
                        "give a folder you can write to") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise UserError(f"--results {name}", "", "is not writable",
                        "give a folder you can write to")
    return root


def results_folder(root: Path, fabric: Fabric, name: str) -> Path:
    """A new folder `<stamp>-<topology>-<name>` under `root`."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = root / f"{stamp}-{fabric.name}-{name}"
    folder, n = base, 1
    while folder.exists():
        n += 1
        folder = Path(f"{base}-{n}")
    folder.mkdir(parents=True)
    return folder


@contextmanager
def ctrl_c_held() -> Iterator[None]:
    """Ignore Ctrl-C inside: a second Ctrl-C must not cut a teardown short."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _raise_interrupted(signum, frame) -> None:
    raise Interrupted(signal.Signals(signum).name)


RATE_CAP_WORDS = ("calibrated", "cached", "off")


def rate_cap_choice(text: str) -> str:
    """An entry point's --rate-cap (RATE_CAP=): one of RATE_CAP_WORDS, or a link rate in
    Mbit/s that every link runs at (no faster than the topology's), the same on every
    machine: for runs that must compare across machines. Raises UserError."""
    if text in RATE_CAP_WORDS:
        return text
    try:
        rate = float(text)
    except ValueError:
        rate = 0.0
    if not 0 < rate < float("inf"):
        raise UserError(f"RATE_CAP={text}", "", "is not a rate cap",
                        "use calibrated, cached, off, or a link rate in Mbit/s (e.g. 4)")
    return f"{rate:g}"


def _agents_cap(fabric: Fabric, cap: str, progress: Progress, lock=None,
                active_hosts: int | None = None) -> tuple[Fabric, str]:
    """`fabric` with its links capped to what the agents drive on this machine (or to
    the link rate `cap` names), and a line saying so (experiments/run/calibration.py).
    `active_hosts`: how many hosts send at once (all unless given): the budget is shared
    among those. A calibration it starts builds fabrics under `lock`, the run's own."""
    from experiments.run import calibration
    from topologies.model import with_rate_cap

    if cap == "off":
        return fabric, ""
    if cap not in RATE_CAP_WORDS:  # a link rate, checked by rate_cap_choice
        rate = float(cap)
        if rate >= fabric.spec.host_t0.rate_mbit:
            return fabric, ""
        return with_rate_cap(fabric, rate), (
            f"links capped from {fabric.spec.host_t0.rate_mbit:g} to {rate:g} Mbit/s "
            f"(RATE_CAP={cap}); RATE_CAP=off runs at the topology's rate")
    mtu = fabric.spec.mtu_payload  # the agents' work is per packet: a budget per MTU
    workload = calibration.workload_for(active_hosts)
    found = calibration.budget(mtu, workload=workload)
    rate, budget_rate = calibration.link_rate(fabric, found.mbit_per_core, workload,
                                              active_hosts)
    if rate >= fabric.spec.host_t0.rate_mbit:
        return fabric, ""
    if cap == "calibrated" and calibration.cached(mtu, workload=workload) is None:
        progress(f"the agents' budget at {mtu}-byte payloads for {workload} is not "
                 "measured on this machine yet: calibrating (about a minute; make "
                 "calibrate measures it again)")
        found = calibration.calibrate(progress, mtu, lock, workload=workload)
        rate, budget_rate = calibration.link_rate(fabric, found.mbit_per_core, workload,
                                                  active_hosts)
        if rate >= fabric.spec.host_t0.rate_mbit:
            return fabric, ""
    senders = (f" shared by the {active_hosts} hosts that send at once"
               if active_hosts and active_hosts < len(fabric.hosts) else "")
    slower = (f", and no faster than keeps its round trip as long as the calibration's "
              f"fabric's ({calibration.WORKLOADS[workload].reference}: their lateness is "
              f"judged against it; {budget_rate:g} Mbit/s would shorten it)"
              if rate < budget_rate else "")
    note = (f"links capped from {fabric.spec.host_t0.rate_mbit:g} to {rate:g} Mbit/s: the "
            f"agents drive {found.mbit_per_core:g} Mbit/s per core here ({found.source})"
            f"{senders}{slower}; RATE_CAP=off runs at the topology's rate")
    progress(note)
    return with_rate_cap(fabric, rate), note


def _take_over(lock, progress: Progress) -> None:
    """Remove what the run that held `lock` before, and died with its fabric up, left
    (experiments/run/cleanup.py `remove_stale`), saying so."""
    from experiments.run.cleanup import remove_stale

    if lock.stale is not None:
        progress(f"took over the lock of a run that died: {lock.stale.describe()}")
    found = remove_stale(lock)
    if found:
        progress(f"removed leftovers of an earlier run: {found.describe()}")


def _slower_than_asked(cap: str, running: Fabric, dataplane: str, choice) -> str:
    """The line a run owes a RATE_CAP its data plane does not honour (a faster link
    rate, or off): BMv2 runs no faster than its switches and the agents keep up with
    (`choice`, its RateChoice), whatever was asked for; "" when the cap asked for
    holds."""
    if dataplane != "bmv2" or choice is None or not choice.capped:
        return ""
    rate = running.spec.host_t0.rate_mbit
    if cap == "off" or cap not in RATE_CAP_WORDS and float(cap) > rate:
        return (f"RATE_CAP={cap}: BMv2 keeps up with no faster links here, so they run "
                f"at {rate:g} Mbit/s ({choice.reason()})")
    return ""


def _bmv2_budget(fabric: Fabric, cap: str, progress: Progress,
                 lock) -> tuple[float, str] | None:
    """What every host together may send at once on BMv2 here (Mbit/s), as the
    calibration measured it with BMv2's switches and the agents running, and a line
    saying so; measured first when `cap` is "calibrated" and nothing quiet is cached.
    None: not measured here (the target takes a share of what its switches forward
    alone)."""
    from experiments.run import calibration

    mtu = fabric.spec.mtu_payload
    found = calibration.cached(mtu, dataplane=calibration.BMV2)
    if found is None and cap == "calibrated":
        progress(f"BMv2's budget at {mtu}-byte payloads is not measured on this machine "
                 "yet: calibrating with its switches and the agents (a few minutes; make "
                 "calibrate DATAPLANE=bmv2 measures it again)")
        calibration.calibrate(progress, mtu, lock, dataplane=calibration.BMV2)
        found = calibration.cached(mtu, dataplane=calibration.BMV2)
    if found is None:
        return None
    per_core, cores = found["mbit_per_core"], found["cores"]
    return per_core * cores, (f"what BMv2's switches and the agents kept up with here, "
                              f"{per_core:g} Mbit/s per core on {cores} cores (calibrated "
                              f"{found['measured_at']}; make calibrate DATAPLANE=bmv2 "
                              "measures it again)")


class Run:
    """One entry point's use of the machine, from the lock to the last teardown."""

    def __init__(self, name: str, fabric: Fabric, target, reason: str, lock, root: Path,
                 capture: str | None = None, progress: Progress | None = None):
        self.name = name  # the results folder's last part: a scenario's name, paper, cli
        self.fabric = fabric  # as the target runs it (experiments/dataplanes/targets.py fabric_for)
        self.target, self.reason, self.lock, self.root = target, reason, lock, root
        self.capture_spec = capture
        self.progress = progress or Progress()
        self.folder: Path | None = None
        self.network = None  # the fabric up now (experiments/run/fabric.py RunningFabric)
        self.placement = None  # where its nodes run (topologies/placement.py); None: here
        self.status = 1
        self.error: str | None = None
        # What the entry point's summary gets from the lifecycle: per fabric its
        # bring-up and, at its teardown, its eBPF ports' counters; the captures.
        self.facts: dict = {"fabrics": []}
        # The share of the topology's rate its links run at (rate caps), by which the
        # entry point shrinks its transfers or dilates its clock (experiments/run/timescale.py).
        self.rate_share = 1.0
        self._capture = None
        self._watch = None  # experiments/run/fabric_watch.py, while a fabric is up
        self._signals: dict = {}

    # ------------------------------------------------------------ pre-flight
    @classmethod
    def prepare(cls, name: str, fabric: Fabric, dataplane: str = "auto",
                results: str | Path = "results", capture: str | None = None,
                progress: Progress | None = None, program: Path | None = None,
                cap: str = "calibrated", active_hosts: int | None = None,
                servers: str | Path | None = None) -> Run:
        """Everything that can fail for a reason the user can fix, before the machine
        changes; raises one of PREFLIGHT_ERRORS. The lock is held from here to the end
        of the `with` block (released here if a later step fails). `program`: a P4 main
        file to run instead of p4src/'s (a lab's, `make cli LAB=02`); it needs bmv2.
        `cap`: the links are capped to what the agents drive here
        (experiments/run/calibration.py), measuring it first when the cache is stale
        ("calibrated"), from the cache or the default ("cached"), not ("off"), or to a
        link rate in Mbit/s ("4": `rate_cap_choice`). `active_hosts`: how many hosts the
        entry point's workloads have sending at once (all unless given), among which
        the calibrated budget is shared: a one-pair experiment runs its links faster
        than an all-to-all on the same fabric. `servers`: a cluster file placing the
        fabric's planes and hosts on other servers (topologies/placement.py); the links
        are still capped to what this machine's agents drive."""
        from experiments.dataplanes.choice import choose
        from experiments.dataplanes.targets import make_target
        from experiments.run.fabric_lock import FabricLock
        from topologies.bmv2 import Bmv2Error

        cap = rate_cap_choice(cap)
        if capture is not None:
            from experiments.run.capture import parse_spec

            parse_spec(capture, fabric)
        chosen, reason = choose(dataplane)
        if program is not None and chosen != "bmv2":
            raise UserError(f"DATAPLANE={chosen}", "",
                            f"the P4 program {program} runs on BMv2 only",
                            "use DATAPLANE=bmv2 (or auto where BMv2 is installed)")
        require_root(f"make {name}" if name in ("paper", "cli") else "the run")
        placement = None
        if servers is not None:
            from topologies.placement import load_placement
            from topologies.tunnels import check_mtu

            placement = load_placement(servers, fabric)
            check_mtu(placement, fabric)
        progress = progress or Progress()  # one clock for these lines and the run's
        lock = FabricLock().acquire()
        try:
            # Before a calibration builds its fabrics beside what a dead run left.
            _take_over(lock, progress)
            try:
                target = make_target(chosen, program)
            except (Bmv2Error, OSError) as err:
                raise TargetError(" ".join(f"DATAPLANE={chosen}: {err}".split())) from None
            root = results_root(results)
            # BMv2: links no faster than its switches and the agents keep up with.
            calibrated = (_bmv2_budget(fabric, cap, progress, lock)
                          if chosen == "bmv2" else None)
            running = target.fabric_for(fabric, calibrated)
            running = as_emulated_here(running)
            running, cap_note = _agents_cap(running, cap, progress, lock,
                                            active_hosts)
            slower = _slower_than_asked(cap, running, chosen, getattr(target, "rate", None))
            if slower:
                progress(slower)
                cap_note = cap_note or slower
        except BaseException:
            lock.release()
            raise
        run = cls(name, running, target, reason, lock, root, capture, progress)
        run.placement = placement
        run.rate_share = running.spec.host_t0.rate_mbit / fabric.spec.host_t0.rate_mbit
        if cap_note:
            run.facts["rate_cap"] = cap_note
        return run

    # ------------------------------------------------------------ the run
    def __enter__(self) -> Run:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._signals[sig] = signal.signal(sig, _raise_interrupted)
        self.folder = results_folder(self.root, self.fabric, self.name)
        self.lock.set_folder(self.folder)
        self.progress(f"data plane: {self.target.name} ({self.reason})")
        return self

    def up(self, fabric: Fabric | None = None, faults=()):
        """Build, shape and program `fabric` (the run's own by default), tearing down
        the one up now first (a fabric already up stays up); write its resolved topology
        into the results folder, start the capture, and load the eBPF program on the
        ports `faults` will use. Returns the running fabric (experiments/run/fabric.py)."""
        from experiments.dataplanes import ebpf_switch
        from experiments.run.fabric import RunningFabric
        from experiments.run.fabric_watch import FabricWatch
        from topologies.resolved import write_resolved_topology

        fabric = fabric or self.fabric
        if self.network is not None and self.network.fabric == fabric:
            if self.network.ebpf.available and faults:  # only what is new to the ports
                ebpf_switch.prepare_faults(self.network, faults)
            return self.network
        self.down()
        where = ""
        if self.placement is not None:
            where = f" on {len(self.placement.servers)} servers ({self.placement.source})"
        self.progress(f"building {fabric.name}: {len(fabric.hosts)} hosts, "
                      f"{len(fabric.switches)} switches, {len(fabric.links)} links{where}")
        network = RunningFabric(fabric, self.target, self.lock, self.progress,
                                self.placement).start()
        self.network = network
        self._watch = FabricWatch(network.node_processes(), NetworkGone).start()
        self.facts["fabrics"].append({"topology": fabric.name, "planes": fabric.spec.planes,
                                      **({"servers": self.placement.as_dict(fabric)["servers"]}
                                         if self.placement is not None else {}),
                                      "bringup_s": network.bringup_s,
                                      "table_writes": network.table_writes,
                                      "link_emulation": network.link_emulation()})
        self.progress(f"network up in {network.bringup_s:.1f}s, "
                      f"{network.table_writes} table writes")
        if network.ebpf.available and faults:
            ebpf_switch.prepare_faults(network, faults)
        first = len(self.facts["fabrics"]) == 1
        resolved = self.folder / ("topology.json" if first else f"topology-{fabric.name}.json")
        write_resolved_topology(resolved, fabric, self.target.name, None if self.placement
                                is None else self.placement.as_dict(fabric))
        network.resolved_topology = resolved  # what the host agents read
        if self.capture_spec is not None:
            from experiments.run.capture import start_capture

            where = self.folder if first else self.folder / fabric.name
            where.mkdir(exist_ok=True)
            self._capture = start_capture(network.net, fabric, self.capture_spec, where)
            self.progress(f"capturing {len(self._capture.targets)} ports into {where / 'pcap'}")
        return network

    def down(self) -> None:
        """Tear the fabric that is up down (if any): the capture stopped first, so that
        every tcpdump can flush, and the switch ports' counters read; a failed stop is
        reported and what is left of the fabric is removed. A network that disappeared from
        under the run is not stopped node by node: what is left of it is removed."""
        gone = self._stop_watch()
        network, self.network = self.network, None
        if network is None:
            return
        if gone:
            self.progress("removing what is left of the network")
            with ctrl_c_held():
                network.remove_remains()
            return
        with ctrl_c_held():
            if self._capture is not None:
                capture, self._capture = self._capture, None
                try:
                    self.facts.setdefault("captures", []).extend(
                        r.as_dict() for r in capture.stop())
                except Exception as err:  # noqa: BLE001 - reported; the stop ends tcpdump
                    self.progress(f"capture: {err.__class__.__name__} {err}")
            try:
                counters = self.target.switch_counters(network)
                if counters:
                    self.facts["fabrics"][-1]["port_counters"] = counters
            except Exception as err:  # noqa: BLE001 - reported; the teardown goes on
                self.progress(f"switch counters: {err.__class__.__name__} {err}")
            self.progress("tearing down")
            try:
                network.stop()  # ends removing what is left, whatever the stop did
            except Exception as err:  # noqa: BLE001 - reported; the rest was removed
                self.progress(f"teardown: {err.__class__.__name__} {err}; removed leftovers")

    def _stop_watch(self) -> str | None:
        """End the watch of the fabric up now (its teardown is on purpose); what it
        found gone, if anything."""
        watch, self._watch = self._watch, None
        if watch is None:
            return None
        watch.stop()
        return watch.gone

    def __exit__(self, kind, error, trace) -> bool:
        handled = False
        if kind is not None and issubclass(kind, NetworkGone):
            self.progress(f"error: {error}")
            self.status, self.error, handled = 1, str(error), True
        elif kind is not None and issubclass(kind, (KeyboardInterrupt, Interrupted)):
            self.progress(f"interrupted ({error or 'Ctrl-C'}): tearing down")
            self.status, self.error, handled = INTERRUPTED, "interrupted", True
        elif kind is not None and issubclass(kind, Exception):
            self.error = f"{kind.__name__}: {error}"
            self.progress(f"error: {self.error}")
            self.status, handled = 1, True
        try:
            self.down()
        finally:
            for sig, previous in self._signals.items():
                signal.signal(sig, previous)
            self.facts.update(self.target.summary_fields())
            self.lock.release()
        return handled
