"""Skips reach only the tests that need what is missing: without root, the unit tests run.

The Mininet tests (tests/integration) need root and Linux >= 6.1, the P4 tests
(tests/p4) BMv2 and p4c. Their conftest hooks see every collected item, so each must
mark only the items of its own folder.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534


def load_conftest(folder: str):
    spec = importlib.util.spec_from_file_location(
        f"conftest_{folder}", REPO / "tests" / folder / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeItem(SimpleNamespace):
    def add_marker(self, marker):
        self.markers.append(marker)

    def get_closest_marker(self, name):
        return None


def items(*paths: str) -> list[FakeItem]:
    return [FakeItem(path=REPO / p, markers=[]) for p in paths]


def test_the_integration_skip_marks_only_integration_tests():
    conftest = load_conftest("integration")
    collected = items("tests/unit/test_wire.py", "tests/integration/test_agents.py",
                      "tests/p4/test_compile.py", "tests/integration/sub/test_x.py")
    conftest.skip_here(collected, "needs root (Mininet namespaces)")
    marked = [item.path.relative_to(REPO).as_posix() for item in collected if item.markers]
    assert marked == ["tests/integration/test_agents.py", "tests/integration/sub/test_x.py"]
    assert collected[1].markers[0].kwargs["reason"] == "needs root (Mininet namespaces)"
    fresh = items("tests/integration/test_agents.py")
    conftest.skip_here(fresh, None)
    assert not fresh[0].markers


def test_the_p4_skip_marks_only_p4_tests(monkeypatch):
    conftest = load_conftest("p4")
    monkeypatch.setattr(conftest, "SWITCH_SKIP", "simple_switch_grpc not found")
    collected = items("tests/unit/test_wire.py", "tests/integration/test_agents.py",
                      "tests/p4/test_mrc_switch.py")
    conftest.pytest_collection_modifyitems(None, collected)
    assert [bool(item.markers) for item in collected] == [False, False, True]


def unprivileged(argv: list[str], home: Path) -> list[str]:
    if os.geteuid() != 0:
        return argv
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv not found: cannot drop root to run pytest as a normal user")
    # setpriv fails rather than run the command as root, so no Mininet test can start.
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
            "env", f"HOME={home}", *argv]


def test_as_a_normal_user_the_unit_tests_run_and_the_rest_is_skipped():
    # pytest's own tmp_path lies under a folder only root may enter.
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch)
        home.chmod(0o777)
        argv = unprivileged([sys.executable, "-m", "pytest", "-q", "-rs", "-p",
                             "no:cacheprovider", "--basetemp", str(home / "pytest"),
                             "tests/unit/test_topology_model.py",
                             "tests/integration/test_kernel_paths.py"], home)
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    last = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout + done.stderr
    passed = re.search(r"(\d+) passed", last)
    skipped = re.search(r"(\d+) skipped", last)
    assert passed and int(passed.group(1)) >= 5, last
    assert skipped and int(skipped.group(1)) >= 1, last
    skip_lines = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skip_lines and all("tests/integration/" in line and "needs root" in line
                              for line in skip_lines), skip_lines
