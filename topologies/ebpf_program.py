"""The eBPF switch program on this machine: built, loaded once, attached to ports, its maps
read and written.

This module runs what it is given and decides nothing: the program's settings, fault
values and map layout come from controller/ebpf_config.py as map writes (any object
with `map_name`, `key` and `value`), the tc commands as tc batch lines.

The program is loaded once per fabric (`EbpfProgram.load`): `bpftool prog load` pins it
and its maps under /sys/fs/bpf/mrc-testbed, in the root namespace's BPF filesystem.
Every port gets it from there: a node's tc commands run through `nsenter --net` into
the node's network namespace only, so they still see the root's BPF filesystem (a
Mininet node's own mount namespace has a fresh /sys of its own) and attach the pinned
program (`object-pinned`). One shell of `tc -batch`es, a node each, sets up all the ports, one
`bpftool batch` writes every map entry of the fabric, one dump reads a map of every
port: a 2tier-8plane fabric is loaded in a handful of processes, not two thousand.

`RingReader` reads a ring buffer the program writes (its PFC events), `MapReader` a
map's entries by key (a queue sampled every few milliseconds). `unload()`
removes the pins; the program and its maps go when the last port holding them does.
"""

from __future__ import annotations

import functools
import json
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

PIN_DIR = Path("/sys/fs/bpf/mrc-testbed")
BPFFS = Path("/sys/fs/bpf")


class EbpfError(RuntimeError):
    """The program could not be built, loaded, attached, read or written; `errno`, where
    a system call said why."""

    errno: int | None = None


class MapOp(Protocol):
    map_name: str
    key: bytes
    value: bytes | None


def build(command: list[str], output: Path, sources: Iterable[Path]) -> bool:
    """Compile the program on this machine unless `output` is newer than every source.
    Returns whether it compiled."""
    if output.exists() and all(output.stat().st_mtime >= s.stat().st_mtime for s in sources):
        return False
    if shutil.which(command[0]) is None:
        raise EbpfError(f"{command[0]} not found: the eBPF switch needs clang and "
                        "libbpf-dev (make deps)")
    output.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise EbpfError(f"compiling {output.name} failed:\n{done.stderr.strip()}")
    return True


def _run(command: list[str], stdin: str | None = None) -> str:
    """Run a command on this machine: its output; EbpfError with its last complaint."""
    done = subprocess.run(command, input=stdin, capture_output=True, text=True)
    if done.returncode != 0:
        text = (done.stderr or done.stdout).strip().splitlines()
        raise EbpfError(f"{' '.join(command[:4])}: {text[-1] if text else done.returncode}")
    return done.stdout


# How a program reaches the machine it is loaded on: a command (argument list) and its
# input in, its output out, EbpfError when it fails. `_run` on this machine; over ssh on
# a server of a split fabric (experiments/dataplanes/ebpf_switch.py).
Shell = Callable[[list[str], "str | None"], str]


def _hex(data: bytes) -> str:
    return " ".join(f"{b:02x}" for b in data)


def in_namespace(pid: int | None) -> list[str]:
    """The command prefix that runs in the network namespace of process `pid` (None:
    the root namespace), keeping the root's mount namespace and so its BPF filesystem."""
    return [] if pid is None else ["nsenter", f"--net=/proc/{pid}/ns/net"]


def attach_lines(intf: str, pinned: Path) -> list[str]:
    """The tc batch lines that put the pinned program on an interface's egress."""
    return [f"qdisc replace dev {intf} clsact",
            f"filter replace dev {intf} egress pref 1 handle 1 bpf da object-pinned {pinned}"]


