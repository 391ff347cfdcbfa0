"""Mininet nodes on another server: a machine reached over ssh, or a namespace server
of this one (topologies/nsserver.py).

A remote node's shell is started on its server by mnexec, in a network namespace of
its own, through the server's ssh connection (one per server, shared by every node and
command: ControlMaster); Mininet then drives it as any node, writing commands to that
shell. Commands for the server itself (`rcmd`), and processes started in the node
(`popen`), go through the same connection. A link between two nodes of one server is
made by the first node's shell, on that server, as Mininet makes any link. A BMv2
switch's shell runs in its server's own namespace, as Mininet runs a software switch,
and its process is started and ended through that shell (`RemoteBmv2Switch`).

The model is Mininet's cluster edition (mininet/examples/cluster.py `RemoteMixin`),
without what keeps it from running here: it puts sudo in front of every command on
the server and of ssh itself, where a root head reaching root on its servers needs
neither (and a namespace server has no sudo); and it asks ssh for its connection
sharing only when told a control path, which `MininetCluster` never passes. The node's
`pid` is its shell's pid on its server, as the server's commands (`ip link ... netns`,
`mnexec -a`) need it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import shlex
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from mininet.node import Host, Switch

from topologies.bmv2 import (
    SERVER_FOLDER,
    Bmv2Error,
    Bmv2Switch,
    prepare_ports_line,
    run_cli,
    switch_argv,
)
from topologies.nodes import FabricHost, KernelRouter

# How often a switch on another server is asked whether it listens yet, while it starts.
READY_POLL_S = 0.05
REPO = Path(__file__).resolve().parents[1]


class RemoteNode:
    """Mixed into a Mininet node class (before it), puts the node's shell on another
    server. `ssh`: the ssh command line that reaches that server as root, destination
    last, without a remote command (NamespaceServers.ssh_argv gives one); `server`: the
    server's name, as the run calls it."""

    def __init__(self, name: str, ssh: list[str], server: str = "", **params):
        self.ssh_options, self.destination = list(ssh[:-1]), ssh[-1]
        self.server = server or self.destination
        super().__init__(name, **params)

    def startShell(self, mnopts=None):
        # mnexec -c (close descriptors), no -d: ssh -tt gives the shell a terminal of
        # its own there, and the node lives as long as that session.
        super().startShell(mnopts="-c")
        self.sendCmd("echo $$")
        self.pid = int(self.waitOutput())

    def _popen(self, cmd, tty: bool = True, **params):
        """Run `cmd` (a list, or words in a string) on the server over ssh; with a
        terminal (-tt) for the node's shell, without one for everything else."""
        if isinstance(cmd, str):
            cmd = cmd.split()
        ssh = self.ssh_options + (["-tt"] if tty else ["-T"]) + [self.destination]
        # Its own process group: Mininet ends a node by signalling its shell's group.
        params.setdefault("start_new_session", True)
        # The server's shell reads the command line again: every word quoted.
        return super()._popen(ssh + [shlex.join(str(word) for word in cmd)], **params)

    def popen(self, *args, cwd=None, **kwargs):
        """A process in this node's namespace (mnexec -a on the server), with no
        terminal; `cwd`, a folder on the server, is where it starts. Not detached (-d,
        as Mininet's own popen): detaching forks, and sshd stops passing the process
        its input once the process it started has ended."""
        mncmd = ["mnexec", "-a", str(self.pid)]
        kwargs.setdefault("mncmd", mncmd + (["env", "-C", str(cwd)] if cwd else []))
        return super().popen(*args, tty=False, **kwargs)

    def rcmd(self, command: str, timeout: float = 30.0) -> str:
        """Run a shell line on this node's server, outside any node (its root
        namespace); its output. Raises CalledProcessError when it fails."""
        done = self.rrun(["sh", "-c", command], timeout=timeout)
        done.check_returncode()
        return done.stdout

    def rrun(self, argv: list[str], stdin: str | None = None,
             timeout: float = 60.0) -> subprocess.CompletedProcess:
        """Run a command (an argument list) on this node's server, outside any node,
        with `stdin` as its input; the finished process, whatever its exit status."""
        return subprocess.run(over_ssh(self.ssh, argv), input=stdin, capture_output=True,
                              text=True, timeout=timeout)

    def rpopen(self, argv: list[str], cwd: str | None = None, **params) -> subprocess.Popen:
        """Start a command (an argument list) on this node's server, outside any node,
        in folder `cwd` there; its stdout is a pipe."""
        command = (["env", "-C", str(cwd)] if cwd else []) + list(argv)
        params.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.Popen(over_ssh(self.ssh, command), stdout=subprocess.PIPE,
                                start_new_session=True, **params)

    def python(self, module: str, *args: str, **params) -> subprocess.Popen:
        """`python -m <module> <args>` on this node's server, outside any node, from the
        project's folder there (at the same path as here, under the same interpreter:
        docs/scale-out.md); its input and output are pipes, and it is expected to end
        when its input closes: when the run lets it go, or dies."""
        params.setdefault("stdin", subprocess.PIPE)
        return self.rpopen([sys.executable, "-m", module, *args], cwd=str(REPO), **params)

    @property
    def ssh(self) -> list[str]:
        """The ssh command line that reaches this node's server, destination last."""
        return self.ssh_options + [self.destination]

    def put_files(self, files: dict[str, bytes]) -> None:
        """Write files (path -> content) on this node's server, folders made, in one
        command; each is checked there byte for byte (its SHA-256)."""
        lines = ["set -e"]
        for path, data in files.items():
            folder = str(PurePosixPath(path).parent)
            digest = hashlib.sha256(data).hexdigest()
            lines += [f"mkdir -p {shlex.quote(folder)}",
                      f"echo {base64.b64encode(data).decode()} | base64 -d > {shlex.quote(path)}",
                      f"echo {shlex.quote(f'{digest}  {path}')} | sha256sum -c --quiet -"]
        done = self.rrun(["sh"], "\n".join(lines) + "\n")
        if done.returncode != 0:
            raise OSError(f"writing {len(files)} files on {self.server}: "
                          f"{done.stderr.strip() or done.returncode}")

    def get_file(self, path: str) -> bytes:
        """The content of a file on this node's server (OSError if it cannot be read)."""
        done = subprocess.run(over_ssh(self.ssh, ["cat", path]), capture_output=True,
                              timeout=120)
        if done.returncode != 0:
            raise OSError(f"reading {path} on {self.server}: "
                          f"{done.stderr.decode(errors='replace').strip() or done.returncode}")
        return done.stdout


