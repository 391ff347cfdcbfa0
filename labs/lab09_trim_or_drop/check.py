"""Check Lab 09: trimming against dropping, mrc against mrc-no-trim in an incast.

The answers (answers.yaml) are read from the student's own `incast-trim` run on
2tier-2plane, captured on h0: its folder `results/<time>-2tier-2plane-incast-trim/`,
made after `make lab-start LAB=09` (labs/runs.py says which folders count). Each answer
is compared (course.judge) with what the run measured: summary.json's blocks of the
two transports (the switches' counters, path events, workload times) and the capture
of h0's ports (the NACKs h0 sent, and their reason). Counts exactly, times within 10 %.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from labs.course import REPO, Report, judge, read_answers
from labs.runs import mrc_packets, students_run

ANSWERS = "answers.yaml"
TOPOLOGY = "2tier-2plane"
SCENARIO = "incast-trim"
HOW = f"sudo make run-experiment TOPO={TOPOLOGY} SCENARIO={SCENARIO} CAPTURE=h0"


def add_arguments(parser) -> None:
    parser.add_argument("--results-root", type=Path, default=REPO / "results",
                        help="where your runs are")


def _counted(block: dict, *names: str) -> int:
    """A switch counter summed over the port groups of a transport's block (the first
    of `names` each group has: SONiC's name, or an older one)."""
    total = 0
    for group in (block.get("switch_counters") or {}).values():
        total += next((group[n] for n in names if n in group), 0)
    return total


def facts(folder: Path) -> dict[str, object]:
    """What the run measured, under the answers' names (None: no such figure). Raises
    KeyError or StopIteration for a summary without both transports."""
    from scapy.layers.inet6 import IPv6

    from hosts import protocol
    from hosts.mrc_scapy import MRC
    from topologies.addressing import host_address

    summary = json.loads((folder / "summary.json").read_text())
    blocks = {b["transport"]: b for b in summary["transports"]}
    mrc, drop = blocks["mrc"], blocks["mrc-no-trim"]
    nacks = [p[MRC].reason for p in mrc_packets(folder, "h0")
             if p[MRC].type == protocol.NACK and p[IPv6].src == host_address(0)]
    common = Counter(nacks).most_common(1)
    captured = (folder / "pcap").is_dir()
    return {
        "mrc_trimmed": _counted(mrc, "tx_trim_pkts", "trimmed"),
        "mrc_nacks": mrc["path_events"].get("nack", 0),
        "mrc_retired": mrc["path_events"].get("retire", 0),
        "mrc_workload_s": mrc["workload_s"],
        "no_trim_dropped": _counted(drop, "dropped"),
        "no_trim_retired": drop["path_events"].get("retire", 0),
        "no_trim_workload_s": drop["workload_s"],
        # Without a capture there is no such figure (answer none), not zero NACKs.
        "nacks_in_capture": len(nacks) if captured else None,
        "nack_reason": protocol.REASON_NAMES.get(common[0][0]) if common else None,
    }


def check(folder: Path, options=None) -> Report:
    report = Report(f"Lab 09: trimming or dropping ({folder})")
    root = getattr(options, "results_root", None) or REPO / "results"
    answers = read_answers(folder / ANSWERS)
    run = students_run(report, folder, answers, root, "09", SCENARIO, TOPOLOGY,
                       f"an {SCENARIO} run of yours on {TOPOLOGY}", HOW, "run")
    if run is None:
        return report
    try:
        measured = facts(run)
    except (OSError, ValueError, KeyError, StopIteration) as err:
        report.add(False, f"{run.name}: a finished run of mrc and mrc-no-trim",
                   f"its summary.json lacks what the questions need ({err!r})")
        return report
    if not (run / "pcap").is_dir():
        report.note("the run has no capture: run it with CAPTURE=h0")
    for key, want in measured.items():
        report.add(*judge(key, want, answers.get(key)))
    return report
