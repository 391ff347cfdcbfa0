"""Whether the machine was quiet while something was measured on it: the load probe a
calibration runs before and during its measurement (experiments/run/calibration.py).

A measurement of what the agents keep up with measures the whole machine: the CPU
another program takes is taken from the agents, and the figure comes out low with
nothing to show it. Two readings, both from /proc and both in the kernel's clock ticks,
say whether that happened:

- before (`before`): the machine's idle share over BEFORE_S, from /proc/stat (idle and
  iowait against every tick; the hypervisor's steal is counted busy: it is CPU another
  guest took). Nothing of the measurement runs yet, so a quiet machine is nearly all
  idle.
- during (`Window`, opened by the measurement around its traffic): the CPU time of the
  processes that are neither the measurement's own tree (the process that measures and
  its descendants: the fabric's shells and agents) nor kernel threads, plus the steal,
  as a share of the machine's CPU. The machine's idle share says nothing then: the
  fabric forwards in the kernel's softirq context, which the kernel charges to whatever
  it interrupts, an agent or an idle CPU.

A process's time is read with its reaped children's (utime, stime, cutime, cstime), and
the others' share is the sum at the end of a window less the sum at its start: a
short-lived program that another one starts and waits for (a compiler under make) is
counted in its parent though no sample saw it, and one that was running at the start
and ended in the window counts for its time in the window only. A program that ended
with no parent alive to reap it is missed.

Reading and judging are apart: `sample` reads /proc, `between` compares two samples
(pure), `busy_before` and `busy_during` judge a `Load` against `Limits`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# How long the machine is watched before a measurement: long enough for a program that
# runs steadily to show (a hundred ticks per CPU), short beside a calibration's minute.
BEFORE_S = 1.0
# A quiet machine is nearly all idle (a 2-core VM with nothing started: 98-99%). A
# twentieth of the machine busy (a tenth of a core on two cores) already takes from the
# agents a share comparable to the gap between two steps of the calibration's ladder,
# and a program waking often delays their timers, which decide every step.
MIN_IDLE_BEFORE = 0.95
# During a step the other programs may use no more than the same twentieth: a quiet
# machine's daemons use well under 1% of it while the fabric runs.
MAX_OTHERS_DURING = 0.05
# How many of the busiest other programs a report names.
NAMED = 3
# PF_KTHREAD in /proc/<pid>/stat's flags (include/linux/sched.h): a kernel thread, whose
# work (softirq, block I/O) is the fabric's forwarding as often as anyone's.
PF_KTHREAD = 0x00200000
KTHREADD_PID = 2
# /proc/stat's first eight columns: user nice system idle iowait irq softirq steal (guest
# time is already counted in user).
IDLE, IOWAIT, STEAL = 3, 4, 7
CPU_COLUMNS = 8


@dataclass(frozen=True)
class Limits:
    """What a quiet machine stays within: its idle share before, the others' share of
    its CPU during."""

    min_idle_before: float = MIN_IDLE_BEFORE
    max_others_during: float = MAX_OTHERS_DURING


LIMITS = Limits()


@dataclass(frozen=True)
class Proc:
    """One process as /proc/<pid>/stat shows it."""

    pid: int
    ppid: int
    name: str
    ticks: int  # utime + stime + cutime + cstime
    started: int  # starttime, in ticks since boot: with the pid, one process
    kernel: bool

    @property
    def key(self) -> tuple[int, int]:
        return (self.pid, self.started)


@dataclass(frozen=True)
class Sample:
    """The machine's CPU counters and every process's, at one instant."""

    cpu: tuple[int, ...]  # /proc/stat's first line, CPU_COLUMNS columns
    cpus: int  # online CPUs (/proc/stat's cpuN lines)
    procs: dict[tuple[int, int], Proc]
    ours: frozenset[tuple[int, int]]  # the measuring process and its descendants


@dataclass(frozen=True)
class Busy:
    """Someone who used the CPU beside the measurement."""

    name: str
    pid: int | None  # None: the hypervisor (steal)
    core_share: float  # of one core, over the window

    def describe(self) -> str:
        who = f"{self.name} (pid {self.pid})" if self.pid is not None else self.name
        return f"{who} {self.core_share:.0%} of a core"


@dataclass(frozen=True)
class Load:
    """What the machine did between two samples."""

    seconds: float
    idle_share: float  # of the machine's CPU
    others_share: float  # of the machine's CPU: other processes and steal
    busiest: tuple[Busy, ...]  # the others, most first

    def describe(self) -> str:
        if not self.busiest:
            return "no other program: the kernel's own work or the measurement's"
        return ", ".join(busy.describe() for busy in self.busiest[:NAMED])


def parse_stat(text: str) -> Proc:
    """One /proc/<pid>/stat line. The name may hold spaces and parentheses, so the
    fields are counted from the last ')'."""
    head, _, rest = text.rpartition(")")
    pid, _, name = head.partition(" (")
    fields = rest.split()
    # fields[0] is proc(5)'s field 3 (state): its field n is fields[n - 3].
    ppid, flags = int(fields[1]), int(fields[6])
    ticks = sum(int(f) for f in fields[11:15])
    return Proc(pid=int(pid), ppid=ppid, name=name, ticks=ticks, started=int(fields[19]),
                kernel=bool(flags & PF_KTHREAD) or KTHREADD_PID in (int(pid), ppid))


def tree(procs: dict[tuple[int, int], Proc], root: int) -> frozenset[tuple[int, int]]:
    """`root` and its descendants among `procs`."""
    children: dict[int, list[Proc]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc)
    found = {proc.key for proc in procs.values() if proc.pid == root}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child.key not in found and child.pid != root:
                found.add(child.key)
                todo.append(child.pid)
    return frozenset(found)


def read_cpu(proc: Path = PROC) -> tuple[tuple[int, ...], int]:
    """/proc/stat's whole-machine counters and the number of online CPUs."""
    lines = (proc / "stat").read_text().splitlines()
    total = tuple(int(v) for v in lines[0].split()[1:1 + CPU_COLUMNS])
    cpus = sum(1 for line in lines[1:] if line.startswith("cpu") and line[3:4].isdigit())
    return total, max(1, cpus)