class RemoteHost(RemoteNode, Host):
    """A plain Mininet host whose shell runs on another server."""


class RemoteFabricHost(RemoteNode, FabricHost):
    """A fabric's host on another server."""


class RemoteKernelRouter(RemoteNode, KernelRouter):
    """A kernel-data-plane switch on another server."""


class RemoteBmv2Switch(RemoteNode, Bmv2Switch):
    """A BMv2 switch on another server. Its shell runs in that server's own network
    namespace, beside its ports, as Mininet runs a software switch. Its process is
    started from that shell without a program: the server's controller pushes the
    pipeline with the tables over P4Runtime, on that server
    (experiments/dataplanes/bmv2_server.py). Its ports, its queues (the Thrift CLI)
    and its process are all handled there; its pid and its P4Runtime port are checked
    there too. Its log is written on its server, in SERVER_FOLDER, and fetched into its
    log folder here when the fabric stops."""

    switch_pid: int | None = None

    def running(self) -> bool:
        return (self.switch_pid is not None
                and self.cmd(f"kill -0 {self.switch_pid} 2>/dev/null && echo yes").strip() == "yes")

    def launch(self) -> None:
        intfs = [intf for _, intf in self.port_intfs()]
        log = f"{SERVER_FOLDER}/{self.name}"
        argv = switch_argv(self.device_id, self.thrift_port, self.grpc_port,
                           self.port_intfs(), "", log)
        self.cmd(f"mkdir -p {SERVER_FOLDER}; {prepare_ports_line(intfs)}")
        # In the background of its shell: it ends with the shell (a hang-up to the
        # shell's jobs) when the shell's session ends: at the run's stop, or when the
        # next run removes a dead run's sessions (remove_leftovers_on too).
        self.cmd(f"{shlex.join(argv)} > {log}.out 2>&1 &")
        self.switch_pid = self.lastPid
        self.cmd(f"echo {self.switch_pid} > {log}.pid")

    def wait_ready(self) -> None:
        """Poll, in its shell on its server, until the process listens on its P4Runtime
        port; Bmv2Error (with the end of its output) if it exits or the deadline passes."""
        pid, port = self.switch_pid, self.grpc_port
        tries = int(self.start_timeout_s / READY_POLL_S)
        status = self.cmd(
            f"(for i in $(seq {tries}); do kill -0 {pid} 2>/dev/null || exit 2; "
            f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && exit 0; "
            f"sleep {READY_POLL_S}; done; exit 1); echo status=$?").strip().splitlines()
        if status and status[-1] == "status=0":
            return
        what = f"simple_switch_grpc for {self.name} on {self.server}"
        tail = self.cmd(f"tail -n 3 {SERVER_FOLDER}/{self.name}.out").strip()
        if status and status[-1] == "status=2":
            raise Bmv2Error(f"{what} exited before listening: {tail}")
        raise Bmv2Error(f"{what} did not listen on port {port} within "
                        f"{self.start_timeout_s:g}s: {tail}")

    def end_process(self) -> None:
        if self.switch_pid is not None:
            self.cmd(f"kill {self.switch_pid} 2>/dev/null")

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's signature
        if self.switch_pid is not None:
            pid = self.switch_pid
            self.cmd(f"kill {pid} 2>/dev/null; for i in $(seq 100); do "
                     f"kill -0 {pid} 2>/dev/null || break; sleep 0.05; done; "
                     f"kill -9 {pid} 2>/dev/null; rm -f {SERVER_FOLDER}/{self.name}.pid")
            self.switch_pid = None
        Switch.stop(self, deleteIntfs)

    @classmethod
    def batchShutdown(cls, switches, run=None):  # noqa: N802 - Mininet's
        """As Bmv2Switch's; then each switch's ports are deleted on its server, where
        no namespace takes them with it (on this machine FabricNet.stop does it), and
        the switches' logs are fetched into their log folder here, as a switch of this
        machine writes its own (one archive a server)."""
        super().batchShutdown(switches, run)
        for switch in switches:
            names = " ".join(intf for _, intf in switch.port_intfs())
            switch.cmd(f"for i in {names}; do ip link del $i 2>/dev/null; done")
        by_server: dict[str, list] = {}
        for switch in switches:
            by_server.setdefault(switch.server, []).append(switch)
        for mine in by_server.values():
            _fetch_logs(mine)
        return switches

    def cli(self, commands: list[str]) -> str:
        return run_cli(self.thrift_port, commands, f"{self.name} on {self.server}", self.rrun)

    def set_ports(self, up: bool) -> None:
        state = "up" if up else "down"
        self.cmd("; ".join(f"ip link set {intf} {state}" for _, intf in self.port_intfs()))

    def drop_sent(self, intf: str, on: bool) -> None:
        self.cmd(f"tc qdisc replace dev {intf} root pfifo limit 0" if on
                 else f"tc qdisc del dev {intf} root 2>/dev/null")


