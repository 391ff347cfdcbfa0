"""The P4 labs' program: the project's P4 sources with the student's pieces put in.

A P4 lab asks for a few pieces of the switch, not a whole program: in Lab 02 the
`usid_shift` action and the forwarding steps of the ingress control, in Lab 03 the
trimming and ECN statements of the egress control. `build_program` copies p4src/ into a
build folder and replaces, in the copy of the project's program, each piece by the
student's text; everything else (headers, parser, the rest of the controls, table and
counter names the controller writes to) stays the project's own. So the lab's program
compiles exactly as the project's does, and the project's PTF tests run against it.

Pieces are found in the project's file by their P4 structure (an action by name, or
the statements of the `apply` block that contain a given expression), inside the control
they belong to, so comments and small edits in p4src/ do not break the labs; a piece
that cannot be found is a `PieceNotFound` naming the file, the control and what was
looked for.

`compile_program` runs p4c-bm2-ss on the result when it is installed; `check_lab`
grades a P4 lab by its program's behaviour on BMv2 (the project's PTF tests), and
`reading_copy` writes the program a lab's background reading points at: p4src/ with
the lab's pieces replaced by its skeleton, so the reading never shows the answer.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from labs.course import REPO, Report

P4SRC = REPO / "p4src"
MAIN = "mrc_switch.p4"
# Where a check builds and compiles the lab's program, under labs/<NN>-<copy>/, unless
# its `--build-dir` says otherwise (the course's tests give it a temporary folder).
BUILD = REPO / "build"


class PieceNotFound(Exception):
    """The project's P4 file no longer has the construct a lab replaces."""


@dataclass(frozen=True)
class Piece:
    """One part of a project P4 file that a student writes, kept in `student_file`."""

    student_file: str
    project_file: str  # relative to p4src/
    control: str  # the control the piece is in: only its text is searched
    action: str | None = None  # replace this action's whole definition, or
    first: str | None = None  # the apply-block statements from the one containing this
    last: str | None = None  # to the one containing this (default: first)


PIECES = {
    "02": (Piece("usid_shift.p4", MAIN, "MrcIngress", action="usid_shift"),
           Piece("forward.p4", MAIN, "MrcIngress", first="my_usid.apply()",
                 last="next_hop.apply()")),
    "03": (Piece("trim.p4", MAIN, "MrcEgress", first="truncate("),
           Piece("ecn.p4", MAIN, "MrcEgress", first="ECN_CE")),
}


# ------------------------------------------------------------------ reading P4 text
def _skip_space(text: str, i: int) -> int:
    """Index of the first character at or after i that is neither space nor comment."""
    while i < len(text):
        if text[i].isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = len(text) if end < 0 else end + 2
        else:
            return i
    return i


def _closing(text: str, i: int) -> int:
    """Index just past the bracket that closes the one at i, skipping comments."""
    pairs = {"{": "}", "(": ")"}
    stack = [pairs[text[i]]]
    i += 1
    while stack:
        i = _skip_space(text, i)
        if i >= len(text):
            raise PieceNotFound("unbalanced brackets")
        if text[i] in pairs:
            stack.append(pairs[text[i]])
        elif text[i] == stack[-1]:
            stack.pop()
        i += 1
    return i


def _statement_end(text: str, i: int) -> int:
    """Index just past the statement that starts at i (an if/else chain, a block, or
    anything up to its semicolon)."""
    if text[i] == "{":
        return _closing(text, i)
    if re.match(r"if\b", text[i:]):
        j = _skip_space(text, i + 2)
        j = _statement_end(text, _skip_space(text, _closing(text, j)))
        k = _skip_space(text, j)
        if re.match(r"else\b", text[k:]):
            return _statement_end(text, _skip_space(text, k + 4))
        return j
    while text[i] != ";":
        i = _closing(text, i) if text[i] in "{(" else i + 1
        i = _skip_space(text, i) if text[i] != ";" else i
    return i + 1


def _control_body(text: str, name: str, where: str) -> tuple[int, int]:
    """(start, end) of the body of control `name`, braces excluded."""
    found = re.search(rf"\bcontrol\s+{name}\s*\(", text)
    if found is None:
        raise PieceNotFound(f"{where}: no control {name}")
    body = _skip_space(text, _closing(text, found.end() - 1))
    if not text.startswith("{", body):
        raise PieceNotFound(f"{where}: control {name} has no body")
    return body + 1, _closing(text, body) - 1


