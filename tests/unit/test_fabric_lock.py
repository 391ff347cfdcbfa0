"""The fabric lock with real processes contending: refused at once, stale after SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.run.fabric_lock import FabricBusy, FabricLock, Holder

REPO = Path(__file__).resolve().parents[2]

# A run in another process: takes the lock, names its folder, says so, then waits for
# stdin to close (or for a signal) before leaving the `with` block.
HOLDER = """
import sys
from pathlib import Path
from experiments.run.fabric_lock import FabricLock
with FabricLock(command="make run-experiment", path=Path(sys.argv[1])) as lock:
    lock.set_folder(sys.argv[2])
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
        assert Holder.parse(lock_file.read_text()).pid == os.getpid()


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
