"""docs/architecture.md's module map stays complete and true.

The map (the first code block of docs/architecture.md) is where a reader learns which
module owns what, and nothing else keeps it in step with the code: a new module goes
unnamed, a renamed or removed one leaves a dead name behind. So both directions are
checked here, by reading files only (nothing is imported or run):

- every module of topologies/, controller/, hosts/ and experiments/ (at every depth)
  and of bench/ and labs/ (their top level) is named in the map; `__init__.py` is not
  asked for, `__main__.py` is;
- every `*.py` name in the document, in the map or in the prose, is a file of the
  repository.

How a name is read. A name whose first folder is a top-level folder of the repository
(`controller/program.py`, `tests/unit/test_import_layers.py`) is a path from the
repository's root. In the map, any other name is relative to the package of its line:
the package of the last line whose first word is a path in a package (`experiments/`
heads `├─ lifecycle.py` and `├─ faults/player.py` below it). In the prose, any other
name must be a file of one of the packages (`kernel_target.py`). A name may be a glob
(`faults/kinds/*.py`): it names every file it matches, and must match one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = "docs/architecture.md"
DEEP = ("topologies", "controller", "hosts", "experiments")  # every module, at any depth
SHALLOW = ("bench", "labs")  # the top level only (a lab's own files are not modules)
PACKAGES = DEEP + SHALLOW

# A `.py` name as the document writes it: a path, possibly with `*`, not part of a
# longer word (`hosts.agent` and `<name>.yaml` are not names of files).
PY_NAME = re.compile(r"(?<![\w./*<>-])([\w*][\w./*-]*\.py)(?!\w)")
TREE = "│├└─▼ \t"


@dataclass(frozen=True)
class Name:
    line: int  # in the document
    written: str  # as the document writes it
    candidates: tuple[str, ...]  # the paths from the repository's root it may mean
    in_map: bool


def modules(root: Path) -> set[str]:
    """Every module file the map must name, as a path from the repository's root."""
    found = set()
    for package in PACKAGES:
        pattern = "**/*.py" if package in DEEP else "*.py"
        found |= {p.relative_to(root).as_posix() for p in (root / package).glob(pattern)
                  if p.is_file() and p.name != "__init__.py"}
    return found


def top_folders(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")}


def map_span(text: str) -> tuple[int, int]:
    """Where the map lies in `text`: the first fenced code block (start, end offsets)."""
    match = re.search(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
    assert match, f"{DOC} has no code block: the module map is its first one"
    return match.start(1), match.end(1)


def names(text: str, root: Path) -> list[Name]:
    """Every `.py` name in the document, with the paths it may mean (see the docstring)."""
    tops = top_folders(root)
    start, end = map_span(text)
    found = []
    package = None
    offset = 0
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        in_map = start <= offset < end
        offset += len(line)
        first = (line.lstrip(TREE).split() or [""])[0]
        if in_map and "/" in first and first.split("/")[0] in PACKAGES:
            package = first.split("/")[0]
        for written in PY_NAME.findall(line):
            if written.split("/")[0] in tops and "/" in written:
                candidates = (written,)
            elif in_map and package is not None:
                candidates = (f"{package}/{written}",)
            else:
                candidates = tuple(f"{p}/{written}" for p in PACKAGES)
            found.append(Name(number, written, candidates, in_map))
    return found


def files_named(name: Name, root: Path) -> set[str]:
    """The repository's files that `name` names (a glob may name many)."""
    return {p.relative_to(root).as_posix() for candidate in name.candidates
            for p in root.glob(candidate) if p.is_file()}


def unnamed_modules(text: str, root: Path) -> list[str]:
    covered = set()
    for name in names(text, root):
        if name.in_map:
            covered |= files_named(name, root)
    return sorted(modules(root) - covered)


def dead_names(text: str, root: Path) -> list[str]:
    return [f"{DOC}:{n.line}: {n.written} (read as {' or '.join(n.candidates)})"
            for n in names(text, root) if not files_named(n, root)]


def read_doc(root: Path = REPO) -> str:
    return (root / DOC).read_text(encoding="utf-8")


def test_the_packages_have_modules_to_check():
    """If the packages moved, an empty list of modules would make the map test pass."""
    found = modules(REPO)
    assert {"topologies/model.py", "experiments/faults/player.py", "bench/rawsock.py",
            "labs/course.py"} <= found
    assert not {m for m in found if m.startswith("labs/lab")}


def test_the_map_names_every_module():
    missing = unnamed_modules(read_doc(), REPO)
    assert not missing, (
        f"{DOC}'s module map does not name: {', '.join(missing)}. For each, add a line "
        f"for it to {DOC} (in the map's code block, under its package: what the module "
        "owns, in one line)")


def test_every_py_name_in_the_document_is_a_file():
    dead = dead_names(read_doc(), REPO)
    assert not dead, (
        f"{DOC} names files that do not exist: " + "; ".join(dead)
        + f". Correct the name in {DOC}, or remove its line if the module is gone")


# What follows shows the reading rules on a made-up repository.

def make_repo(root: Path, files: list[str]) -> Path:
    for name in files + ["docs/x.md", "tests/unit/test_x.py"]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    return root


FILES = ["hosts/__init__.py", "hosts/wire.py", "experiments/runner.py",
         "experiments/faults/player.py", "experiments/faults/kinds/link.py",
         "experiments/faults/kinds/port.py", "labs/course.py", "labs/lab01/check.py"]


def test_names_in_the_map_are_read_under_their_package(tmp_path):
    root = make_repo(tmp_path, FILES)
    text = ("# x\n\n```\nhosts/                 the transports\n   ├─ wire.py   codec\n"
            "experiments/runner.py  a run (see hosts/wire.py)\n   ├─ faults/player.py   p\n"
            "   └─ faults/kinds/*.py   kinds\nlabs/course.py   the course\n```\n\n"
            "Prose: `runner.py`, tests/unit/test_x.py, labs/lab*/check.py.\n")
    assert unnamed_modules(text, root) == []
    assert dead_names(text, root) == []


def test_an_unnamed_module_and_a_dead_name_are_reported(tmp_path):
    root = make_repo(tmp_path, FILES)
    text = ("```\nhosts/wire.py   codec\nexperiments/\n   ├─ runner.py   r\n"
            "   ├─ wire.py   (not here: hosts/ has it)\n   └─ faults/kinds/*.py   kinds\n"
            "labs/course.py\n```\nProse: `gone.py`.\n")
    assert unnamed_modules(text, root) == ["experiments/faults/player.py"]
    assert dead_names(text, root) == [
        f"{DOC}:5: wire.py (read as experiments/wire.py)",
        f"{DOC}:9: gone.py (read as " + " or ".join(f"{p}/gone.py" for p in PACKAGES) + ")"]
