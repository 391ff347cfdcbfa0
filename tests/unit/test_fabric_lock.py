"""The fabric lock with real processes contending: refused at once, stale after SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.run.cleanup import Remains, namespace_of, owned
from experiments.run.fabric_lock import FabricBusy, FabricLock, Holder

REPO = Path(__file__).resolve().parents[2]

# A run in another process: takes the lock, names its folder, says so, then waits for
# stdin to close (or for a signal) before leaving the `with` block.
HOLDER = """
import sys
from pathlib import Path
from experiments.run.cleanup import Remains
from experiments.run.fabric_lock import FabricLock
with FabricLock(command="make run-experiment", path=Path(sys.argv[1])) as lock:
    lock.set_folder(sys.argv[2])
    lock.record(Remains(nodes=("h0", "p0t0r0"), namespaces=(4026532001,),
                        interfaces=("h0-eth0", "p0t0r0-eth0"), pins=True))
    print("locked", flush=True)
    sys.stdin.read()
"""


def start_holder(lock_file: Path, folder: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock_file), folder], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_second_run_is_refused_in_one_line_naming_the_first(tmp_path):
    lock_file = tmp_path / "fabric.lock"
    first = start_holder(lock_file, "results/20260101-2tier-2plane-incast")
    try:
        with pytest.raises(FabricBusy) as refused:
            FabricLock(command="second", path=lock_file).acquire()
        message = str(refused.value)
        assert "\n" not in message
        assert f"pid {first.pid}" in message
        assert "results/20260101-2tier-2plane-incast" in message
        assert "make run-experiment" in message and f"kill {first.pid}" in message
        assert refused.value.holder.pid == first.pid
        assert first.poll() is None  # the first run is not disturbed
    finally:
        first.stdin.close()
        first.wait(timeout=10)


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path):
    lock_file = tmp_path / "fabric.lock"
    first = start_holder(lock_file, "results/killed-run")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    # The file still names the dead run, but the kernel dropped its flock.
    assert Holder.parse(lock_file.read_text()).pid == first.pid
    with FabricLock(command="next run", path=lock_file) as lock:
        assert lock.stale is not None and lock.stale.pid == first.pid
        assert lock.stale.folder == "results/killed-run"
        # What the dead run's fabric put on the machine, for the new holder to remove.
        assert lock.stale.remains == Remains(nodes=("h0", "p0t0r0"), namespaces=(4026532001,),
                                             interfaces=("h0-eth0", "p0t0r0-eth0"), pins=True)
        now = Holder.parse(lock_file.read_text())
        assert now.pid == os.getpid() and not now.remains  # the new holder has built nothing


def test_a_lock_file_of_an_older_holder_names_no_remains():
    holder = Holder.parse('{"pid": 12, "command": "make paper", "remains": "h0"}')
    assert holder.pid == 12 and holder.remains == Remains()
    odd = Remains.from_dict({"nodes": ["h0", 3], "namespaces": ["x", 7], "pins": "yes"})
    assert odd == Remains(nodes=("h0",), namespaces=(7,))


def test_only_the_testbed_s_processes_naming_a_recorded_interface_are_a_run_s(tmp_path):
    # A process of the testbed's kind (the agents' command line) in the root namespace,
    # as a capture or a BMv2 switch is, naming an interface on its command line.
    proc = subprocess.Popen(["bash", "-c", "exec -a 'python3 -m hosts.agent -i 1@h0-eth0' "
                             "sleep 30"])
    try:
        # Until the exec has happened: bash's own command line names the agent too.
        deadline = time.monotonic() + 10
        while not Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"python3 -m"):
            assert time.monotonic() < deadline, "bash never ran its exec"
            time.sleep(0.005)
        mine = owned(Remains(interfaces=("h0-eth0",)))
        assert proc.pid in mine.processes
        # Another run's interface, a prefix of a name, or the namespace cleaning up (the
        # root's) recorded as a node's: none of them makes the process this run's.
        for other in (Remains(interfaces=("h0-eth1",)), Remains(interfaces=("h0-eth",)),
                      Remains(namespaces=(namespace_of(os.getpid()),))):
            assert proc.pid not in owned(other).processes
    finally:
        proc.kill()
        proc.wait()


def test_the_lock_is_released_on_normal_exit(tmp_path):
    lock_file = tmp_path / "fabric.lock"
    first = start_holder(lock_file, "results/done")
    first.stdin.close()
    assert first.wait(timeout=10) == 0
    assert lock_file.read_text() == ""  # released, and says so
    with FabricLock(path=lock_file) as lock:
        assert lock.held and lock.stale is None
    assert not lock.held


def test_two_holders_in_one_process_conflict_too(tmp_path):
    lock_file = tmp_path / "fabric.lock"
    with FabricLock(command="cli", path=lock_file) as lock:
        lock.set_folder("results/cli")
        with pytest.raises(FabricBusy, match=f"pid {os.getpid()} \\(cli\\), results results/cli"):
            FabricLock(path=lock_file).acquire()
    FabricLock(path=lock_file).acquire().release()


def test_a_holder_that_has_not_written_yet_is_named_as_unknown(tmp_path, monkeypatch):
    import fcntl

    from experiments.run import fabric_lock

    monkeypatch.setattr(fabric_lock, "CONTENT_WAIT_S", 0.05)
    lock_file = tmp_path / "fabric.lock"
    with open(lock_file, "w") as raw:
        fcntl.flock(raw, fcntl.LOCK_EX)
        with pytest.raises(FabricBusy, match="has not said who it is yet"):
            FabricLock(path=lock_file).acquire()


def test_the_lock_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MRC_FABRIC_LOCK", str(tmp_path / "x.lock"))
    assert FabricLock().path == tmp_path / "x.lock"
