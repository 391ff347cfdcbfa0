"""kill -9 of a run that holds a BMv2 fabric split across namespace servers: the dead
run's switches (their processes and their ports, in their servers' own namespaces) are
removed at the next start, which comes up and checks every path; when it ends, nothing
of either run is left on any server (tests/integration/test_split_kill.py, on BMv2),
and its switches' logs have been fetched here.
Skipped with the reason where BMv2, p4c or sshd is missing."""

from __future__ import annotations

import time

from tests.integration.test_split_fabric import (  # noqa: F401 - no sshd: skip
    REPO,
    pytestmark,
)
from tests.integration.test_split_kill import kill_and_run_again
from topologies.model import load_topology


def test_after_kill_9_of_a_split_bmv2_run_the_next_is_clean_on_every_server(tmp_path):
    started = time.time()
    kill_and_run_again(tmp_path, "bmv2")
    # The next run's switches wrote their logs on their servers; its stop fetched them
    # here, where a switch of this machine writes its own.
    for switch in load_topology("2tier-2plane").switches:
        logs = REPO / "build" / "logs"
        printed = logs / f"{switch.name}.out"  # the process's own lines: its ports
        assert printed.stat().st_mtime >= started, printed
        assert f"Adding interface {switch.name}-eth0 as port 0" in printed.read_text()
        assert (logs / f"{switch.name}.txt").stat().st_mtime >= started