def _fetch_logs(switches: list[RemoteBmv2Switch]) -> None:
    """The logs of `switches` (all of one server) copied into each one's log folder
    here: `<switch>.txt` (BMv2's log; it adds the suffix) and `<switch>.out` (what the
    process printed). One that cannot be fetched is left where it is: the stop goes
    on."""
    first = switches[0]
    names = [f"{s.name}{suffix}" for s in switches for suffix in (".txt", ".out")]
    done = subprocess.run(over_ssh(first.ssh, ["tar", "-C", SERVER_FOLDER, "-cf", "-",
                                               "--ignore-failed-read", *names]),
                          capture_output=True, timeout=120)
    if not done.stdout:
        return
    folder = first.log_dir
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name in names:
                (folder / member.name).write_bytes(archive.extractfile(member).read())


def remove_leftovers_on(ssh: Sequence[str], ports: Sequence[str]) -> list[str]:
    """On the server `ssh` reaches, remove what a run that died left in the server's
    own namespace, where no node's namespace takes it away: its BMv2 switches'
    processes, by the pids they recorded (each checked to be a switch still), and
    any interface named as one of `ports` (the fabric's ports on that server: a BMv2
    switch's veths and tunnel ends live there). What it removed, by name."""
    line = (f"for f in {SERVER_FOLDER}/*.pid; do [ -e \"$f\" ] || continue; p=$(cat \"$f\"); "
            "grep -qs simple_switch /proc/$p/comm && kill -9 $p && echo pid-$p; "
            "rm -f \"$f\"; done; ip -o link show | cut -d: -f2 | cut -d@ -f1")
    done = subprocess.run(over_ssh(ssh, ["sh", "-c", line]), capture_output=True, text=True,
                          timeout=60)
    words = done.stdout.split()
    stale = sorted(set(words) & set(ports))
    if stale:
        subprocess.run(over_ssh(ssh, ["ip", "-force", "-batch", "-"]), capture_output=True,
                       text=True, timeout=60, input="".join(f"link del dev {i}\n" for i in stale))
    return [w for w in words if w.startswith("pid-")] + stale


_REMOTE = {FabricHost: RemoteFabricHost, KernelRouter: RemoteKernelRouter,
           Bmv2Switch: RemoteBmv2Switch}


def remote_class(cls: type) -> type | None:
    """The class of a node of class `cls` whose shell runs on another server (None:
    such a node cannot run on another server)."""
    return _REMOTE.get(cls)


def over_ssh(ssh: Sequence[str], argv: Sequence[str]) -> list[str]:
    """The command line that runs `argv` on the server `ssh` (its ssh command line,
    destination last) reaches, without a terminal; every word quoted, since the
    server's shell reads the line again."""
    return [*ssh[:-1], "-T", ssh[-1], shlex.join(argv)]


def is_remote(node) -> bool:
    """Whether a Mininet node's shell runs on another server: its pid is that
    server's, and nothing of it can be reached through this machine's /proc."""
    return isinstance(node, RemoteNode)
