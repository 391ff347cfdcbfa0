"""The student's own runs, for the labs that answer from them (08, 09): which folders
count, and what their event logs and packet captures hold.

A run or CLI session writes `results/<YYYYmmdd-HHMMSS>-<topology>-<name>/`
(experiments/run/lifecycle.py): `topology.json`, `agents/events-<transport>-h<N>.jsonl`,
`pcap/<node>-eth<N>.pcap` when captured, and for a run `summary.json`. A folder counts
for a lab when it is under the results root, of the lab's kind (`cli`, or a scenario's
name), on the lab's topology, and made after `make lab-start` stamped the work copy
(course.started_at); the lab's solution may point at the runs shipped with it.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

STAMP = "%Y%m%d-%H%M%S"


def made_at(folder: Path) -> datetime | None:
    """When the run began, from its folder's name, or None for a name of another form."""
    try:
        return datetime.strptime(folder.name[:len("20260101-000000")], STAMP)
    except ValueError:
        return None


def topology_of(folder: Path) -> str | None:
    try:
        return json.loads((folder / "topology.json").read_text()).get("topology")
    except (OSError, ValueError, AttributeError):
        return None


def why_not(folder: Path, root: Path, kind: str, topology: str,
            since: datetime | None) -> str | None:
    """Why `folder` is not a run the student made for this lab, or None. `since` None
    (the lab's solution): only the kind and topology are asked."""
    if not folder.is_dir():
        return "no such folder"
    if not folder.name.endswith(f"-{kind}"):
        return f"not a {kind} folder (results/<time>-<topology>-{kind}/)"
    if topology_of(folder) != topology:
        return f"made on {topology_of(folder)}, not on {topology} as the lab asks"
    if since is None:
        return None
    if not folder.resolve().is_relative_to(root.resolve()):
        return f"not under {root}: your runs are written there"
    made = made_at(folder)
    if made is None or made < since:
        return (f"made at {made or '?'}, before you started the lab ({since.isoformat()}): "
                "make your own")
    return None


def find_run(given: str | None, here: Path, root: Path, kind: str, topology: str,
             since: datetime | None) -> tuple[Path | None, list[str]]:
    """The folder named by `given` (absolute or relative to `here`) or else the newest
    folder under `root` that counts; and why each folder looked at did not count."""
    if given:
        folder = Path(given) if Path(given).is_absolute() else here / given
        candidates = [folder]
    else:
        candidates = sorted((p for p in root.glob(f"*-{kind}") if p.is_dir()),
                            key=lambda p: p.name, reverse=True)
    refused = []
    for folder in candidates:
        why = why_not(folder, root, kind, topology, since)
        if why is None:
            return folder, refused
        refused.append(f"{folder}: {why}")
    return None, refused


def events(folder: Path, transport: str, host: str) -> list[dict]:
    """The event log of one agent (`events-<transport>-<host>.jsonl`), [] if none."""
    path = folder / "agents" / f"events-{transport}-{host}.jsonl"
    found = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        try:
            found.append(json.loads(line))
        except ValueError:
            continue  # a line cut short when the agent was stopped
    return found


def mrc_packets(folder: Path, node: str) -> list:
    """Every MRC packet (scapy, hosts/mrc_scapy.py) captured on `node`'s ports, in
    file order; [] without captures."""
    from scapy.layers.inet6 import IPv6
    from scapy.utils import PcapReader

    from hosts.mrc_scapy import MRC

    found = []
    for pcap in sorted((folder / "pcap").glob(f"{node}-eth*.pcap")):
        try:
            with PcapReader(str(pcap)) as reader:
                found += [p for p in reader if IPv6 in p and MRC in p]
        except (OSError, EOFError, ValueError):
            continue  # an empty or truncated capture holds nothing to count
    return found


def students_run(report, folder: Path, answers: dict, root: Path, lab: str, kind: str,
                 topology: str, found: str, how: str, then: str) -> Path | None:
    """The run the answers in `folder` are read from (find_run), or None with the reason
    added to `report` (course.Report): a work copy not made by `make lab-start`, or no
    run that counts (`found` names what was looked for, `how` makes one, `then` says
    what to do after starting the lab). The solution's folder may name the runs shipped
    with it, whenever they were made."""
    from labs.course import started_at

    solution = folder.name == "solution"
    since = None if solution else started_at(folder)
    if since is None and not solution:
        folders = "sessions" if kind == "cli" else "runs"
        report.add(False, f"your work copy was made by `make lab-start LAB={lab}`",
                   f"only {folders} made after the lab started count: start the lab, "
                   f"then {then}")
        return None
    run, refused = find_run(answers.get("results"), folder, root, kind, topology, since)
    if not report.add(run is not None, found,
                      "\n".join(refused[:3]) or f"none under {root}: `{how}`"):
        return None
    report.note(f"answers checked against {run}")
    return run

