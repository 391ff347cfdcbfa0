"""Mininet node classes for the Linux parts of the fabric: hosts and kernel routers.

Both are ordinary Mininet hosts (each in its own network namespace) that run the `ip`
commands they are handed; what makes them hosts or switches is that configuration,
built elsewhere (controller/kernel.py) and handed over by the data-plane target:
- `FabricHost`: a host with one port per plane (on every target), configured when
  Mininet configures it, from the `commands` the builder passes in;
- `KernelRouter`: IPv6 forwarding on, its `setup_commands` run at start; the target
  installs its tables once the network is up.

Linux flushes a port's routes and neighbour entries when the port is set down. A real
host or switch keeps its static configuration across a link flap, so each node is
handed, with its commands, the ones that put each port's entries back, and runs them
in `restore_port()` when that port comes up again.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from mininet.node import Host

# Quiet, deterministic IPv6: no DAD, no router solicitations, no autoconf addresses.
_SYSCTLS = (
    "net.ipv6.conf.all.accept_dad=0",
    "net.ipv6.conf.default.accept_dad=0",
    "net.ipv6.conf.all.accept_ra=0",
    "net.ipv6.conf.default.accept_ra=0",
    "net.ipv6.conf.all.router_solicitations=0",
    "net.ipv6.conf.default.router_solicitations=0",
    "net.ipv6.conf.all.disable_ipv6=0",
    "net.ipv6.conf.default.disable_ipv6=0",
)


class CommandError(RuntimeError):
    """A command run in a node failed; the message names the node and the command."""


# The longest line handed to a node's shell at once: Mininet writes commands to the
# shell's terminal, whose line discipline keeps at most 4,095 characters of a line.
LINE_CHARS = 3000


def _steps(commands: list[str]) -> list[tuple[int, str]]:
    """The shell steps that run `commands`, each with the index of its first command:
    a run of `ip` (or `tc`) commands with the same options goes to one `ip -batch` (`tc
    -batch`), up to half a line, since a process costs a few milliseconds and a node's
    tables and queues are dozens of commands; any other command goes alone."""
    steps: list[tuple[int, str]] = []
    group: list[str] = []
    start, tool = 0, None  # the tool and its options, as the group's command line

    def close() -> None:
        if group:
            lines = " ".join(shlex.quote(line) for line in group)
            steps.append((start, f"printf '%s\\n' {lines} | {tool} -batch -"))

    for index, command in enumerate(commands):
        words = command.split()
        if words[:1] in (["ip"], ["tc"]) and not set(command) & _SHELL_CHARS:
            flags = []
            for word in words[1:]:
                if not word.startswith("-"):
                    break
                flags.append(word)
            rest = " ".join(words[1 + len(flags):])
            line_tool = " ".join(words[:1 + len(flags)])
            fits = sum(map(len, group)) + len(rest) < LINE_CHARS // 2
            if line_tool != tool or not fits:
                close()
                group, start, tool = [], index, line_tool
            group.append(rest)
            continue
        close()
        group, tool = [], None
        steps.append((index, command))
    close()
    return steps


# Characters that make a command more than one `ip` invocation.
_SHELL_CHARS = set(";&|<>$`'\"\\(){}")
_BATCH_FAILED = re.compile(r"Command failed -:(\d+)")


def run_commands(commands: list[str], run: Callable[[str], str], node: str) -> int:
    """Run the commands through `run` (a node's shell), in order, stopping at the
    first that fails, and raise CommandError naming it with its output. Many commands
    go in one line (up to LINE_CHARS), `ip` and `tc` commands in batches (_steps): each turn
    through a node's shell, and each process, costs a few milliseconds, and a fabric's
    bring-up runs thousands of commands. Returns how many ran, so a run can report its
    table writes."""
    steps = [f'[ -n "$__f" ] || {{ echo __cmd={i}; {{ {step}; }} 2>&1 || __f={i}; }}'
             for i, step in _steps(commands)]
    line, length = [], 0
    for index, step in enumerate(steps):
        line.append(step)
        length += len(step) + 2
        if index + 1 < len(steps) and length + len(steps[index + 1]) < LINE_CHARS:
            continue
        output = run("__f=; " + "; ".join(line) + '; echo "__failed=$__f"')
        line, length = [], 0
        head, _, failed = output.rpartition("__failed=")
        failed = failed.strip()
        if failed:
            text = head.rpartition(f"__cmd={failed}")[2]
            index = int(failed)
            batch = _BATCH_FAILED.search(text)
            if batch:  # `ip -batch` says which of its lines failed, from 1
                index += int(batch.group(1)) - 1
                # its error is the last it printed; the lines before it printed the rest
                text = "".join(text[:batch.start()].strip().splitlines()[-1:])
            raise CommandError(f"{node}: '{commands[index]}' failed: "
                               f"{text.strip() or 'exit status not 0'}")
    return len(commands)


class StaticConfigNode(Host):
    """A node whose static `ip` configuration survives link flaps: it keeps, for each
    port, the commands that put that port's entries back."""

    extra_sysctls: tuple[str, ...] = ()

    def config(self, **params):
        result = super().config(**params)
        self.port_commands: dict[str, list[str]] = {}
        self.run(["sysctl -qw " + " ".join(_SYSCTLS + self.extra_sysctls)])
        return result

    def run(self, commands: list[str]) -> int:
        """Run commands in this node's namespace; raise CommandError on a failure."""
        return run_commands(commands, self.cmd, self.name)

    def install(self, commands: list[str], port_commands: dict[str, list[str]]) -> int:
        """Run static configuration; `port_commands[intf]` are the commands among them
        that put the entries of port `intf` back after Linux flushed them."""
        for intf, cmds in port_commands.items():
            self.port_commands.setdefault(intf, []).extend(cmds)
        return self.run(commands)

    def restore_port(self, intf: str) -> int:
        """Put back what Linux flushed when `intf` went down (not a table change)."""
        return self.run(self.port_commands.get(intf, []))


class FabricHost(StaticConfigNode):
    """A host with one port per plane, configured from the builder's `commands`."""

    def config(self, commands=(), port_commands=None, **params):
        result = super().config(**params)
        self.install(list(commands), port_commands or {})
        return result

    def set_port(self, intf: str, up: bool) -> None:
        """A NIC port going down or coming back (its peer sees carrier loss)."""
        self.run([f"ip link set {intf} {'up' if up else 'down'}"])
        if up:
            self.restore_port(intf)


class KernelRouter(StaticConfigNode):
    """A Linux router namespace: forwards IPv6; runs its `setup_commands` at start and
    the tables it is given by `install()`."""

    extra_sysctls = ("net.ipv6.conf.all.forwarding=1",)

    def config(self, setup_commands=(), **params):
        result = super().config(**params)
        self.run(list(setup_commands))
        return result

    def port_names(self) -> list[str]:
        # Not `ports`: Mininet's nodes keep their port numbers in a dict of that name.
        return [intf for intf in self.intfNames() if intf != "lo"]

    def power_off(self) -> None:
        """A reboot's first half: every port down, every table entry gone."""
        self.run([f"ip link set {intf} down" for intf in self.port_names()]
                 + ["ip -6 route flush proto boot", "ip -6 neigh flush all"])
        self.port_commands = {}

    def power_on(self, commands: list[str], port_commands: dict[str, list[str]]) -> int:
        """A reboot's second half: ports up, then the static tables it is given again."""
        self.run([f"ip link set {intf} up" for intf in self.port_names()])
        return self.install(commands, port_commands)