class EbpfProgram:
    """The program loaded once, pinned at `pin`, on the machine `run` reaches (this one
    by default: a server's for a split fabric, where `obj` is at the same path)."""

    def __init__(self, obj: Path, pin: Path = PIN_DIR, run: Shell = _run):
        self.obj, self.pin, self.run = obj, pin, run
        # Where its map writes go instead of a bpftool each (a server's RemoteWriter).
        self.writer: RemoteWriter | None = None
        self.sizes: dict[str, int] = {}  # map name -> value size
        self.entries: dict[str, int] = {}  # map name -> max entries

    @property
    def prog(self) -> Path:
        return self.pin / "prog"

    def map_path(self, name: str) -> Path:
        return self.pin / "maps" / name

    def load(self) -> None:
        """Load and pin the program and its maps (any earlier pins are removed first)."""
        # One shell line checks the tools and the BPF filesystem and clears old pins:
        # on a server, each command is a round trip.
        missing = "bpftool is not installed (make deps)"
        unbuilt = f"{self.obj} is not built (clang, libbpf-dev: make deps)"
        said = self.run(["sh", "-c", f"""
            command -v bpftool >/dev/null || {{ echo "{missing}"; exit; }}
            [ -e {self.obj} ] || {{ echo "{unbuilt}"; exit; }}
            grep -qs ' {BPFFS} bpf ' /proc/mounts || mount -t bpf bpf {BPFFS} || exit 1
            rm -rf {self.pin} && mkdir -p {self.pin}"""], None).strip()
        if said:
            raise EbpfError(said)
        self.run(["bpftool", "prog", "load", str(self.obj), str(self.prog), "type",
                  "classifier", "pinmaps", str(self.pin / "maps")], None)
        # Every map's sizes in one command: one JSON line per map, after its name.
        maps = self.pin / "maps"
        said = self.run(["sh", "-c", f"for m in {maps}/*; do basename $m; "
                                     "bpftool -j map show pinned $m; done"], None)
        lines = said.splitlines()
        for name, text in zip(lines[0::2], lines[1::2]):
            info = json.loads(text)
            self.sizes[name] = info.get("bytes_value", 0)
            self.entries[name] = info.get("max_entries", 0)

    def unload(self) -> None:
        """Remove the pins (the kernel frees the program once no port holds it)."""
        if self.writer is not None:
            writer, self.writer = self.writer, None
            writer.close()
        self.run(["rm", "-rf", str(self.pin)], None)

    def attach(self, pid: int | None, intfs: Iterable[str],
               before: Iterable[str] = ()) -> int:
        """Run `before` (tc batch lines: the ports' qdiscs) and attach the program to
        every interface in `intfs`, in the namespace of `pid`; returns the lines run."""
        return self.attach_all([(pid, list(intfs), list(before))])

    def attach_all(self, nodes: Iterable[tuple[int | None, list[str], list[str]]]) -> int:
        """`attach` for many namespaces at once: (pid, interfaces, before) of each, in
        one shell on the program's machine (a command on a server is a round trip of
        its own); returns the tc lines run."""
        script, count = ["set -e"], 0
        for pid, intfs, before in nodes:
            lines = list(before)
            for intf in intfs:
                lines += attach_lines(intf, self.prog)
            if lines:
                script.append(f"printf '%s\\n' {' '.join(map(shlex.quote, lines))} | "
                              f"{shlex.join(in_namespace(pid))} tc -batch -")
                count += len(lines)
        if count:
            self.run(["sh"], "\n".join(script) + "\n")  # as input: no argument limit
        return count

    def write(self, ops: Iterable[MapOp]) -> int:
        """Apply map writes (value None deletes the key; deleting a missing key is fine),
        all in one bpftool, or through the program's writer; returns how many."""
        if self.writer is not None:
            return self.writer.write(ops)
        lines, deletes = [], []
        for op in ops:
            path = self.map_path(op.map_name)
            if op.value is None:
                deletes.append(op)
            else:
                lines.append(f"map update pinned {path} key hex {_hex(op.key)} "
                             f"value hex {_hex(op.value)}")
        if lines:
            self.run(["bpftool", "batch", "file", "-"], "\n".join(lines) + "\n")
        for op in deletes:  # one by one: a missing key must not stop the others
            try:
                self.run(["bpftool", "map", "delete", "pinned", str(self.map_path(op.map_name)),
                          "key", "hex", *_hex(op.key).split()], None)
            except EbpfError as err:
                if "No such file or directory" not in str(err):
                    raise EbpfError(f"map delete {op.map_name}: {err}") from None
        return len(lines) + len(deletes)

    def dump(self, name: str) -> list[tuple[bytes, bytes]]:
        """Every entry of a map: (key, value) bytes."""
        entries = json.loads(self.run(["bpftool", "-j", "map", "dump", "pinned",
                                       str(self.map_path(name))], None))
        return [(bytes(int(h, 16) for h in e["key"]), bytes(int(h, 16) for h in e["value"]))
                for e in entries if "value" in e]


def ebpf_available(obj: Path, pid: int | None, pin: Path = PIN_DIR,
                   keep: EbpfProgram | None = None) -> tuple[bool, str]:
    """Whether the program loads and attaches here, and if not why: loaded and tried on
    the loopback of the namespace of `pid`, then removed, unless it is `keep` (the
    program of `obj` at `pin`, on the machine it reaches), which stays loaded when it
    works (loading takes a fifth of a second)."""
    program = keep or EbpfProgram(obj, pin)
    works = False
    try:
        program.load()
        program.attach(pid, ["lo"])
        works = True
    except EbpfError as err:
        reason = str(err).splitlines()[-1] if str(err) else "load failed"
        return False, f"no eBPF switch program: it could not be loaded here ({reason})"
    finally:
        try:
            program.run([*in_namespace(pid), "tc", "qdisc", "del", "dev", "lo", "clsact"], None)
        except EbpfError:
            pass  # there was none: the program never got that far
        if not (works and keep):
            program.unload()
    return True, "eBPF switch program on every port"


