"""Runs the eBPF switch program on one port of a node: build, load, map reads and writes.

This module runs what it is given and decides nothing: the program's settings, fault
values and map layout come from `controller/ebpf_config.py` as map writes (any object
with `map_name`, `key` and `value`), and every command runs through `run`, a callable
that runs a shell command in the node's namespace and returns its output, like
Mininet's `node.cmd`.

Each `tc filter ... obj` load creates the program's maps afresh, so every port has its
own. Nothing is pinned: the maps are found through the program on the port (its id in
`tc filter show`, its map ids in `bpftool prog show`), and they go away with the
program when the port's clsact qdisc is deleted (`EbpfPort.unload`) or the interface
or its namespace goes away. A torn-down network leaves nothing behind in /sys/fs/bpf.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

Run = Callable[[str], str]
_STATUS = "__status="


class EbpfError(RuntimeError):
    """The program could not be built, loaded, read or written."""


class MapOp(Protocol):
    map_name: str
    key: bytes
    value: bytes | None


def _checked(run: Run, command: str) -> str:
    """Run a command; its output, or EbpfError with the output when it fails."""
    out = run(f"{command} 2>&1; echo {_STATUS}$?")
    text, _, status = out.rpartition(_STATUS)
    if status.strip() != "0":
        raise EbpfError(f"{command}: {text.strip() or 'exit status ' + status.strip()}")
    return text


def _hex(data: bytes) -> str:
    return " ".join(f"{b:02x}" for b in data)


def _bytes(hex_list: list[str]) -> bytes:
    return bytes(int(h, 16) for h in hex_list)


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


# tc needs a BPF filesystem at /sys/fs/bpf of the node's own view. A Mininet node gets
# a fresh sysfs over /sys (mnexec mounts one in the node's mount namespace), which
# hides a bpffs mounted earlier at /sys/fs/bpf in the root namespace (tc mounts one
# there itself, e.g. for a BMv2 run's host ports); without one, tc fails with "Unable
# to load program". So mount one unless the latest mount at /sys or below it is one.
BPFFS = "/sys/fs/bpf"
_ENSURE_BPFFS = (f"awk '$2==\"/sys\"||$2==\"{BPFFS}\"{{t=($2==\"{BPFFS}\"&&$3==\"bpf\")}} "
                 f"END{{exit !t}}' /proc/self/mounts || mount -t bpf bpf {BPFFS}")


def _attach(run: Run, intf: str, obj: Path, section: str) -> None:
    """Attach the program to `intf`'s egress hook, replacing any earlier one."""
    run(f"{_ENSURE_BPFFS} 2>/dev/null")  # if this fails, tc's own error says why
    _checked(run, f"tc qdisc replace dev {intf} clsact")
    _checked(run, f"tc filter replace dev {intf} egress pref 1 handle 1 bpf da obj {obj} "
                  f"sec {section}")


def ebpf_available(run: Run, obj: Path, section: str) -> tuple[bool, str]:
    """Whether the program can run here, and if not why: tried on the loopback of a
    scratch namespace (run = its cmd), as shaping.probe_features tries qdiscs."""
    if not obj.exists():
        return False, f"no eBPF switch program: {obj} is not built (clang, libbpf-dev: make deps)"
    if shutil.which("bpftool") is None:
        return False, "no eBPF switch program: bpftool is not installed"
    try:
        _attach(run, "lo", obj, section)
    except EbpfError as err:
        reason = str(err).splitlines()[-1] if str(err) else "load failed"
        return False, f"no eBPF switch program: tc could not load it ({reason})"
    finally:
        run("tc qdisc del dev lo clsact 2>/dev/null")
    return True, "eBPF switch program on every switch port"


class EbpfPort:
    """The program on one interface of one node."""

    def __init__(self, run: Run, intf: str):
        self.run = run
        self.intf = intf
        self.maps: dict[str, int] = {}

    def load(self, obj: Path, section: str) -> None:
        """Attach the program to the port's egress (replacing any earlier one) and find
        its maps."""
        _attach(self.run, self.intf, obj, section)
        filters = json.loads(_checked(self.run, f"tc -j filter show dev {self.intf} egress"))
        prog_ids = [f["options"]["prog"]["id"] for f in filters
                    if "prog" in f.get("options", {})]
        if len(prog_ids) != 1:
            raise EbpfError(f"{self.intf}: expected one program on egress, found {prog_ids}")
        prog = json.loads(_checked(self.run, f"bpftool -j prog show id {prog_ids[0]}"))
        self.maps = {}
        for map_id in prog.get("map_ids", []):
            info = json.loads(_checked(self.run, f"bpftool -j map show id {map_id}"))
            self.maps[info["name"]] = map_id

    def unload(self) -> None:
        """Remove the program and with it its maps (nothing is pinned)."""
        self.run(f"tc qdisc del dev {self.intf} clsact 2>/dev/null")
        self.maps = {}

    def _map_id(self, name: str) -> int:
        if name not in self.maps:
            raise EbpfError(f"{self.intf}: the program has no map {name!r} "
                            f"(loaded: {sorted(self.maps) or 'nothing'})")
        return self.maps[name]

    def apply(self, op: MapOp) -> None:
        """One map write (value None: delete the key; deleting a missing key is fine)."""
        map_id = self._map_id(op.map_name)
        if op.value is None:
            command = f"bpftool map delete id {map_id} key hex {_hex(op.key)}"
            try:
                _checked(self.run, command)
            except EbpfError as err:
                if "No such file or directory" not in str(err):  # ENOENT: not there
                    raise
            return
        _checked(self.run, f"bpftool map update id {map_id} key hex {_hex(op.key)} "
                           f"value hex {_hex(op.value)}")

    def read(self, name: str) -> list[tuple[bytes, list[bytes]]]:
        """Every entry of a map: key and value (one value per CPU for per-CPU maps)."""
        entries = json.loads(_checked(self.run, f"bpftool -j map dump id {self._map_id(name)}"))
        out = []
        for entry in entries:
            if "values" in entry:
                values = [_bytes(v["value"]) for v in entry["values"]]
            else:
                values = [_bytes(entry["value"])]
            out.append((_bytes(entry["key"]), values))
        return out

    def read_counters(self, name: str) -> list[int]:
        """A per-CPU array of 64-bit counters, summed over CPUs, in index order."""
        rows = sorted(self.read(name), key=lambda row: int.from_bytes(row[0], sys.byteorder))
        return [sum(int.from_bytes(v, sys.byteorder) for v in values) for _, values in rows]