def _apply_statements(text: str, start: int, end: int,
                      where: str) -> list[tuple[int, int]]:
    """(start, end) of each top-level statement of the apply block between start and
    end (a control's body: its one apply block, the only `apply {` in it)."""
    found = re.compile(r"\bapply\s*\{").search(text, start, end)
    if found is None:
        raise PieceNotFound(f"{where}: no apply block")
    body_end = _closing(text, found.end() - 1) - 1
    spans, i = [], _skip_space(text, found.end())
    while i < body_end:
        stop = _statement_end(text, i)
        spans.append((i, stop))
        i = _skip_space(text, stop)
    return spans


def find_piece(text: str, piece: Piece) -> tuple[int, int]:
    """(start, end) of the piece in the project file's text."""
    where = f"p4src/{piece.project_file}"
    start, end = _control_body(text, piece.control, where)
    where = f"{where}, control {piece.control}"
    if piece.action is not None:
        found = re.compile(rf"\baction\s+{piece.action}\s*\(").search(text, start, end)
        if found is None:
            raise PieceNotFound(f"{where}: no action {piece.action}")
        body = _skip_space(text, _closing(text, found.end() - 1))
        return found.start(), _closing(text, body)
    spans = _apply_statements(text, start, end, where)

    def index(needle: str) -> int:
        for n, (start, end) in enumerate(spans):
            if needle in strip_comments(text[start:end]):
                return n
        raise PieceNotFound(f"{where}: no statement of the apply block contains {needle!r}")

    first, last = index(piece.first), index(piece.last or piece.first)
    return spans[first][0], spans[last][1]


def strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)


def normalized(text: str) -> str:
    """P4 text without comments and whitespace, for comparing and pattern checks."""
    return re.sub(r"\s+", "", strip_comments(text))


def splice(text: str, piece: Piece, student: str) -> str:
    """The project file's text with the piece replaced by the student's text."""
    start, end = find_piece(text, piece)
    indent = text[text.rfind("\n", 0, start) + 1:start]
    lines = student.strip("\n").splitlines()
    body = "\n".join((indent + line if line.strip() else "") for line in lines).lstrip()
    return text[:start] + body + text[end:]


# ------------------------------------------------------------------ building
def build_program(sources: dict[str, Path], out: Path) -> Path:
    """Copy p4src/ into `out` with the pieces of each lab in `sources` (lab number ->
    folder of the student's files) put in; returns the main program's path."""
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(P4SRC, out)
    for number, folder in sources.items():
        for piece in PIECES[number]:
            target = out / piece.project_file
            student = (folder / piece.student_file).read_text()
            target.write_text(splice(target.read_text(), piece, student))
    return out / MAIN


READING_BANNER = """/*
 * A READING COPY of p4src/{main} for Lab {number}: the pieces you write are cut out
 * and replaced by the lab's skeleton (its TODOs), so reading the program around them
 * gives nothing away. Generated by labs/p4lab.py (`python -m labs reading {number}`);
 * edit your files in the lab's work/ folder, not this copy.
 */
"""


def reading_copy(number: str, out: Path) -> Path:
    """The program to read for a lab: p4src/ with the lab's pieces replaced by its
    skeleton, in `out`; returns the main file's path."""
    from labs.course import files_dir

    main = build_program({number: files_dir(number, "skeleton")}, out)
    main.write_text(READING_BANNER.format(main=MAIN, number=number) + main.read_text())
    return main


def compile_program(main: Path, out: Path) -> tuple[Path, Path]:
    """(P4Info, BMv2 JSON) of `main`, compiled as the BMv2 target compiles p4src/
    (experiments/dataplanes/bmv2_target.py, the one home of p4c's options). Raises CompileError
    holding p4c's first errors."""
    from experiments.dataplanes.bmv2_target import compile_program as bmv2_compile
    from topologies.bmv2 import Bmv2Error

    try:
        return bmv2_compile(out, main)
    except Bmv2Error as err:
        raise CompileError(str(err).split(": ", 1)[-1]) from None


class CompileError(Exception):
    """p4c-bm2-ss rejected the lab's program; the message holds its first errors."""


def p4c_available() -> bool:
    return shutil.which("p4c-bm2-ss") is not None


# ------------------------------------------------------------------ checking
@dataclass(frozen=True)
class Rule:
    """A hint for one student file: every pattern should match its normalized text
    (no comments, no whitespace), in order when `ordered`. Hints are said, never graded:
    text has many right forms, and what is graded is the program's behaviour on BMv2."""

    student_file: str
    what: str
    patterns: tuple[str, ...]
    hint: str
    ordered: bool = False

    def holds(self, text: str) -> bool:
        flat, at = normalized(text), 0
        for pattern in self.patterns:
            found = re.compile(pattern).search(flat, at if self.ordered else 0)
            if found is None:
                return False
            at = found.end()
        return True


