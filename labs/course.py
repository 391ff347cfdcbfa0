"""Where each lab lives, which copy of its files a check reads, and what a check reports.

A lab's files come in three copies: `skeleton/` (as handed out, with TODOs, never
edited), `solution/`, and `work/`, the student's copy made by `python -m labs start NN`
and ignored by git. A check reads `work/` unless told otherwise, so the course's own
tests can always run it against the untouched skeleton and the solution.

A check returns a `Report`: one line per thing checked, passed or not, with a hint for
what is wrong. Mistakes of the student's setup (no work copy, an unknown lab) are a
`LabError`, printed by the entry point as one line.

`start` also stamps the work copy with the time it was made (`.started`): labs whose
answers come from the student's own runs accept only runs made after it. Answers to a
lab's numeric questions live in YAML files and are judged here (`judge`): names and
counts exactly, measured figures within a tolerance.
"""

from __future__ import annotations

import importlib
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

LABS_DIR = Path(__file__).resolve().parent
REPO = LABS_DIR.parent

# Lab number -> package under labs/. The order is the course's order (labs/README.md).
LABS = {
    "01": "lab01_usid_paths",
    "02": "lab02_p4_usid_forward",
    "03": "lab03_p4_trim_ecn",
    "04": "lab04_static_tables",
    "05": "lab05_ev_states",
    "06": "lab06_experiments",
    "07": "lab07_p4runtime_by_hand",
    "08": "lab08_failures",
    "09": "lab09_trim_or_drop",
}
COPIES = ("work", "skeleton", "solution")
# In a work copy: when `start` made it (ISO time, the machine's clock, as run folders).
STARTED = ".started"
# Measured figures (times, ratios) are accepted within this share of the run's own.
TOLERANCE = 0.10


class LabError(Exception):
    """A mistake in how a lab is used (unknown lab, no work copy); one line."""


def lab_number(text: str) -> str:
    """'2', '02' or 'lab02_p4_usid_forward' -> '02'."""
    digits = text.removeprefix("lab")[:2].rstrip("_")
    number = digits.zfill(2) if digits.isdigit() else text
    if number not in LABS:
        raise LabError(f"LAB={text}: no such lab; fix: use one of {', '.join(LABS)}")
    return number


def lab_dir(number: str) -> Path:
    return LABS_DIR / LABS[number]


def files_dir(number: str, copy: str = "work") -> Path:
    """The folder of the lab's files a check reads: work (the student's), skeleton or
    solution."""
    if copy not in COPIES:
        raise LabError(f"{copy}: not a copy of a lab's files; fix: use one of {COPIES}")
    folder = lab_dir(number) / copy
    if copy == "work" and not folder.is_dir():
        raise LabError(f"{folder.relative_to(REPO)}: no work copy yet; fix: run "
                       f"`make lab-start LAB={number}` (or `python -m labs start {number}`)")
    return folder


def start(number: str) -> Path:
    """Copy the lab's skeleton into work/ (never over a work copy that exists), stamp it
    with the time, and let the lab add what it gives the student (its `on_start(work)`,
    e.g. the P4 labs' reading copy of the program)."""
    work = lab_dir(number) / "work"
    if work.exists():
        raise LabError(f"{work.relative_to(REPO)}: already exists; fix: keep working in it, "
                       f"or delete it to start again from the skeleton")
    shutil.copytree(lab_dir(number) / "skeleton", work)
    (work / STARTED).write_text(datetime.now().isoformat(timespec="seconds") + "\n")
    module = check_module(number)
    if hasattr(module, "on_start"):
        module.on_start(work)
    return work


def started_at(folder: Path) -> datetime | None:
    """When `start` made this work copy, or None (no stamp: not made by `start`)."""
    try:
        return datetime.fromisoformat((folder / STARTED).read_text().strip())
    except (OSError, ValueError):
        return None


