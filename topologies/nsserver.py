"""Servers on one machine: each a set of namespaces (network, process ids, mounts) with
its own ssh server, so that a fabric split across servers can be built, tested and
shown without a second machine.

A namespace server stands in for a machine the head reaches over ssh. It has:
- its own network namespace, joined to the machine's root namespace by a veth pair
  whose root end is a port of the bridge BRIDGE: the head (the root namespace, at
  SUBNET.1) and every server (SUBNET.(10 + index)) share one L2 segment, the stand-in
  for the servers' network. Its MTU is UNDERLAY_MTU, room for a tunnelled jumbo frame;
- its own process ids (`ps` there shows its own processes, and killing its first
  process ends every other), so a server's cleanup can never reach another's nodes;
- its own /tmp and /run (tmpfs, private mounts): what Mininet and ssh keep there is
  the server's. Everything else, the project's checkout included, is the machine's, as
  a real server would have its own copy of it at the same path;
- an sshd of its own (`/usr/sbin/sshd`, the openssh-server package) on its address,
  which takes the head's key (made once in the state folder) for root, and allows many
  sessions at once: Mininet's cluster edition opens one per remote node and link, and
  OpenSSH's defaults (MaxStartups 10, MaxSessions 10) refuse the eleventh.

The servers a harness started are recorded in its state folder (`servers.json`: name,
index, address, pid), so that `stop` ends them and a later `start` finds those whose
process died (kill -9 of the harness) and removes what they left: their veth and their
record, never another server's. A server's process is known by the marker on its command
line (`mrc-nsserver:<state folder>:<name>`), not by its pid alone, which the kernel may
give to another program after it died.

`python3 -m topologies.nsserver start NAME...`, `stop [NAME...]`, `list`, `ssh NAME
COMMAND` (root; `make nsservers`, `make nsservers-stop`).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STATE = REPO / "build" / "servers"
BRIDGE = "mrcsrv-br"
VETH_PREFIX = "mrcsrv"  # the root end of server i's veth: mrcsrv<i>
SUBNET = "10.250.0"  # a /24: the head at .1, server i at .(10 + i)
HEAD = f"{SUBNET}.1"
FIRST_HOST = 10
MAX_SERVERS = 200
# A jumbo frame of 9,000 bytes plus a VXLAN header (50 bytes over IPv4) fits.
UNDERLAY_MTU = 9100
# The server's end of its veth, in its namespace (INSIDE waits for it by this name):
# the device its tunnels leave by.
SERVER_DEVICE = "eth0"
SSHD = "/usr/sbin/sshd"
MARKER = "mrc-nsserver"
READY_S = 10.0  # a server's sshd answers within this long, or its start failed
# Where a server's sshd reads its files, in its private /run (INSIDE copies them there).
INSIDE_FILES = "/run/mrc-sshd"
# Sessions sshd lets one connection, and unauthenticated connections it accepts at once.
MAX_SESSIONS = 256

# Run by `unshare` inside the new namespaces, as their first process: a private /run,
# where it copies the server's sshd files from its folder ($1) before a private /tmp
# hides them if the folder is there (a test's); the loopback up; then it waits for the
# veth end the head moves in, gives it the server's address ($2) and becomes the
# server's sshd. $0 is the marker.
INSIDE = r"""
set -e
mount -t tmpfs -o mode=755 mrc-run /run
mkdir -p /run/sshd /run/mrc-sshd
cp -p "$1"/* /run/mrc-sshd/
mount -t tmpfs -o mode=1777 mrc-tmp /tmp
ip link set lo up
i=0
while ! ip link show eth0 >/dev/null 2>&1; do
  i=$((i + 1)); [ "$i" -le 1000 ] || { echo "no veth end arrived" >&2; exit 3; }
  sleep 0.01
done
ip addr add "$2/24" dev eth0
ip link set eth0 up
exec /usr/sbin/sshd -D -e -f /run/mrc-sshd/sshd_config
"""


class ServerError(Exception):
    """A namespace server could not be started, reached or stopped (the message says
    which, and why)."""


@dataclass(frozen=True)
class Server:
    """One namespace server as its harness recorded it."""

    name: str
    index: int
    address: str
    pid: int  # unshare's: the namespaces' first process is its only child

    @property
    def veth(self) -> str:
        return f"{VETH_PREFIX}{self.index}"

    @property
    def mac(self) -> str:
        """Its MAC, by its index as its address is: a server that takes a dead one's
        index answers at the MAC the head and the others still have for that address
        (with a new one, ssh waited for their neighbour entries to go stale, past its
        timeout)."""
        return f"02:6d:72:63:{self.index >> 8:02x}:{self.index & 0xff:02x}"


def _run(argv: list[str], what: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise ServerError(f"{what}: {' '.join(argv)}: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def _link_exists(name: str) -> bool:
    return subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0


class NamespaceServers:
    """The namespace servers of one state folder (STATE unless given: tests give their
    own): starts, finds, reaches and stops them. Needs root."""

    def __init__(self, state: Path = STATE):
        self.state = Path(state).resolve()
        self.registry = self.state / "servers.json"
        self.key = self.state / "id_ed25519"
        # ssh's connection sockets: short paths (a socket's path has at most 107 bytes),
        # one folder per state folder.
        tag = hashlib.sha1(str(self.state).encode()).hexdigest()[:10]
        self.sockets = Path("/run") / f"mrcns-{tag}"

    # ------------------------------------------------------------ the record
    @contextmanager
    def _locked(self) -> Iterator[dict[str, Server]]:
        """The record, held against another harness of the same folder, written back
        as the caller leaves it."""
        self.state.mkdir(parents=True, exist_ok=True)
        with open(self.state / "servers.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            servers = self._read()
            yield servers
            self.registry.write_text(json.dumps(
                {name: asdict(server) for name, server in sorted(servers.items())},
                indent=2) + "\n")

    def _read(self) -> dict[str, Server]:
        try:
            data = json.loads(self.registry.read_text())
            return {name: Server(**fields) for name, fields in data.items()}
        except FileNotFoundError:
            return {}
        except (ValueError, TypeError) as err:
            raise ServerError(f"{self.registry}: not a record of namespace servers ({err}); "
                              "remove it and stop the servers' processes by hand") from None

    def _marker(self, name: str) -> str:
        return f"{MARKER}:{self.state}:{name}"

    def alive(self, server: Server) -> bool:
        """Whether the server's process still runs (its pid, with our marker)."""
        try:
            cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes()
        except OSError:
            return False
        return self._marker(server.name).encode() in cmdline.split(b"\0")

    def running(self) -> list[Server]:
        """The servers of this folder whose process runs, by index."""
        return sorted((s for s in self._read().values() if self.alive(s)),
                      key=lambda s: s.index)

    # ------------------------------------------------------------ start
    def start(self, names: list[str]) -> list[Server]:
        """Start a server for each name not running yet (after removing what dead ones
        left), and wait until each answers ssh. Returns every running server."""
        if not shutil.which("unshare") or not os.access(SSHD, os.X_OK):
            raise ServerError(f"namespace servers need unshare and {SSHD} (util-linux and "
                              "openssh-server: make deps installs them)")
        bad = [n for n in names if not n.replace("-", "").isalnum()]
        if bad:
            raise ServerError(f"server names {bad}: use letters, digits and dashes")
        self._keys()
        with self._locked() as servers:
            self._remove_dead(servers)
            _bridge()
            started = []
            for name in names:
                if name in servers:
                    continue
                # Indexes are the machine's: another harness's servers share the bridge.
                taken = {s.index for s in servers.values()} | _veth_indexes()
                index = next(i for i in range(MAX_SERVERS) if i not in taken)
                server = self._spawn(name, index)
                servers[name] = server
                started.append(server)
            try:
                for server in started:
                    self._wait_ssh(server)
            except ServerError:
                for server in started:
                    self._end(server)
                    del servers[server.name]
                raise
            return sorted(servers.values(), key=lambda s: s.index)

    def _keys(self) -> None:
        """The head's key, and the servers' host key (one for all: they stand for
        machines of one operator)."""
        self.state.mkdir(parents=True, exist_ok=True)
        for path in (self.key, self.state / "ssh_host_ed25519_key"):
            if not path.exists():
                _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mrc-testbed",
                      "-f", str(path)], "making an ssh key")
        (self.state / "authorized_keys").write_text(
            (self.key.with_suffix(".pub")).read_text())

    def _spawn(self, name: str, index: int) -> Server:
        folder = self.state / name
        folder.mkdir(parents=True, exist_ok=True)
        address = f"{SUBNET}.{FIRST_HOST + index}"
        for part in ("ssh_host_ed25519_key", "authorized_keys"):
            shutil.copy2(self.state / part, folder / part)
        (folder / "sshd_config").write_text("\n".join([
            f"ListenAddress {address}",
            f"HostKey {INSIDE_FILES}/ssh_host_ed25519_key",
            f"AuthorizedKeysFile {INSIDE_FILES}/authorized_keys",
            "PidFile none",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "UseDNS no",
            # Its files are a copy in a tmpfs, whoever owns the state folder.
            "StrictModes no",
            "PrintMotd no",
            "LogLevel ERROR",
            f"MaxSessions {MAX_SESSIONS}",
            f"MaxStartups {MAX_SESSIONS}",
            "",
        ]))
        log = open(folder / "sshd.log", "w")
        proc = subprocess.Popen(
            ["unshare", "--net", "--pid", "--mount", "--fork", "--mount-proc",
             "--propagation", "private", "sh", "-c", INSIDE, self._marker(name),
             str(folder), address],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()
        server = Server(name, index, address, proc.pid)
        try:
            child = _only_child(proc.pid)
            _run(["ip", "link", "add", server.veth, "mtu", str(UNDERLAY_MTU), "type", "veth",
                  "peer", "name", SERVER_DEVICE, "address", server.mac, "mtu", str(UNDERLAY_MTU),
                  "netns", str(child)], f"server {name}: its veth")
            _run(["ip", "link", "set", server.veth, "master", BRIDGE, "up"],
                 f"server {name}: its bridge port")
        except ServerError:
            self._end(server)
            raise
        return server

    def ssh_argv(self, server: Server) -> list[str]:
        """The ssh command line (without the remote command) that reaches `server` as
        root, sharing one connection per server."""
        self.sockets.mkdir(mode=0o700, exist_ok=True)
        return ["ssh", "-i", str(self.key), "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=no",
                "-o", f"UserKnownHostsFile={self.state / 'known_hosts'}",
                "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=5", "-o", "ControlMaster=auto",
                "-o", f"ControlPath={self.sockets}/%h", "-o", "ControlPersist=60",
                f"root@{server.address}"]

    def _wait_ssh(self, server: Server) -> None:
        deadline = time.monotonic() + READY_S
        while True:
            done = subprocess.run(self.ssh_argv(server) + ["true"], capture_output=True,
                                  text=True)
            if done.returncode == 0:
                return
            if not self.alive(server) or time.monotonic() > deadline:
                log = (self.state / server.name / "sshd.log")
                said = log.read_text().strip() if log.exists() else ""
                raise ServerError(f"server {server.name} ({server.address}) did not answer "
                                  f"ssh within {READY_S:g} s: "
                                  f"{said or done.stderr.strip() or 'no reason given'}")
            time.sleep(0.05)

    # ------------------------------------------------------------ use
    def ssh(self, name: str, command: str, timeout: float = 30.0
            ) -> subprocess.CompletedProcess:
        """Run `command` (a shell line) on server `name`; its output and return code."""
        server = self._read().get(name)
        if server is None or not self.alive(server):
            raise ServerError(f"no namespace server {name} runs here "
                              f"(running: {[s.name for s in self.running()]})")
        return subprocess.run(self.ssh_argv(server) + [command], capture_output=True,
                              text=True, timeout=timeout)

    # ------------------------------------------------------------ stop
    def stop(self, names: list[str] | None = None) -> list[str]:
        """End the named servers (every server of this folder when None): their
        processes, veths and records; the bridge goes with the last. Returns the names
        ended."""
        with self._locked() as servers:
            ended = []
            for name in list(servers) if names is None else names:
                server = servers.pop(name, None)
                if server is not None:
                    self._end(server)
                    ended.append(name)
            self._remove_dead(servers)
            if not servers:
                if _link_exists(BRIDGE) and not _bridge_ports():
                    _run(["ip", "link", "del", BRIDGE], "removing the servers' bridge")
                shutil.rmtree(self.sockets, ignore_errors=True)
            return ended

    def _remove_dead(self, servers: dict[str, Server]) -> None:
        for name, server in list(servers.items()):
            if not self.alive(server):
                self._end(server)
                del servers[name]

    def _end(self, server: Server) -> None:
        """The server's processes (its namespaces' first process, and with it all of
        them), its shared ssh connection and its veth."""
        subprocess.run(["ssh", "-o", f"ControlPath={self.sockets}/%h", "-O", "exit",
                        f"root@{server.address}"], capture_output=True)
        if self.alive(server):
            os.killpg(server.pid, signal.SIGKILL)
            try:
                os.waitpid(server.pid, 0)
            except ChildProcessError:
                _wait_gone(server.pid)
        if _link_exists(server.veth):
            subprocess.run(["ip", "link", "del", server.veth], capture_output=True)


def _bridge() -> None:
    """The servers' L2 segment, with the head's address on it."""
    if _link_exists(BRIDGE):
        return
    _run(["ip", "link", "add", BRIDGE, "mtu", str(UNDERLAY_MTU), "type", "bridge"],
         "the servers' bridge")
    _run(["ip", "addr", "add", f"{HEAD}/24", "dev", BRIDGE], "the head's address")
    _run(["ip", "link", "set", BRIDGE, "up"], "the servers' bridge")


def _link_names(*only: str) -> list[str]:
    """The names of the root namespace's interfaces (`ip link show` and `only`'s
    filter, e.g. "master", BRIDGE)."""
    out = subprocess.run(["ip", "-o", "link", "show", *only], capture_output=True,
                         text=True).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if line]


def _bridge_ports() -> list[str]:
    return _link_names("master", BRIDGE)


def _veth_indexes() -> set[int]:
    """The indexes of every server's veth on the machine, whichever harness made it."""
    return {int(name[len(VETH_PREFIX):]) for name in _link_names()
            if name.startswith(VETH_PREFIX) and name[len(VETH_PREFIX):].isdigit()}


def _only_child(pid: int, timeout: float = 5.0) -> int:
    """The pid of `pid`'s first child, once it exists (unshare forks it)."""
    deadline = time.monotonic() + timeout
    path = Path(f"/proc/{pid}/task/{pid}/children")
    while time.monotonic() < deadline:
        try:
            children = path.read_text().split()
        except OSError:
            raise ServerError(f"unshare (pid {pid}) ended before its namespaces "
                              "started") from None
        if children:
            return int(children[0])
        time.sleep(0.005)
    raise ServerError(f"unshare (pid {pid}) made no namespaces within {timeout:g} s")


def _wait_gone(pid: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m topologies.nsserver",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", type=Path, default=STATE,
                        help="the harness's folder (keys, configurations, record)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("start", help="start servers").add_argument("names", nargs="+")
    commands.add_parser("stop", help="stop servers (all without names)").add_argument(
        "names", nargs="*")
    commands.add_parser("list", help="the servers running, one a line")
    ssh = commands.add_parser("ssh", help="run a command on a server")
    ssh.add_argument("name")
    ssh.add_argument("words", nargs=argparse.REMAINDER, help="the command, as typed")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("error: namespace servers need root (sudo make nsservers)", file=sys.stderr)
        return 2
    harness = NamespaceServers(args.state)
    try:
        if args.command == "start":
            for server in harness.start(args.names):
                print(f"{server.name} {server.address} (pid {server.pid}): "
                      f"{' '.join(harness.ssh_argv(server))}")
        elif args.command == "stop":
            ended = harness.stop(args.names or None)
            print(f"stopped: {' '.join(ended) or 'none running'}")
        elif args.command == "list":
            for server in harness.running():
                print(f"{server.name} {server.address} (pid {server.pid})")
        else:
            if not args.words:
                parser.error("ssh needs a command to run on the server")
            done = harness.ssh(args.name, " ".join(args.words))
            sys.stdout.write(done.stdout)
            sys.stderr.write(done.stderr)
            return done.returncode
    except ServerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
