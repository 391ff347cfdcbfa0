"""kill -9 of a run that holds a BMv2 fabric split across namespace servers: the dead
run's switches (their processes and their ports, in their servers' own namespaces) are
removed at the next start, which comes up and checks every path; when it ends, nothing
of either run is left on any server (tests/integration/test_split_kill.py, on BMv2).
Skipped with the reason where BMv2, p4c or sshd is missing."""

from __future__ import annotations

from tests.integration.test_split_fabric import pytestmark  # noqa: F401 - no sshd: skip
from tests.integration.test_split_kill import kill_and_run_again


def test_after_kill_9_of_a_split_bmv2_run_the_next_is_clean_on_every_server(tmp_path):
    kill_and_run_again(tmp_path, "bmv2")