@dataclass(frozen=True)
class Behaviour:
    """What became of the lab's program on BMv2: `ran` False (with `reason`) when it
    could not be run here; else whether the tests passed, their summary line and the
    failed ones."""

    ran: bool
    passed: bool = False
    summary: str = ""
    failed: tuple[str, ...] = ()
    reason: str = ""


NOT_VERIFIED = "not verified: needs BMv2"


def add_arguments(parser) -> None:
    parser.add_argument("--static-only", action="store_true",
                        help="only the hints and the build: no compile, no BMv2 run (the "
                             "lab is then not verified)")
    parser.add_argument("--build-dir", type=Path, default=BUILD,
                        help="the folder the lab's program is built and compiled in, "
                             "under labs/ (default: build/)")


def _shown(path: Path) -> Path:
    """`path` relative to the checkout when it lies in it, else as it is."""
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


def bmv2_missing() -> str | None:
    """Why the lab's PTF tests cannot run here, or None."""
    if shutil.which("simple_switch_grpc") is None:
        return "simple_switch_grpc is not installed (`make deps-p4`, or the Vagrant VM)"
    if os.geteuid() != 0:
        return "the PTF tests need root (veth interfaces): run `sudo make lab-check ...`"
    return None


def run_on_bmv2(number: str, folder: Path, ptf_tests: str) -> Behaviour:
    """The project's PTF tests of the lab (tests/p4/test_labs_p4.py, those named
    `ptf_tests`) on BMv2, with the student's pieces spliced in."""
    missing = bmv2_missing()
    if missing:
        return Behaviour(False, reason=missing)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/p4/test_labs_p4.py", "-k", ptf_tests],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, LAB_SOURCE_ENV:
                                                       f"{number}={folder}"})
    last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    if done.returncode == 0 and "passed" not in last:
        return Behaviour(False, reason=f"tests/p4 skipped its tests ({last}); see its "
                                       "conftest.py for why")
    failed = tuple(line for line in done.stdout.splitlines()
                   if line.startswith(("FAILED", "ERROR")))
    return Behaviour(True, done.returncode == 0, last, failed)


def check_lab(number: str, title: str, folder: Path, rules: tuple[Rule, ...],
              options, ptf_tests: str):
    """The student's files are there, the lab's program builds and compiles, and the
    project's PTF tests pass on it on BMv2; hints from `rules` and a TODO left in a
    file are notes. Without p4c or BMv2 the lab is not verified: a failed item, so
    that a grade never rests on the text alone. The program is built in
    labs/<NN>-<copy>/ of `options.build_dir` (build/ by default). Returns the Report."""
    report = Report(f"{title} ({folder})")
    texts = {}
    for piece in PIECES[number]:
        path = folder / piece.student_file
        if not path.is_file():
            report.add(False, f"{piece.student_file} exists", "copy it back from skeleton/")
            continue
        texts[piece.student_file] = path.read_text()
        report.note_todo(piece.student_file, texts[piece.student_file])
    for rule in rules:
        if rule.student_file in texts and not rule.holds(texts[rule.student_file]):
            report.note(f"hint, {rule.student_file}: {rule.what}? {rule.hint}")
    if len(texts) < len(PIECES[number]):
        return report
    build = getattr(options, "build_dir", None) or BUILD
    out = Path(build).resolve() / "labs" / f"{number}-{folder.name}"
    try:
        main = build_program({number: folder}, out / "p4src")
    except PieceNotFound as err:
        report.add(False, "the lab's program is built from p4src/", f"{err}: the lab needs "
                   "updating to the project's P4 sources")
        return report
    behaviour = f"the project's PTF tests on BMv2 ({ptf_tests})"
    if getattr(options, "static_only", False):
        report.add(False, f"{behaviour}: {NOT_VERIFIED}", "--static-only: run the check "
                   "without it, as root where BMv2 is installed")
        return report
    if not p4c_available():
        report.add(False, f"compiles with p4c-bm2-ss: {NOT_VERIFIED} and p4c",
                   "p4c-bm2-ss is not installed: `make deps-p4`, or the Vagrant VM")
        return report
    try:
        compile_program(main, out)
        report.add(True, f"compiles with p4c-bm2-ss ({_shown(out)})")
    except CompileError as err:
        report.add(False, "compiles with p4c-bm2-ss", str(err))
        return report
    result = run_on_bmv2(number, folder, ptf_tests)
    if not result.ran:
        report.add(False, f"{behaviour}: {NOT_VERIFIED}", result.reason)
    else:
        report.add(result.passed, f"{behaviour}: {result.summary}",
                   "\n".join(result.failed[:8]))
    return report


# tests/p4/test_labs_p4.py builds the program from the pieces named here
# ("02=/path/to/folder,03=/path"); unset, from each lab's solution.
LAB_SOURCE_ENV = "MRC_LAB_P4_SOURCES"
