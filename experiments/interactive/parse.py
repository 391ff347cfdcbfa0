"""The testbed commands' arguments, read without a network: hosts, switches, sizes,
transports, and `send`, `link`, `switch`, `port`, `paths` as requests and as the
scenarios' own fault steps (experiments/faults/kinds/), so that the CLI applies a
fault as a run does.

Every mistake is a `CommandError`, one line naming the command, the argument and the
fix (`send: destination: 'h9' is not a host of 2tier-2plane; fix: use h0..h3`).
tests/unit/test_cli_commands.py holds them to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from experiments.faults import Step
from experiments.faults.kinds.link import LinkFlap
from experiments.faults.kinds.port import NicPortDown
from experiments.faults.kinds.switch import Blackhole, SwitchReboot
from hosts.protocol import MAX_MSG_LEN, ON_PLANES, TRANSPORTS
from topologies.errors import UserError
from topologies.model import Fabric

DEFAULT_BYTES = 1_000_000
SIZE_UNITS = {"k": 1_000, "m": 1_000_000}
SWITCH_STATES = {"down": (SwitchReboot, False), "up": (SwitchReboot, True),
                 "stop": (SwitchReboot, False), "start": (SwitchReboot, True),
                 "blackhole": (Blackhole, False), "restore": (Blackhole, True)}


class CommandError(UserError):
    """A CLI command with a bad argument: one line naming the argument and the fix."""


@dataclass(frozen=True)
class SendRequest:
    src: int
    dst: int
    size: int
    transport: str


def host_index(fabric: Fabric, name: str, command: str, what: str = "host") -> int:
    hosts = {h.name: h.index for h in fabric.hosts}
    if name not in hosts:
        raise CommandError(command, what, f"{name!r} is not a host of {fabric.name}",
                           f"use h0..h{len(hosts) - 1}")
    return hosts[name]


def switch_name(fabric: Fabric, name: str, command: str) -> str:
    if name not in {s.name for s in fabric.switches}:
        raise CommandError(command, "switch", f"{name!r} is not a switch of {fabric.name}",
                           f"use one of `nodes`, e.g. {fabric.switches[0].name}")
    return name


def one_switch(fabric: Fabric, args: list[str], command: str) -> str:
    """`COMMAND SWITCH`: exactly one switch."""
    if len(args) != 1:
        raise CommandError(command, "arguments", f"expected 1, got {len(args)}",
                           f"use `{command} {fabric.switches[0].name}`")
    return switch_name(fabric, args[0], command)


def parse_size(text: str, command: str = "send") -> int:
    """Bytes: `1500`, `64k`, `1M` (decimal units)."""
    digits, unit = (text[:-1], text[-1].lower()) if text[-1:].isalpha() else (text, "")
    if unit and unit not in SIZE_UNITS or not digits.isdigit() or int(digits) == 0:
        raise CommandError(command, "bytes", f"{text!r} is not a size",
                           "give a positive number of bytes, e.g. 1500, 64k or 1M")
    size = int(digits) * SIZE_UNITS.get(unit, 1)
    if size > MAX_MSG_LEN:
        raise CommandError(command, "bytes", f"{size} is more than a message may hold",
                           f"send at most {MAX_MSG_LEN} bytes")
    return size


def parse_send(fabric: Fabric, args: list[str],
               transports: tuple[str, ...]) -> tuple[SendRequest, ...]:
    """`send SRC[,SRC...] DST [BYTES] [TRANSPORT]`, in any order after the hosts: one
    request per source, all to the same destination (several sources: an incast)."""
    usage = "send h0 h3 [bytes] [transport]"
    if not 2 <= len(args) <= 4:
        raise CommandError("send", "arguments", f"expected 2 to 4, got {len(args)}",
                           f"use `{usage}`, or `send h1,h2,h3 h0 ...` for an incast")
    names = args[0].split(",")
    srcs = [host_index(fabric, name, "send", "source") for name in names]
    if len(set(srcs)) != len(srcs):
        raise CommandError("send", "source", f"{args[0]!r} names a host twice",
                           "name each source once, e.g. h1,h2,h3")
    dst = host_index(fabric, args[1], "send", "destination")
    if dst in srcs:
        raise CommandError("send", "destination", "is the source itself",
                           "name two different hosts")
    size, transport = DEFAULT_BYTES, transports[0]
    for arg in args[2:]:
        if arg in transports:
            transport = arg
        elif arg[:1].isdigit():
            size = parse_size(arg)
        elif arg in TRANSPORTS:
            raise CommandError("send", "transport", f"{arg} runs on the single-plane twin of "
                               f"{fabric.name}, not on this fabric",
                               f"use {arg}{ON_PLANES} here, or start the CLI on the twin "
                               "(make cli TWIN=1)")
        else:
            raise CommandError("send", "transport", f"{arg!r} is not a transport",
                               f"use one of {', '.join(transports)}")
    return tuple(SendRequest(src, dst, size, transport) for src in srcs)


def _state(word: str, command: str, states: dict[str, bool]) -> bool:
    if word not in states:
        raise CommandError(command, "state", f"{word!r} is not one of {', '.join(states)}",
                           f"use `{command} {'|'.join(states)} ...`")
    return states[word]


def parse_link(fabric: Fabric, args: list[str]) -> Step:
    """`link down|up A B`, or Mininet's own order `link A B down|up`."""
    if len(args) == 3 and args[2] in ("up", "down"):
        args = [args[2], args[0], args[1]]
    if len(args) != 3:
        raise CommandError("link", "arguments", f"expected 3, got {len(args)}",
                           "use `link down p0t0r0 p0t1s0` or `link up p0t0r0 p0t1s0`")
    up = _state(args[0], "link", {"down": False, "up": True})
    a, b = args[1], args[2]
    if not any({link.a, link.b} == {a, b} for link in fabric.links):
        example = fabric.links[-1]
        raise CommandError("link", "nodes", f"{a} and {b} are not linked in {fabric.name}",
                           f"name the two ends of a link, e.g. {example.a} {example.b} "
                           "(see `net`)")
    return Step(0.0, up, LinkFlap(a, b))


