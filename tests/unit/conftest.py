"""Fixtures shared by the unit tests.

The unit tests write only into temporary folders, never into the checkout (which may
belong to another user, e.g. root after `sudo make test`): what the code under test
writes into build/ by default (a P4 lab's program) goes under the session's temporary
folder, and Hypothesis keeps its example database and caches in a temporary folder of
its own instead of .hypothesis/ of the working directory. It is set before collection
ends, since Hypothesis's pytest plugin caches constants then.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

from labs import p4lab
from topologies.model import load_topology

HYPOTHESIS_HOME = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    home = Path(tempfile.mkdtemp(prefix="mrc-testbed-hypothesis-"))
    config.stash[HYPOTHESIS_HOME] = home
    set_hypothesis_home_dir(home)


def pytest_unconfigure(config: pytest.Config) -> None:
    home = config.stash.get(HYPOTHESIS_HOME, None)
    if home is not None:
        set_hypothesis_home_dir(None)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def lab_build_dir(tmp_path_factory):
    """The P4 labs' checks build their programs here unless a test gives its own
    folder (`--build-dir`, labs/p4lab.py)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(p4lab, "BUILD", tmp_path_factory.mktemp("build"))
        yield


@pytest.fixture(scope="module")
def fabric():
    """2tier-2plane: h0 h1 in rack 0, h2 h3 in rack 1, two planes of two T1s."""
    return load_topology("2tier-2plane")
