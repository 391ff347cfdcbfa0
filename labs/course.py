"""Where each lab lives, which copy of its files a check reads, and what a check reports.

A lab's files come in three copies: `skeleton/` (as handed out, with TODOs, never
edited), `solution/`, and `work/`, the student's copy made by `python -m labs start NN`
and ignored by git. A check reads `work/` unless told otherwise, so the course's own
tests can always run it against the untouched skeleton and the solution.

A check returns a `Report`: one line per thing checked, passed or not, with a hint for
what is wrong. Mistakes of the student's setup (no work copy, an unknown lab) are a
`LabError`, printed by the entry point as one line.
"""

from __future__ import annotations

import importlib
import shutil
from dataclasses import dataclass, field
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
}
COPIES = ("work", "skeleton", "solution")


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
    """Copy the lab's skeleton into work/ (never over a work copy that exists)."""
    work = lab_dir(number) / "work"
    if work.exists():
        raise LabError(f"{work.relative_to(REPO)}: already exists; fix: keep working in it, "
                       f"or delete it to start again from the skeleton")
    shutil.copytree(lab_dir(number) / "skeleton", work)
    return work


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
