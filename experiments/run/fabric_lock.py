"""One fabric per machine: the lock a run or CLI holds for as long as its fabric exists.

Two fabrics on one machine break each other: node names, interface names and the
start-up cleanup (experiments/run/cleanup.py removes every `mininet:<node>` shell it finds)
are machine-wide. So whoever builds a fabric first takes this lock, and a second run
ends at once with one line naming the first (its pid and results folder), leaving it
undisturbed. The lock must therefore be taken *before* the start-up cleanup.

The lock is an `fcntl.flock` on an open file descriptor, held for the life of the
process: when a run is killed (even with SIGKILL) the kernel drops the lock with the
process, so a lock file left behind is recognised as stale (the flock is free) and
taken over. The file's content (JSON: pid, start time, command, results folder) names
the holder in the message; it never decides who holds the lock. It also lists what the
holder's fabric put on the machine (`record`, experiments/run/cleanup.py `Remains`),
so that whoever takes over a dead holder's lock removes exactly that (`stale.remains`)
and nothing another tool made.
The descriptor is not inherited by the processes a run starts (Python's default,
PEP 446), so a leftover agent or tcpdump cannot keep a dead run's lock alive.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from experiments.run.cleanup import Remains
from topologies.errors import UserError
from topologies.remote import over_ssh

# /run is a tmpfs that only root writes, like the fabric itself; MRC_FABRIC_LOCK moves
# it (tests, or a machine where /run is not writable).
DEFAULT_LOCK_PATH = Path("/run/mrc-testbed.lock")
# A holder writes its content right after taking the flock: a contender that finds
# the file still empty waits this long for it before naming an unknown holder.
CONTENT_WAIT_S = 0.5


def lock_path() -> Path:
    """The lock file of this machine: $MRC_FABRIC_LOCK, else /run/mrc-testbed.lock."""
    return Path(os.environ.get("MRC_FABRIC_LOCK") or DEFAULT_LOCK_PATH)


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) the lock, as written in the lock file."""

    pid: int | None
    started_at: str
    command: str
    folder: str
    remains: Remains = Remains()  # what its fabric put on the machine

    def describe(self) -> str:
        pid = f"pid {self.pid}" if self.pid else "an unknown process"
        folder = f"results {self.folder}" if self.folder else "no results folder yet"
        text = f"{pid} ({self.command or '?'}), {folder}, started {self.started_at or '?'}"
        return " ".join(text.split())  # one line, whatever the command held

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        """The holder described by a lock file's text, or None when it names nobody."""
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        pid = data.get("pid")
        return cls(pid=pid if isinstance(pid, int) else None,
                   started_at=str(data.get("started_at", "")),
                   command=str(data.get("command", "")), folder=str(data.get("folder", "")),
                   remains=Remains.from_dict(data.get("remains")))


class FabricBusy(UserError):
    """Another run or CLI holds the fabric of this machine."""

    def __init__(self, path: Path, holder: Holder | None):
        self.holder = holder
        who = holder.describe() if holder else "a process that has not said who it is yet"
        pid = f"kill {holder.pid}" if holder and holder.pid else "stop it"
        super().__init__(str(path), "active run",
                         f"a fabric is already running on this machine: {who}",
                         f"wait for it to end or {pid} (one fabric per machine at a time)")


class ServerBusy(UserError):
    """Another run holds the fabric lock of a server a split fabric needs."""

    def __init__(self, server: str, holder: Holder | None):
        self.holder = holder
        who = holder.describe() if holder else "a process that has not said who it is yet"
        pid = f"kill {holder.pid} there" if holder and holder.pid else "stop it"
        super().__init__(f"server {server}", "active run",
                         f"a fabric is already running there: {who}",
                         f"wait for it to end or {pid} (one fabric per machine at a time)")


# Run on a server over ssh (topologies/placement.py Server.ssh) to hold its fabric
# lock for the head: the lock file's flock is taken on descriptor 9 and held by this
# shell while its input from the head stays open (the head releasing the lock, or
# dying, closes it); $1 is what the file names while held. A run started on the server
# itself takes the same file's flock (FabricLock), so each refuses the other.
_HOLD = """exec 9<>"$2"
if ! flock -n 9; then echo busy; cat "$2"; exit 0; fi
printf '%s\n' "$1" | sed "s/__PID__/$$/" > "$2"
echo held
cat >/dev/null
: > "$2"
"""


