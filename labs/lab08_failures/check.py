"""Check Lab 08: a link and a plane fail during a transfer, MRC against roce-8.

The answers (answers.yaml) are read from the student's own `make cli` session on
2tier-2plane, captured with CAPTURE=1: its folder `results/<time>-2tier-2plane-cli/`,
made after `make lab-start LAB=08` (labs/runs.py says which folders count). Each answer
is compared (course.judge) with what the session recorded: h0's agent event logs
(`agents/events-mrc-h0.jsonl`, `agents/events-roce-8@planes-h0.jsonl`: its transfers to
h3, EVs retired, timeouts) and the capture of h0's ports (the PLANE_STATUS packets h0
sent when its plane-1 port went down). Counts exactly, times within 10 %.
"""

from __future__ import annotations

from pathlib import Path

from labs.course import REPO, Report, judge, read_answers
from labs.runs import events, mrc_packets, students_run

ANSWERS = "answers.yaml"
TOPOLOGY = "2tier-2plane"
BASELINE = "roce-8@planes"
HOW = "sudo make cli TOPO=2tier-2plane CAPTURE=1 (README, steps 2-6)"


def add_arguments(parser) -> None:
    parser.add_argument("--results-root", type=Path, default=REPO / "results",
                        help="where your CLI session folders are")


def facts(folder: Path) -> dict[str, object]:
    """What the session recorded, under the answers' names (None: no such figure)."""
    from scapy.layers.inet6 import IPv6

    from hosts import protocol
    from hosts.mrc_scapy import MRC, MRCControl
    from topologies.addressing import host_address

    def slowest(log: list[dict]) -> float | None:
        times = [e["seconds"] for e in log if e["event"] == "complete" and e.get("peer") == 3]
        return round(max(times), 3) if times else None

    mrc, roce = events(folder, "mrc", "h0"), events(folder, BASELINE, "h0")
    status = [p for p in mrc_packets(folder, "h0")
              if p[MRC].type == protocol.PLANE_STATUS and p[IPv6].src == host_address(0)]
    full = (1 << 2) - 1  # both planes of 2tier-2plane up
    down = [p[MRCControl].port_state for p in status if p[MRCControl].port_state != full]
    return {
        "mrc_retired": sum(e["event"] == "retire" and e.get("peer") == 3 for e in mrc),
        "mrc_slowest_s": slowest(mrc),
        # Without a capture there is no such figure (answer none), not zero packets.
        "plane_status_sent": len(status) if (folder / "pcap").is_dir() else None,
        "port_state_after_port_down": down[0] if down else None,
        "roce_timeouts": sum(e["event"] == "timeout" and e.get("peer") == 3 for e in roce),
        "roce_slowest_s": slowest(roce),
    }


def check(folder: Path, options=None) -> Report:
    report = Report(f"Lab 08: failures during a transfer ({folder})")
    root = getattr(options, "results_root", None) or REPO / "results"
    answers = read_answers(folder / ANSWERS)
    session = students_run(report, folder, answers, root, "08", "cli", TOPOLOGY,
                           f"a CLI session of yours on {TOPOLOGY}", HOW, "make your session")
    if session is None:
        return report
    if not (session / "pcap").is_dir():
        report.note("the session has no capture: start the CLI with CAPTURE=1")
    for key, want in facts(session).items():
        report.add(*judge(key, want, answers.get(key)))
    return report
