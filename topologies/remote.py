"""Mininet nodes on another server: a machine reached over ssh, or a namespace server
of this one (topologies/nsserver.py).

A remote node's shell is started on its server by mnexec, in a network namespace of
its own, through the server's ssh connection (one per server, shared by every node and
command: ControlMaster); Mininet then drives it as any node, writing commands to that
shell. Commands for the server itself (`rcmd`), and processes started in the node
(`popen`), go through the same connection. A link between two nodes of one server is
made by the first node's shell, on that server, as Mininet makes any link.

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
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import PurePosixPath

from mininet.node import Host

from topologies.nodes import FabricHost, KernelRouter


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


_REMOTE = {FabricHost: RemoteFabricHost, KernelRouter: RemoteKernelRouter}


def remote_class(cls: type) -> type | None:
    """The class of a node of class `cls` whose shell runs on another server (None:
    such a node cannot run on another server yet, as a BMv2 switch, whose process and
    gRPC port the run reaches on this machine)."""
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