class FabricLock:
    """Hold the machine's fabric lock: `with FabricLock(command=...) as lock: ...`.

    `acquire()` raises `FabricBusy` at once if another process holds it. `stale` is the
    holder of a lock left by a killed run that this one took over (None if the lock
    was free). `set_folder()` names the results folder once it exists; `record()` what
    the holder's fabric puts on the machine. A fabric split across servers takes each
    server's lock too, held as long as this one (`hold_servers`).
    """

    def __init__(self, command: str | None = None, folder: Path | str | None = None,
                 path: Path | None = None):
        self.path = path or lock_path()
        self.command = command if command is not None else " ".join(sys.argv)
        self.folder = str(folder or "")
        self.started_at = ""
        self.stale: Holder | None = None
        self.remains = Remains()
        self._fd: int | None = None
        self._servers: dict[str, subprocess.Popen] = {}  # server -> what holds its lock

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> FabricLock:
        if self._fd is not None:
            raise RuntimeError("the fabric lock is already held by this object")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _wait_for_content(fd)
            os.close(fd)
            raise FabricBusy(self.path, holder) from None
        except BaseException:
            os.close(fd)
            raise
        # The flock was free: whatever the file still names is a run that died.
        self.stale = Holder.parse(_read(fd))
        self._fd = fd
        self.started_at = datetime.now().isoformat(timespec="seconds")
        self._write()
        return self

    def set_folder(self, folder: Path | str) -> None:
        """Name the results folder in the lock file (it is made after the lock is taken)."""
        self.folder = str(folder)
        if self._fd is not None:
            self._write()

    def record(self, remains: Remains) -> None:
        """Name what the holder's fabric puts on the machine, before it is there (a
        kill -9 half way leaves no more than this) and again once more is known."""
        self.remains = remains
        if self._fd is not None:
            self._write()

    def hold_servers(self, servers) -> None:
        """Take the fabric lock of every server of `servers` (topologies/placement.py
        Server) not held yet, until this lock is released: ServerBusy naming the first
        server another run holds (those taken here are let go again)."""
        asked = {s.name: _ask(s, self._holder_text()) for s in servers
                 if s.name not in self._servers}  # all at once: each is a round trip
        taken, refused = {}, None
        for name, proc in asked.items():
            try:
                taken[name] = _answer(name, proc)
            except BaseException as err:  # noqa: BLE001 - the first refusal goes on
                refused = refused or err
        if refused is not None:
            for proc in taken.values():
                _let_go(proc)
            raise refused
        self._servers.update(taken)

    def _holder_text(self) -> str:
        return json.dumps({"pid": "__PID__", "started_at": self.started_at,
                           "command": f"held for {socket.gethostname()} pid {os.getpid()}: "
                                      f"{self.command}", "folder": self.folder}
                          ).replace('"__PID__"', "__PID__")

    def release(self) -> None:
        for holding in self._servers.values():
            _let_go(holding)
        self._servers = {}
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            # An empty file says "free" to anyone who reads it before flocking.
            os.ftruncate(fd, 0)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _write(self) -> None:
        data = json.dumps({"pid": os.getpid(), "started_at": self.started_at,
                           "command": self.command, "folder": self.folder,
                           "remains": self.remains.as_dict()})
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, (data + "\n").encode(), 0)

    def __enter__(self) -> FabricLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _ask(server, holder: str) -> subprocess.Popen:
    """Start taking `server`'s fabric lock (_answer says whether it was taken)."""
    argv = over_ssh(server.ssh, ["sh", "-c", _HOLD, "hold", holder, str(DEFAULT_LOCK_PATH)])
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _answer(name: str, proc: subprocess.Popen) -> subprocess.Popen:
    """`proc` (_ask), now holding its server's lock; ServerBusy naming the run that
    holds it instead."""
    said = proc.stdout.readline().strip()
    if said == "held":
        return proc
    rest = proc.stdout.read() if said == "busy" else ""
    errors = proc.stderr.read().strip()
    proc.wait()
    if said == "busy":
        raise ServerBusy(name, Holder.parse(rest))
    raise OSError(f"server {name}: its fabric lock could not be taken: "
                  f"{errors.splitlines()[-1] if errors else 'no answer'}")


def _let_go(proc: subprocess.Popen) -> None:
    """End a server lock's holder: its input closed, it empties the file and exits."""
    try:
        proc.stdin.close()
        proc.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


def _read(fd: int) -> str:
    return os.pread(fd, 1 << 20, 0).decode(errors="replace")


def _wait_for_content(fd: int) -> Holder | None:
    """The holder named in the file; a holder that has just flocked may not have written."""
    deadline = time.monotonic() + CONTENT_WAIT_S
    while True:
        holder = Holder.parse(_read(fd))
        if holder is not None or time.monotonic() >= deadline:
            return holder
        time.sleep(0.02)
