"""What the lab tests give a lab's check in place of the machine: a stand-in for BMv2
and p4c (P4 labs), for the sandbox's P4Info and the fabric (Lab 07), and runs made
after the work copy's start (Labs 06, 08, 09), so that a check is tested on its logic.

`prepare_lab(number, copy, tmp, monkeypatch)` returns the folder to check and the
options it needs. Synthetic runs are built here in the shape a run or CLI session
writes them (experiments/run/lifecycle.py): topology.json, summary.json, agents' event logs
and pcaps made with scapy, so the checks read them with their own code.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from labs import course, p4lab
from labs.course import STARTED

FIXTURE_P4INFO = Path(__file__).resolve().parent / "unit" / "fixtures" / "mrc_switch.p4info.txtpb"
START = "2026-01-01T00:00:00"  # the start stamp of every prepared work copy
LATER = "20260102-000000"  # runs are made after it


def fake_bmv2(monkeypatch, passed: bool = True) -> None:
    """The P4 labs' compile and BMv2 run replaced: the program compiles (really, where
    p4c-bm2-ss is installed) and the PTF tests say `passed`."""
    if not p4lab.p4c_available():
        monkeypatch.setattr(p4lab, "p4c_available", lambda: True)
        monkeypatch.setattr(p4lab, "compile_program", lambda main, out: (out, out))
    monkeypatch.setattr(p4lab, "run_on_bmv2", lambda number, folder, tests: p4lab.Behaviour(
        True, passed, "14 passed" if passed else "1 failed, 13 passed",
        () if passed else ("FAILED tests/p4/test_labs_p4.py::test_lab03_x",)))


def fake_fabric(monkeypatch, outcome=None) -> None:
    """Lab 07: the sandbox gets the fixture P4Info; the fabric part says `outcome`."""
    from labs.lab07_p4runtime_by_hand import check as lab07

    monkeypatch.setattr(lab07, "p4info_path", lambda: FIXTURE_P4INFO)
    monkeypatch.setattr(lab07.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(lab07, "fabric_missing", lambda: None)
    monkeypatch.setattr(lab07, "on_fabric", lambda path: outcome or (
        True, "on a BMv2 fabric: every path through p0t1s1 carries a datagram", ""))


def work_copy(number: str, copy: str, tmp: Path) -> Path:
    """A copy of the lab's `copy` as a student's work copy started at START."""
    folder = tmp / "work"
    shutil.copytree(course.files_dir(number, copy), folder, dirs_exist_ok=True)
    (folder / STARTED).write_text(START + "\n")
    return folder


def prepare_lab(number: str, copy: str, tmp: Path, monkeypatch) -> tuple[Path, dict]:
    """(folder to check, extra options) for the lab's skeleton or solution. The BMv2
    stand-in says what the real switch says of each (tests/p4/test_lab_checks_p4.py):
    the solution passes the PTF tests, the skeleton does not."""
    fake_bmv2(monkeypatch, passed=copy == "solution")
    fake_fabric(monkeypatch)
    root = tmp / "results"
    root.mkdir(parents=True, exist_ok=True)
    if number not in ("06", "08", "09"):
        # The P4 labs' compile and BMv2 run are the stand-ins above: let them run.
        return course.files_dir(number, copy), {"static_only": False, "offline": False}
    if copy == "solution":
        # A solution reads the runs shipped with it (labs 06, 09); Lab 08's reference
        # session is not shipped yet: a synthetic one stands where its answers point.
        if number != "08":
            return course.files_dir(number, copy), {"results_root": root}
        folder = tmp / "solution"
        shutil.copytree(course.files_dir(number, copy), folder)
        cli_session(folder / "runs" / "20260101-000000-2tier-2plane-cli")
        return folder, {"results_root": root}
    folder = work_copy(number, copy, tmp)
    if number == "06":
        runs = course.lab_dir("06") / "solution" / "runs"
        for scenario, topology in (("link-flap", "2tier-2plane"), ("incast", "2tier-8plane")):
            made = root / f"{LATER}-{topology}-{scenario}"
            shutil.copytree(runs / scenario, made)
            summary = json.loads((made / "summary.json").read_text())
            summary["started_at"] = "2026-01-02T00:00:00"
            (made / "summary.json").write_text(json.dumps(summary))
    elif number == "08":
        cli_session(root / f"{LATER}-2tier-2plane-cli")
    else:
        incast_trim_run(root / f"{LATER}-2tier-2plane-incast-trim")
    return folder, {"results_root": root}


def _use_newest(folder: Path) -> None:
    answers = folder / "answers.yaml"
    lines = [('results: ""' if line.startswith("results:") else line)
             for line in answers.read_text().splitlines()]
    answers.write_text("\n".join(lines) + "\n")


def _topology(folder: Path, name: str) -> None:
    from topologies.model import load_topology
    from topologies.resolved import write_resolved_topology

    folder.mkdir(parents=True)
    write_resolved_topology(folder / "topology.json", load_topology(name))


def _write_events(path: Path, events: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


def _packet(src: int, dst: int, kind: int, reason: int = 0, port_state: int = 3):
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether

    from hosts import protocol
    from hosts.mrc_scapy import MRC, MRCControl
    from topologies.addressing import host_address

    return (Ether() / IPv6(src=host_address(src), dst=host_address(dst))
            / UDP(sport=protocol.MRC_UDP_PORT, dport=protocol.MRC_UDP_PORT, chksum=0)
            / MRC(type=kind, reason=reason) / MRCControl(port_state=port_state))


LAB08_SESSION = "20261125-140949-2tier-2plane-cli"  # shipped with Lab 08's solution


def cli_session(folder: Path, topology: str = "2tier-2plane") -> Path:
    """A `make cli` session with the figures of Lab 08's solution answers: the reference
    session shipped with the solution (h0's event logs, and its capture cut to the
    PLANE_STATUS packets), as made on `topology`."""
    shipped = course.lab_dir("08") / "solution" / "runs" / LAB08_SESSION
    _topology(folder, topology)
    shutil.copytree(shipped / "agents", folder / "agents")
    shutil.copytree(shipped / "pcap", folder / "pcap")
    return folder


def incast_trim_run(folder: Path, topology: str = "2tier-2plane") -> Path:
    """An incast-trim run with the figures of Lab 09's shipped summary, captured on h0:
    three NACKs from h0 (two TRIMMED_LASTHOP, one GAP) and one from another host."""
    from scapy.utils import wrpcap

    from hosts import protocol

    _topology(folder, topology)
    shipped = course.lab_dir("09") / "solution" / "runs" / (
        "20261125-123147-2tier-2plane-incast-trim")
    summary = json.loads((shipped / "summary.json").read_text())
    summary["topology"] = topology
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "pcap").mkdir()
    wrpcap(str(folder / "pcap" / "h0-eth0.pcap"), [
        _packet(0, 1, protocol.NACK, protocol.R_TRIMMED_LASTHOP),
        _packet(0, 2, protocol.NACK, protocol.R_TRIMMED_LASTHOP),
        _packet(1, 0, protocol.NACK, protocol.R_TRIMMED)])
    wrpcap(str(folder / "pcap" / "h0-eth1.pcap"), [_packet(0, 3, protocol.NACK, protocol.R_GAP)])
    return folder