# ---------------------------------------------------------------- reading maps directly
# The bpf() system call, for readers that run often (a ring buffer's events, a queue
# sampled every few milliseconds), where a bpftool process each time would cost more
# than what it reads.
_BPF_SYSCALL = 321  # x86_64; the program itself is built for the machine it runs on
_BPF_MAP_LOOKUP_ELEM = 1
_BPF_MAP_UPDATE_ELEM = 2
_BPF_MAP_DELETE_ELEM = 3
_BPF_OBJ_GET = 7
_RINGBUF_BUSY, _RINGBUF_DISCARD = 1 << 31, 1 << 30
_RINGBUF_HEADER = 8


@functools.cache
def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _bpf(command: int, attr, what: object) -> int:
    """bpf(command, attr); EbpfError naming `what` on failure."""
    import ctypes
    import os

    done = _libc().syscall(_BPF_SYSCALL, command, ctypes.byref(attr), ctypes.sizeof(attr))
    if done < 0:
        number = ctypes.get_errno()
        err = EbpfError(f"{what}: {os.strerror(number)}")
        err.errno = number
        raise err
    return done


def _pinned_fd(path: Path) -> int:
    """A file descriptor of the pinned map at `path`."""
    import ctypes

    name = ctypes.create_string_buffer(str(path).encode())
    return _bpf(_BPF_OBJ_GET, (ctypes.c_uint64 * 2)(ctypes.addressof(name), 0), path)


class MapReader:
    """Looks up entries of one pinned map, by key, `value_size` bytes each."""

    def __init__(self, path: Path, value_size: int):
        import ctypes

        self.path, self.fd = path, _pinned_fd(path)
        self.value = ctypes.create_string_buffer(value_size)
        self._key = ctypes.create_string_buffer(8)
        # union bpf_attr for BPF_MAP_LOOKUP_ELEM: map_fd, pad, key, value, flags.
        self._attr = (ctypes.c_uint64 * 4)(self.fd, ctypes.addressof(self._key),
                                           ctypes.addressof(self.value), 0)

    def lookup(self, key: bytes) -> bytes | None:
        """The value of `key` (at most 8 bytes), or None where the map has none."""
        self._key.raw = key.ljust(8, b"\0")
        try:
            _bpf(_BPF_MAP_LOOKUP_ELEM, self._attr, self.path)
        except EbpfError:
            return None
        return self.value.raw

    def close(self) -> None:
        import os

        os.close(self.fd)


class RingReader:
    """The records of a pinned BPF ring buffer, as they come (`read(timeout)`): the
    consumer's side of the kernel's ring, mapped into this process."""

    def __init__(self, path: Path, size: int):
        import mmap
        import os
        import select

        fd = _pinned_fd(path)
        self.fd, self.size, self.mask = fd, size, size - 1
        page = mmap.PAGESIZE
        self.consumer = mmap.mmap(fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE,
                                  offset=0)
        self.producer = mmap.mmap(fd, page + 2 * size, mmap.MAP_SHARED, mmap.PROT_READ,
                                  offset=page)
        self.data_offset = page
        self.poll = select.epoll()
        self.poll.register(fd, select.EPOLLIN)
        self._os = os

    def read(self, timeout: float) -> list[bytes]:
        """The records that arrived, waiting up to `timeout` seconds for the first."""
        records = []
        consumer = int.from_bytes(self.consumer[:8], "little")
        producer = int.from_bytes(self.producer[:8], "little")
        if consumer == producer:
            self.poll.poll(timeout)
            producer = int.from_bytes(self.producer[:8], "little")
        while consumer < producer:
            start = self.data_offset + (consumer & self.mask)
            header = int.from_bytes(self.producer[start:start + 4], "little")
            if header & _RINGBUF_BUSY:
                break
            length = header & ~(_RINGBUF_BUSY | _RINGBUF_DISCARD)
            if not header & _RINGBUF_DISCARD:
                body = start + _RINGBUF_HEADER
                records.append(bytes(self.producer[body:body + length]))
            consumer += (length + _RINGBUF_HEADER + 7) & ~7
            self.consumer[:8] = consumer.to_bytes(8, "little")
        return records

    def close(self) -> None:
        self.poll.close()
        self.consumer.close()
        self.producer.close()
        self._os.close(self.fd)


