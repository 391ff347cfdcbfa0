"""Notice when a running fabric disappears from under its run, and end the run at once.

Every Mininet node lives as long as its shell process (`mininet:<node>`): the node's
namespaces, interfaces and agents go with it. When something outside the run removes
them (a `kill`, an `ip netns` clean-up, another tool that ignored the fabric lock), the
run would otherwise wait for agents that no longer exist until its transfers time out,
and its teardown would talk to shells that are gone. So while a fabric is up, a thread
looks at its node shells every `PERIOD_S`; the first one found gone (no process, or a
zombie) interrupts the main thread with an exception naming the node, within about a
second (the caller names the exception: experiments/run/lifecycle.py `NetworkGone`). The
run then ends as on Ctrl-C, and its teardown, told that the network is
gone, removes what is left instead of stopping node by node.

The main thread is interrupted by a signal (`SIGNAL`) sent to it alone: a signal
handler is the one way to raise an exception in the main thread while it blocks in a
system call, and Python runs handlers only in the main thread.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterable

PERIOD_S = 0.5
SIGNAL = signal.SIGUSR2


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie has ended: only its parent has not reaped it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


class FabricWatch:
    """Watch `nodes` ((name, shell pid) pairs) from a thread; `start()` in the main
    thread. The first node found gone raises `error(message)` in the main thread; `gone`
    names the first node found gone (None while all run). `stop()` ends the watch
    before the run's own teardown, which takes the nodes down on purpose.
    """

    def __init__(self, nodes: Iterable[tuple[str, int]], error: type[BaseException],
                 period_s: float = PERIOD_S):
        self.error = error
        self.nodes = [(name, pid) for name, pid in nodes if pid]
        self.period_s = period_s
        self.gone: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._main = threading.main_thread().ident
        self._previous = None

    def start(self) -> FabricWatch:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("a FabricWatch is started from the main thread")
        self._previous = signal.signal(SIGNAL, self._interrupt)
        self._thread = threading.Thread(target=self._loop, name="fabric-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._previous is not None:
            signal.signal(SIGNAL, self._previous)
            self._previous = None

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            for name, pid in self.nodes:
                if not alive(pid):
                    self.gone = f"node {name} (its shell, pid {pid}, has ended)"
                    signal.pthread_kill(self._main, SIGNAL)
                    return

    def _interrupt(self, signum, frame) -> None:
        if self.gone and not self._stop.is_set():
            raise self.error(f"the network disappeared from under the run: {self.gone}")