def check_module(number: str):
    """The lab's `check` module; it has `check(folder, options) -> Report` and may have
    `add_arguments(parser)` for options of its own."""
    return importlib.import_module(f"labs.{LABS[number]}.check")


@dataclass
class Report:
    """What a check found: one line per item, each passed or not, plus notes."""

    title: str
    items: list[tuple[bool, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, ok: bool, what: str, hint: str = "") -> bool:
        self.items.append((bool(ok), what, "" if ok else hint))
        return bool(ok)

    def note(self, text: str) -> None:
        """Something said without passing or failing (a part skipped, and why)."""
        self.notes.append(text)

    def note_todo(self, name: str, text: str) -> None:
        """A hint if the student's file `name` (its `text`) still holds a TODO: a note,
        never a grade, since correct work under the skeleton's TODO comments passes (a
        TODO placeholder fails on its behaviour)."""
        if "TODO" in text:
            self.note(f"hint, {name}: a TODO is still there")

    @property
    def passed(self) -> bool:
        return bool(self.items) and all(ok for ok, _, _ in self.items)

    def failures(self) -> list[str]:
        return [what for ok, what, _ in self.items if not ok]

    def render(self) -> str:
        lines = [self.title]
        for ok, what, hint in self.items:
            lines.append(f"  {'ok   ' if ok else 'WRONG'} {what}")
            if hint:
                lines += [f"        {line}" for line in hint.splitlines()]
        lines += [f"  note: {text}" for text in self.notes]
        right = sum(ok for ok, _, _ in self.items)
        lines.append(f"{right}/{len(self.items)} right: "
                     f"{'lab passed' if self.passed else 'not yet'}")
        return "\n".join(lines)


def load_module(path: Path, name: str):
    """Import a student's Python file by its path (it is not part of any package).

    Raises LabError when the file is missing; whatever the file itself raises on
    import (a syntax error, a NameError) is the check's to report.
    """
    import importlib.util

    if not path.is_file():
        raise LabError(f"{path}: missing; fix: copy it back from the lab's skeleton/")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def first_line(err: BaseException) -> str:
    """An exception as the one line a student needs: its type, message and place."""
    import traceback

    frames = traceback.extract_tb(err.__traceback__)
    where = f" ({Path(frames[-1].filename).name}, line {frames[-1].lineno})" if frames else ""
    return f"{err.__class__.__name__}: {err}{where}"


# ------------------------------------------------------------------ answers
def read_answers(path: Path) -> dict:
    """A lab's answers file (YAML mapping); LabError when it cannot be read as one."""
    import yaml

    try:
        answers = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise LabError(f"{path}: cannot be read as YAML ({err.__class__.__name__}); fix: "
                       f"copy it back from the lab's skeleton/") from None
    if not isinstance(answers, dict):
        raise LabError(f"{path}: not a mapping of answers; fix: copy it back from skeleton/")
    return answers


def judge(what: str, expected, answer,
          tolerance: float = TOLERANCE) -> tuple[bool, str, str]:
    """(right, what, hint) for Report.add: names and counts (ints) must match, other
    numbers be within `tolerance` of the expected one; None expected means "no such
    figure" (answer none)."""
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
    if isinstance(expected, bool) or isinstance(expected, int):
        return number == expected, what, f"your answer: {answer} (a count: exactly)"
    close = abs(number - expected) <= tolerance * abs(expected)
    return close, what, f"your answer: {answer} (accepted within {tolerance:.0%} of the run)"


def check_questions(report: Report, folder: Path, expected: dict[str, object],
                    name: str = "questions.yaml") -> None:
    """One report line per numeric question of the lab's README: the answer in
    `folder/name` under each key of `expected`, judged against its value."""
    path = folder / name
    if not path.is_file():
        report.add(False, f"{name} exists", "copy it back from the lab's skeleton/")
        return
    answers = read_answers(path)
    for key, want in expected.items():
        report.add(*judge(f"{name}: {key}", want, answers.get(key)))
