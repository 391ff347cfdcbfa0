"""Check Lab 06: the student's answers against the summary.json of their own runs.

Each section of answers.yaml names a scenario's run: the folder given in `results`, or
else the newest folder under the results root (`results/`, or `--results-root`) whose
summary.json is of that scenario. Every answer is compared with the figure the run
measured: names and counts exactly, times and ratios within 10 %.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from labs.course import REPO, LabError, Report

ANSWERS = "answers.yaml"
TOLERANCE = 0.10
SECTIONS = {"link_flap": "link-flap", "incast": "incast"}
HOW_TO_RUN = {"link-flap": "make run-experiment TOPO=2tier-2plane SCENARIO=link-flap",
              "incast": "make run-experiment TOPO=2tier-8plane SCENARIO=incast"}


def add_arguments(parser) -> None:
    parser.add_argument("--results-root", type=Path, default=REPO / "results",
                        help="where to look for the newest run of each scenario")


def check(folder: Path, options=None) -> Report:
    report = Report(f"Lab 06: reading an experiment ({folder})")
    root = getattr(options, "results_root", None) or REPO / "results"
    path = folder / ANSWERS
    try:
        answers = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise LabError(f"{path}: cannot be read as YAML ({err.__class__.__name__}); fix: "
                       f"copy it back from the lab's skeleton/") from None
    if not isinstance(answers, dict):
        raise LabError(f"{path}: not a mapping of sections; fix: copy it back from skeleton/")
    for section, scenario in SECTIONS.items():
        given = answers.get(section)
        if not isinstance(given, dict):
            report.add(False, f"{section}: answered", f"{path}: {section}: missing")
            continue
        summary = _summary(given.get("results"), path.parent, root, scenario, report)
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


def _summary(results, here: Path, root: Path, scenario: str, report: Report) -> dict | None:
    """The summary of the run named in `results`, or of the newest run of `scenario`."""
    if results:
        folder = Path(results) if Path(results).is_absolute() else here / results
        candidates = [folder / "summary.json"]
    else:
        candidates = sorted(root.glob("*/summary.json"), key=lambda p: p.parent.name,
                            reverse=True)
    for candidate in candidates:
        try:
            summary = json.loads(candidate.read_text())
        except (OSError, ValueError):
            continue
        if summary.get("scenario") == scenario and summary.get("transports"):
            report.note(f"{scenario}: answers checked against {candidate.parent}")
            return summary
    where = results or f"{root} (newest first)"
    report.add(False, f"a finished {scenario} run in {where}",
               f"run `{HOW_TO_RUN[scenario]}` first (as root), or set `results:` to its folder")
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


def judge(what: str, expected, answer) -> tuple[bool, str, str]:
    """(right, what, hint): names and counts must match, other numbers within 10 %."""
    if answer is None or answer == "TODO":
        return False, what, "not answered yet"
    if expected is None:
        return answer in ("none", "null", "-"), what, "the run has no such figure: write none"
    if isinstance(expected, str):
        return str(answer).strip() == expected, what, f"your answer: {answer}"
    try:
        number = float(answer)
    except (TypeError, ValueError):
        return False, what, f"{answer!r} is not a number"
    if isinstance(expected, int):
        return number == expected, what, f"your answer: {answer} (a count: exactly)"
    close = abs(number - expected) <= TOLERANCE * abs(expected)
    return close, what, f"your answer: {answer} (accepted within {TOLERANCE:.0%} of the run)"