class MapWriter:
    """Writes map entries through the bpf() system call, the maps of the program
    pinned at `pin` opened once: what a server of a split fabric runs (this module's
    `writer` command), where a bpftool over ssh for each fault took a fifth of a
    second."""

    def __init__(self, pin: Path):
        self.pin, self.fds = pin, {}

    def write(self, ops: Iterable[MapOp]) -> int:
        """Apply map writes (value None deletes; deleting a missing key is fine)."""
        import ctypes
        import errno

        count = 0
        for op in ops:
            path = self.pin / "maps" / op.map_name
            fd = self.fds.get(op.map_name)
            if fd is None:
                fd = self.fds[op.map_name] = _pinned_fd(path)
            key = ctypes.create_string_buffer(op.key, len(op.key))
            value = (ctypes.create_string_buffer(op.value, len(op.value))
                     if op.value is not None else None)
            attr = (ctypes.c_uint64 * 4)(fd, ctypes.addressof(key),
                                         ctypes.addressof(value) if value is not None else 0, 0)
            try:
                _bpf(_BPF_MAP_UPDATE_ELEM if value is not None else _BPF_MAP_DELETE_ELEM,
                     attr, f"map {'update' if value is not None else 'delete'} {op.map_name}")
            except EbpfError as err:
                if value is not None or err.errno != errno.ENOENT:
                    raise
            count += 1
        return count

    def close(self) -> None:
        import os

        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}


@dataclass(frozen=True)
class _Op:
    map_name: str
    key: bytes
    value: bytes | None


class RemoteWriter:
    """The head's end of a MapWriter on a server (`proc`: this module's `writer` command
    there, over ssh): each write is a batch of lines and one answer, over the one
    session it keeps open."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    def write(self, ops: Iterable[MapOp]) -> int:
        lines = [f"{op.map_name} {op.key.hex()} {op.value.hex() if op.value is not None else '-'}"
                 for op in ops]
        if not lines:
            return 0
        self.proc.stdin.write(("\n".join(lines) + "\n.\n").encode())
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().decode().strip()
        if answer != "ok":
            raise EbpfError(f"map writer: {answer or 'it ended'}")
        return len(lines)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


class LineRing:
    """A ring buffer read on another machine: `proc` (this module's `ring` command run
    there, over ssh) prints each record as a line of hex; `read(timeout)` gives the
    records that arrived, as RingReader does."""

    def __init__(self, proc: subprocess.Popen):
        import os

        self.proc, self._buffer = proc, b""
        self._fd = proc.stdout.fileno()
        os.set_blocking(self._fd, False)

    def read(self, timeout: float) -> list[bytes]:
        import os
        import select

        ready, _, _ = select.select([self._fd], [], [], timeout)
        if ready:
            try:
                self._buffer += os.read(self._fd, 1 << 16) or b""
            except BlockingIOError:
                pass
        *lines, self._buffer = self._buffer.split(b"\n")
        return [bytes.fromhex(line.decode()) for line in lines if line.strip()]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _serve_writes(writer: MapWriter) -> int:
    """Apply batches of map writes from stdin ("<map> <key hex> <value hex or ->" lines,
    a batch ended by "."), answering each with "ok" or "error <why>", until stdin ends."""
    import sys

    batch = []
    for line in sys.stdin:
        words = line.split()
        if words == ["."]:
            try:
                writer.write(batch)
                print("ok", flush=True)
            except EbpfError as err:
                print(f"error {' '.join(str(err).split())}", flush=True)
            batch = []
        elif len(words) == 3:
            batch.append(_Op(words[0], bytes.fromhex(words[1]),
                             None if words[2] == "-" else bytes.fromhex(words[2])))
    writer.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python3 -m topologies.ebpf_program ring <pinned ring> <size>`: print every
    record of a pinned ring buffer as a line of hex, as it comes, until its input ends
    (how the head reads a ring on a server: LineRing; the head's end closing, or the
    head dying, ends it) or it is stopped. `... writer <pin folder>`: apply the map
    writes it is sent (RemoteWriter), until its input ends."""
    import argparse
    import select
    import sys

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("command", choices=["ring", "writer"])
    parser.add_argument("path", type=Path)
    parser.add_argument("size", type=int, nargs="?", default=0)
    args = parser.parse_args(argv)
    if args.command == "writer":
        return _serve_writes(MapWriter(args.path))
    reader = RingReader(args.path, args.size)
    try:
        while True:
            for record in reader.read(0.2):
                sys.stdout.write(record.hex() + "\n")
            sys.stdout.flush()
            if select.select([sys.stdin], [], [], 0)[0] and not sys.stdin.buffer.read1(1):
                return 0  # the head's end closed
    except (KeyboardInterrupt, BrokenPipeError):
        return 0
    finally:
        reader.close()


if __name__ == "__main__":
    raise SystemExit(main())
