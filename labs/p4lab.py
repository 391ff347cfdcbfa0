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

`compile_program` runs p4c-bm2-ss on the result when it is installed.
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


def compile_program(main: Path, out: Path) -> tuple[Path, Path]:
    """(P4Info, BMv2 JSON) of `main`, compiled with the options experiments/bmv2_target.py
    compiles p4src/ with. Raises CompileError holding p4c's first errors."""
    p4info, json_path = out / "lab.p4info.txtpb", out / "lab.json"
    done = subprocess.run(["p4c-bm2-ss", "--arch", "v1model", "--std", "p4-16", "-o",
                           str(json_path), "--p4runtime-files", str(p4info), str(main)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        errors = [line for line in lines if "error" in line.lower()] or lines[-1:]
        raise CompileError("\n".join(errors[:6]))
    return p4info, json_path


class CompileError(Exception):
    """p4c-bm2-ss rejected the lab's program; the message holds its first errors."""


def p4c_available() -> bool:
    return shutil.which("p4c-bm2-ss") is not None


# ------------------------------------------------------------------ checking
@dataclass(frozen=True)
class Rule:
    """A static check of one student file: every pattern must match its normalized text
    (no comments, no whitespace), in order when `ordered`."""

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


def add_arguments(parser) -> None:
    parser.add_argument("--static-only", action="store_true",
                        help="only the static check: no compile, no PTF run")


def check_lab(number: str, title: str, folder: Path, rules: tuple[Rule, ...],
              options, ptf_tests: str):
    """Static rules, then the build, a compile when p4c is there, and the lab's PTF
    tests when BMv2 is there and we are root. Returns the Report."""
    report = Report(f"{title} ({folder})")
    texts = {}
    for piece in PIECES[number]:
        path = folder / piece.student_file
        if not path.is_file():
            report.add(False, f"{piece.student_file} exists", "copy it back from skeleton/")
            continue
        texts[piece.student_file] = path.read_text()
        report.add("TODO" not in texts[piece.student_file],
                   f"{piece.student_file}: no TODO left", "a TODO comment is still there")
    for rule in rules:
        if rule.student_file in texts:
            report.add(rule.holds(texts[rule.student_file]),
                       f"{rule.student_file}: {rule.what}", rule.hint)
    if len(texts) < len(PIECES[number]) or getattr(options, "static_only", True):
        return report
    out = REPO / "build" / "labs" / f"{number}-{folder.name}"
    try:
        main = build_program({number: folder}, out / "p4src")
    except PieceNotFound as err:
        report.add(False, "the lab's program is built from p4src/", f"{err}: the lab needs "
                   "updating to the project's P4 sources")
        return report
    if not p4c_available():
        report.note("p4c-bm2-ss is not installed: no compile, no PTF run (the static check "
                    "is all you get; `make deps-p4` installs BMv2 and p4c)")
        return report
    try:
        compile_program(main, out)
        report.add(True, f"compiles with p4c-bm2-ss ({out.relative_to(REPO)})")
    except CompileError as err:
        report.add(False, "compiles with p4c-bm2-ss", str(err))
        return report
    if shutil.which("simple_switch_grpc") is None or os.geteuid() != 0:
        report.note("PTF run skipped: it needs simple_switch_grpc and root")
        return report
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/p4/test_labs_p4.py", "-k", ptf_tests],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, LAB_SOURCE_ENV:
                                                       f"{number}={folder}"})
    last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    if done.returncode == 0 and "passed" not in last:
        report.note(f"PTF run skipped by tests/p4 ({last}); see its conftest.py for why")
        return report
    failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    report.add(done.returncode == 0, f"the project's PTF tests on BMv2 ({last})",
               "\n".join(failed[:8]))
    return report


# tests/p4/test_labs_p4.py builds the program from the pieces named here
# ("02=/path/to/folder,03=/path"); unset, from each lab's solution.
LAB_SOURCE_ENV = "MRC_LAB_P4_SOURCES"