def sample(root: int | None = None, proc: Path = PROC) -> Sample:
    """The machine now, with `root` (this process unless given) as the measurement."""
    cpu, cpus = read_cpu(proc)
    procs = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            found = parse_stat((entry / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # ended while the folder was read: not in this sample
        procs[found.key] = found
    return Sample(cpu, cpus, procs, tree(procs, root if root is not None else os.getpid()))


def between(start: Sample, end: Sample) -> Load:
    """The machine's load from `start` to `end` (module docstring)."""
    ticks = [b - a for a, b in zip(start.cpu, end.cpu)]
    total = max(1, sum(ticks))
    per_core = total / end.cpus  # the window's length, in ticks
    ours = start.ours | end.ours  # a process that was ours once is never another's

    def others(sample: Sample) -> dict[tuple[int, int], Proc]:
        return {key: proc for key, proc in sample.procs.items()
                if key not in ours and not proc.kernel}

    before, after = others(start), others(end)
    used = sum(p.ticks for p in after.values()) - sum(p.ticks for p in before.values())
    steal = ticks[STEAL]
    # A process that ended in the window brought its parent its whole time: the part
    # from before the window is taken back from the parent it had, so that each is
    # named for what it used in the window.
    ended: dict[int, int] = {}
    for key, proc in before.items():
        if key not in end.procs:
            ended[proc.ppid] = ended.get(proc.ppid, 0) + proc.ticks
    busiest = [Busy(p.name, p.pid, (p.ticks - before[k].ticks - ended.get(p.pid, 0)
                                    if k in before else p.ticks) / per_core)
               for k, p in after.items()]
    if steal:
        busiest.append(Busy("the hypervisor (steal)", None, steal / per_core))
    busiest = sorted((b for b in busiest if b.core_share > 0), key=lambda b: -b.core_share)
    return Load(seconds=per_core / os.sysconf("SC_CLK_TCK"),
                idle_share=(ticks[IDLE] + ticks[IOWAIT]) / total,
                others_share=min(1.0, (max(0, used) + steal) / total),
                busiest=tuple(busiest))


def before(seconds: float = BEFORE_S, root: int | None = None) -> Load:
    """The machine's load over the next `seconds`, with nothing measured yet."""
    start = sample(root)
    time.sleep(seconds)
    return between(start, sample(root))


class Window:
    """The load beside the measurement while this context is open: `load` once closed."""

    def __init__(self, root: int | None = None):
        self.root = root
        self.load: Load | None = None
        self._start: Sample | None = None

    def __enter__(self) -> Window:
        self._start = sample(self.root)
        return self

    def __exit__(self, *exc) -> None:
        self.load = between(self._start, sample(self.root))


def busy_before(load: Load, limits: Limits = LIMITS) -> str:
    """What kept the machine from being quiet before a measurement; "" when it was."""
    if load.idle_share >= limits.min_idle_before:
        return ""
    return (f"{load.idle_share:.0%} idle before the measurement, quiet is "
            f"{limits.min_idle_before:.0%} or more: {load.describe()}")


def busy_during(load: Load, limits: Limits = LIMITS) -> str:
    """What used the CPU beside a measurement past the limit; "" when nothing did."""
    if load.others_share <= limits.max_others_during:
        return ""
    return (f"other programs used {load.others_share:.0%} of the CPU during a step, quiet "
            f"is {limits.max_others_during:.0%} or less: {load.describe()}")
