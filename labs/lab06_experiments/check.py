"""Check Lab 06: the student's answers against the summary.json of their own runs.

Each section of answers.yaml names a scenario's run: the folder given in `results`, or
else the newest folder under the results root (`results/`, or `--results-root`) whose
summary.json is of that scenario. Only the student's own runs count (`own_run`): a run
under the results root, on the lab's topology for that scenario, started after
`make lab-start` stamped the work copy; the runs shipped in solution/ are accepted for
the solution alone. Every answer is compared with the figure the run measured
(course.judge): names and counts exactly, times and ratios within 10 %.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from labs.course import REPO, Report, judge, read_answers, started_at

ANSWERS = "answers.yaml"
SECTIONS = {"link_flap": "link-flap", "incast": "incast"}
TOPOLOGY = {"link-flap": "2tier-2plane", "incast": "2tier-8plane"}
HOW_TO_RUN = {scenario: f"sudo make run-experiment TOPO={topo} SCENARIO={scenario}"
              for scenario, topo in TOPOLOGY.items()}


def add_arguments(parser) -> None:
    parser.add_argument("--results-root", type=Path, default=REPO / "results",
                        help="where to look for the newest run of each scenario")


def check(folder: Path, options=None) -> Report:
    report = Report(f"Lab 06: reading an experiment ({folder})")
    root = getattr(options, "results_root", None) or REPO / "results"
    answers = read_answers(folder / ANSWERS)
    solution = folder.name == "solution"
    since = started_at(folder)
    if not solution and not report.add(
            since is not None, "your work copy was made by `make lab-start LAB=06`",
            f"{folder} has no start stamp: only runs made after the lab started count; "
            "start the lab (`make lab-start LAB=06`), then make your runs"):
        return report
    for section, scenario in SECTIONS.items():
        given = answers.get(section)
        if not isinstance(given, dict):
            report.add(False, f"{section}: answered", f"{folder / ANSWERS}: {section}: missing")
            continue
        summary = _summary(given.get("results"), folder, root, scenario, report,
                           None if solution else since)
        if summary is None:
            continue
        try:
            expected = EXPECTED[section](summary, given)
        except (StopIteration, KeyError, TypeError, ZeroDivisionError) as err:
            # A summary of another shape: an older format, or a scenario edited to one
            # transport. The questions compare MRC with one other transport.
            report.add(False, f"{section}: the run has an MRC and one other transport",
                       f"its summary.json lacks what the questions need ({err!r})")
            continue
        for what, want, answer in expected:
            report.add(*judge(what, want, answer))
    return report


def own_run(summary: dict, folder: Path, root: Path, scenario: str,
            since: datetime | None) -> str | None:
    """Why the run in `folder` is not one the student made for this lab, or None. With
    `since` None (the lab's solution) any run of the scenario on its topology counts."""
    if summary.get("scenario") != scenario or not summary.get("transports"):
        return f"not a finished {scenario} run"
    if summary.get("topology") != TOPOLOGY[scenario]:
        return (f"a run on {summary.get('topology')}, not on {TOPOLOGY[scenario]} as the lab "
                f"asks (`{HOW_TO_RUN[scenario]}`)")
    if since is None:
        return None
    if not folder.resolve().is_relative_to(root.resolve()):
        return f"not under {root}: your runs are written there"
    try:
        made = datetime.fromisoformat(str(summary.get("started_at")))
    except ValueError:
        return "its summary.json says no start time"
    if made < since:
        return (f"made at {made.isoformat()}, before you started the lab "
                f"({since.isoformat()}): make your own run")
    return None


def _summary(results, here: Path, root: Path, scenario: str, report: Report,
             since: datetime | None) -> dict | None:
    """The summary of the run named in `results`, or of the newest run of `scenario`
    that is the student's own (own_run)."""
    if results:
        folder = Path(results) if Path(results).is_absolute() else here / results
        candidates = [folder / "summary.json"]
    else:
        candidates = sorted(root.glob("*/summary.json"), key=lambda p: p.parent.name,
                            reverse=True)
    refused = []
    for candidate in candidates:
        try:
            summary = json.loads(candidate.read_text())
        except (OSError, ValueError):
            continue
        if summary.get("scenario") != scenario and not results:
            continue
        why = own_run(summary, candidate.parent, root, scenario, since)
        if why is None:
            report.note(f"{scenario}: answers checked against {candidate.parent}")
            return summary
        refused.append(f"{candidate.parent}: {why}")
    where = results or f"{root} (newest first)"
    report.add(False, f"a {scenario} run of yours in {where}",
               "\n".join(refused[:3]) if refused else
               f"run `{HOW_TO_RUN[scenario]}` first, or set `results:` to its folder")
    return None


def _blocks(summary: dict) -> tuple[dict, dict]:
    """The MRC block of a summary and the block of the transport it is compared with."""
    blocks = summary["transports"]
    mrc = next(b for b in blocks if b["transport"] == "mrc")
    other = next(b for b in blocks if b["transport"] != "mrc")
    return mrc, other


def _link_flap(summary: dict, given: dict) -> list[tuple[str, object, object]]:
    mrc, other = _blocks(summary)
    done = [b for b in (mrc, other) if b["transfers_failed"] == 0]
    first = min(done, key=lambda b: b["workload_s"])["transport"] if done else "neither"
    return [
        ("link_flap.finished_first", first, given.get("finished_first")),
        ("link_flap.mrc_retired", mrc["path_events"].get("retire", 0), given.get("mrc_retired")),
        ("link_flap.mrc_reinstated", mrc["path_events"].get("reinstate", 0),
         given.get("mrc_reinstated")),
        ("link_flap.slowdown", round(other["workload_s"] / mrc["workload_s"], 3),
         given.get("slowdown")),
    ]


def _incast(summary: dict, given: dict) -> list[tuple[str, object, object]]:
    mrc, other = _blocks(summary)
    fct = given.get("victim_fct_ms") or {}

    def ms(block: dict) -> float | None:
        value = block.get("victim_fct_s")
        return None if value is None else round(value * 1000, 3)

    return [
        ("incast.victim_fct_ms.mrc", ms(mrc), fct.get("mrc") if isinstance(fct, dict) else None),
        (f"incast.victim_fct_ms.other ({other['transport']})", ms(other),
         fct.get("other") if isinstance(fct, dict) else None),
        ("incast.mrc_nacks", mrc["path_events"].get("nack", 0), given.get("mrc_nacks")),
        ("incast.mrc_retired", mrc["path_events"].get("retire", 0), given.get("mrc_retired")),
    ]


EXPECTED = {"link_flap": _link_flap, "incast": _incast}