def parse_switch(fabric: Fabric, args: list[str]) -> Step:
    """`switch down|up|blackhole|restore S`, or Mininet's own `switch S start|stop`."""
    if len(args) == 2 and args[1] in ("start", "stop"):
        args = [args[1], args[0]]
    if len(args) != 2:
        raise CommandError("switch", "arguments", f"expected 2, got {len(args)}",
                           "use `switch down|up|blackhole|restore p0t1s0`")
    if args[0] not in SWITCH_STATES:
        raise CommandError("switch", "state", f"{args[0]!r} is not a switch state",
                           "use down, up (a reboot), blackhole or restore")
    kind, up = SWITCH_STATES[args[0]]
    return Step(0.0, up, kind(switch_name(fabric, args[1], "switch")))


def parse_port(fabric: Fabric, args: list[str]) -> Step:
    """`port down|up HOST PLANE`."""
    if len(args) != 3:
        raise CommandError("port", "arguments", f"expected 3, got {len(args)}",
                           "use `port down h0 1` or `port up h0 1`")
    up = _state(args[0], "port", {"down": False, "up": True})
    host = fabric.host(host_index(fabric, args[1], "port")).name
    planes = fabric.spec.planes
    if not args[2].isdigit() or int(args[2]) >= planes:
        raise CommandError("port", "plane", f"{args[2]!r} is not a plane of {fabric.name}",
                           f"use 0..{planes - 1}")
    return Step(0.0, up, NicPortDown(host, int(args[2])))


def parse_paths(fabric: Fabric, args: list[str]) -> tuple[int, list[int]]:
    """`paths HOST [PEER]`: the host and the peers to show (every other host if none)."""
    if not 1 <= len(args) <= 2:
        raise CommandError("paths", "arguments", f"expected 1 or 2, got {len(args)}",
                           "use `paths h0` or `paths h0 h3`")
    src = host_index(fabric, args[0], "paths")
    if len(args) == 1:
        return src, [h.index for h in fabric.hosts if h.index != src]
    peer = host_index(fabric, args[1], "paths", "peer")
    if peer == src:
        raise CommandError("paths", "peer", "is the host itself", "name another host")
    return src, [peer]
