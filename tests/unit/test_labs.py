"""The lab course cannot rot: every lab's check fails on its untouched skeleton and passes
on its solution, and catches a solution with one rule broken.

The P4 labs are graded by their program's behaviour on BMv2 (tests/p4/test_labs_p4.py
runs it); here BMv2 is replaced by a stand-in that reports what it is told, and their
solutions are shown to be the project's own P4 code. The labs that answer from the
student's own runs (06, 08, 09) get runs made after the work copy's start stamp
(tests/lab_runs.py). tests/unit/test_lab_shortcuts.py holds the known shortcuts.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labs import course, p4lab
from labs.p4lab import MAIN, P4SRC, PIECES, build_program, find_piece, normalized, splice
from tests.lab_runs import prepare_lab

REPO = Path(__file__).resolve().parents[2]
SOLUTION_RUNS = course.lab_dir("06") / "solution" / "runs"


def options(tmp_path: Path, **extra) -> argparse.Namespace:
    """What the command line gives a check, without the parts that need root or p4c;
    what a check builds goes under `tmp_path`."""
    empty = tmp_path / "no-results"
    empty.mkdir(exist_ok=True)
    given = {"static_only": True, "live": False, "results_root": empty,
             "build_dir": tmp_path / "build", **extra}
    return argparse.Namespace(**given)


def run_check(number: str, folder: Path, tmp_path: Path, **extra) -> course.Report:
    return course.check_module(number).check(folder, options(tmp_path, **extra))


@pytest.mark.parametrize("number", list(course.LABS))
def test_every_lab_passes_on_its_solution(number, tmp_path, monkeypatch):
    folder, extra = prepare_lab(number, "solution", tmp_path, monkeypatch)
    report = run_check(number, folder, tmp_path, **extra)
    assert report.passed, report.render()


@pytest.mark.parametrize("number", list(course.LABS))
def test_every_lab_fails_on_its_untouched_skeleton(number, tmp_path, monkeypatch):
    # Labs that answer from runs get runs of their own, made after the skeleton's start:
    # they must fail on the answers, not only for want of a run.
    folder, extra = prepare_lab(number, "skeleton", tmp_path, monkeypatch)
    report = run_check(number, folder, tmp_path, **extra)
    assert not report.passed
    if number in ("06", "08", "09"):
        assert len(report.failures()) >= 2, report.render()


@pytest.mark.parametrize("number", list(course.LABS))
def test_every_lab_has_a_readme_with_goal_steps_time_and_questions(number):
    text = (course.lab_dir(number) / "README.md").read_text()
    for part in ("**Goal.**", "**Time:**", "## Steps", "## Questions"):
        assert part in text, f"labs/{course.LABS[number]}/README.md lacks {part}"
    assert course.LABS[number] in (REPO / "labs" / "README.md").read_text()


def _mutant(tmp_path: Path, number: str, name: str, old: str, new: str) -> Path:
    """A copy of the lab's solution with `old` replaced by `new` in file `name`."""
    folder = tmp_path / "mutant"
    shutil.copytree(course.files_dir(number, "solution"), folder)
    text = (folder / name).read_text()
    assert old in text
    (folder / name).write_text(text.replace(old, new))
    return folder


# ------------------------------------------------------------------ P4 labs (static)
@pytest.mark.parametrize("number", list(PIECES))
def test_p4_solutions_are_the_projects_own_code(number):
    """Splicing a solution into the project's P4 file gives that file back (comments and
    layout aside), so the solution compiles and passes the P4 tests whenever p4src/ does;
    splicing the skeleton does not."""
    for piece in PIECES[number]:
        project = (P4SRC / piece.project_file).read_text()
        for copy, same in (("solution", True), ("skeleton", False)):
            student = (course.files_dir(number, copy) / piece.student_file).read_text()
            spliced = splice(project, piece, student)
            assert (normalized(spliced) == normalized(project)) is same, (copy, piece)


def test_p4_lab_program_holds_the_students_pieces(tmp_path):
    folder = _mutant(tmp_path, "02", "usid_shift.p4", "dst_rest << 16", "dst_rest << 8")
    main = build_program({"02": folder}, tmp_path / "p4src")
    program, project = main.read_text(), (P4SRC / MAIN).read_text()
    assert "dst_rest << 8" in program and "dst_rest << 16" not in program
    # The student's piece (comments and layout aside), and nothing else, differs from
    # the project's program; the egress control is the project's to the byte.
    assert normalized(program.replace("dst_rest << 8", "dst_rest << 16")) == normalized(
        project)
    egress = project.index("control MrcEgress")
    assert program.endswith(project[egress:])
    for include in ("headers.p4", "parser.p4"):
        assert (main.parent / "include" / include).read_text() == (
            P4SRC / "include" / include).read_text()
    start, end = find_piece(program, PIECES["02"][0])
    assert program[start:end].startswith("action usid_shift()")


def test_p4_pieces_are_searched_in_their_own_control():
    """Lab 03's needles are looked for in MrcEgress only: the ingress's apply block,
    which comes first in the file, must not be where they are found."""
    text = (P4SRC / MAIN).read_text()
    egress = text.index("control MrcEgress")
    for piece in PIECES["03"]:
        start, _ = find_piece(text, piece)
        assert start > egress, piece
    for piece in PIECES["02"]:
        _, end = find_piece(text, piece)
        assert end < egress, piece


def test_lab03_every_rule_fails_on_its_skeleton():
    """Each static rule of Lab 03 asks for something the student writes."""
    rules = course.check_module("03").RULES
    skeleton = course.files_dir("03", "skeleton")
    holding = [rule.what for rule in rules
               if rule.holds((skeleton / rule.student_file).read_text())]
    assert holding == []


SHIFT = ("hdr.ipv6.dst_active = hdr.ipv6.dst_rest[79:64];\n"
         "    hdr.ipv6.dst_rest = hdr.ipv6.dst_rest << 16;")
SHIFT_SWAPPED = ("hdr.ipv6.dst_rest = hdr.ipv6.dst_rest << 16;\n"
                 "    hdr.ipv6.dst_active = hdr.ipv6.dst_rest[79:64];")


@pytest.mark.parametrize("number, name, old, new", [
    ("02", "usid_shift.p4", "dst_rest << 16", "dst_rest << 8"),
    ("02", "usid_shift.p4", SHIFT, SHIFT_SWAPPED),
    ("02", "forward.p4", "if (!next_hop.apply().hit) {\n    drop_unroutable();",
     "if (!next_hop.apply().hit) {\n"),
    ("03", "trim.p4", "    hdr.ipv6.dscp = meta.dscp_trimmed;\n", ""),
    ("03", "trim.p4", "truncate(meta.trim_size)", "truncate(128)"),
    ("03", "ecn.p4", " && meta.host_facing == 0", ""),
    ("03", "ecn.p4", " && meta.trim == 0", ""),
    ("03", "ecn.p4", "meta.behaviour == BEHAVIOUR_LOSSLESS", "meta.behaviour == 0"),
    ("03", "ecn.p4", "depth >= meta.ecn_kmax || draw < p", "depth >= meta.ecn_kmax"),
], ids=["shift-by-8", "shift-before-read", "no-drop-on-miss", "dscp-not-rewritten",
        "cut-to-a-fixed-size", "marks-towards-hosts", "marks-trimmed-headers",
        "lossless-not-at-every-hop", "no-red-below-kmax"])
def test_p4_hints_name_a_broken_rule(tmp_path, number, name, old, new):
    """The hints (notes, never graded) still point at what a usual answer does."""
    report = run_check(number, _mutant(tmp_path, number, name, old, new), tmp_path)
    assert any(note.startswith("hint") for note in report.notes), report.render()
    solution = run_check(number, course.files_dir(number, "solution"), tmp_path)
    assert not any(note.startswith("hint") for note in solution.notes), solution.render()


# ------------------------------------------------------------------ Lab 04
def test_lab04_catches_swapped_uplinks_and_a_bad_topology(tmp_path):
    folder = _mutant(tmp_path, "04", "routes.py", "spec.hosts_per_rack + spine",
                     "spec.hosts_per_rack + spec.t1_per_plane - 1 - spine")
    report = run_check("04", folder, tmp_path)
    assert report.failures() == [
        "routes() equals the controller's tables on all 10 switches of 3rack-2plane",
        "routes() equals the controller's tables on all 48 switches of 2tier-8plane",
        "every path of 3rack-2plane reaches its host through your tables"], report.render()
    (folder / "3rack-2plane.yaml").write_text(
        (folder / "3rack-2plane.yaml").read_text().replace("racks: 3", "racks: 2"))
    report = run_check("04", folder, tmp_path)
    assert "racks: 2, expected 3" in report.render()


# ------------------------------------------------------------------ Lab 05
@pytest.mark.parametrize("old, new, failing", [
    # Congestion retires: the replay's busy path must only be skipped.
    ("        if self.state == GOOD:\n            self.state = SKIP",
     "        if self.state == GOOD:\n            self.on_loss(now)",
     ("a loss retires a path; congestion never does", "replay")),
    # Probes at a fixed interval instead of doubling waits.
    ("self.wait = min(self.wait * 2, self.probe_max_s)", "pass", "probes of a retired"),
    # A reply does not reinstate.
    ("        self.state = GOOD\n        self.probe_at = None",
     "        self.probe_at = None", "a probe reply"),
], ids=["congestion-retires", "fixed-probe-interval", "reply-ignored"])
def test_lab05_catches_a_broken_rule(tmp_path, old, new, failing):
    report = run_check("05", _mutant(tmp_path, "05", "path_state.py", old, new), tmp_path)
    for part in (failing,) if isinstance(failing, str) else failing:
        assert any(what.startswith(part) for what in report.failures()), report.render()


# ------------------------------------------------------------------ Lab 06
def test_lab06_solution_runs_have_every_field_a_real_summary_has():
    from experiments.analysis.metrics import summarize
    from experiments.run.workload_run import TransferResult, TransportRun

    run = TransportRun("mrc", 0.0, 1.0, [TransferResult(0, 1, 0, 10, "victim", 0, 0.0, 0.5)])
    keys = set(summarize(run, []))
    for scenario in ("link-flap", "incast"):
        summary = json.loads((SOLUTION_RUNS / scenario / "summary.json").read_text())
        assert summary["scenario"] == scenario
        for block in summary["transports"]:
            # Runs with the eBPF switch also count its ports per transport; a run says
            # which fabric each transport ran on.
            assert keys <= set(block) <= keys | {"switch_counters", "fabric"}, scenario


def test_lab06_reads_the_newest_run_of_each_scenario(tmp_path):
    root = tmp_path / "results"
    for name, scenario in (("20260101-000000-2tier-2plane-link-flap", "link-flap"),
                           ("20260101-000000-2tier-8plane-incast", "incast")):
        shutil.copytree(SOLUTION_RUNS / scenario, root / name)
    newer = root / "20260102-000000-2tier-2plane-link-flap"
    shutil.copytree(SOLUTION_RUNS / "link-flap", newer)
    summary = json.loads((newer / "summary.json").read_text())
    summary["transports"][0]["path_events"]["retire"] = 99
    (newer / "summary.json").write_text(json.dumps(summary))
    answers = tmp_path / "answers"
    answers.mkdir()
    (answers / course.STARTED).write_text("2026-01-01T00:00:00\n")  # before the runs
    text = (course.files_dir("06", "solution") / "answers.yaml").read_text()
    text = text.replace("results: runs/link-flap", 'results: ""').replace(
        "results: runs/incast", 'results: ""')
    (answers / "answers.yaml").write_text(text)
    report = run_check("06", answers, tmp_path, results_root=root)
    assert report.failures() == ["link_flap.mrc_retired"], report.render()
    (answers / "answers.yaml").write_text(text.replace("mrc_retired: 48", "mrc_retired: 99"))
    assert run_check("06", answers, tmp_path, results_root=root).passed


# ------------------------------------------------------------------ Lab 01, the runner
def test_lab01_explains_a_wrong_address(tmp_path):
    (tmp_path / "answer.txt").write_text("fcbb:bb00:1100:2101:1101:8003::\n")
    report = run_check("01", tmp_path, tmp_path)
    assert report.failures()[0].startswith("h0 -> h3, plane 1, spine 0")
    assert "T1 plane 1 spine 1" in report.render()


def test_runner_checks_a_solution_and_says_usage_mistakes_in_one_line(tmp_path):
    def labs(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "labs", *args], cwd=REPO,
                              capture_output=True, text=True)

    done = labs("check", "05", "--solution")
    assert done.returncode == 0 and done.stdout.strip().endswith("lab passed"), done.stderr
    # A P4 lab whose behaviour was not run is not passed, whatever its text.
    done = labs("check", "02", "--solution", "--static-only", "--build-dir", str(tmp_path))
    assert done.returncode == 1 and p4lab.NOT_VERIFIED in done.stdout, done.stdout
    assert (tmp_path / "labs" / "02-solution" / "p4src" / MAIN).is_file()
    done = labs("check", "19")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: LAB=19: no such lab; fix: use one of {', '.join(course.LABS)}"]
    assert labs("list").stdout.count("\n") == len(course.LABS)


def test_start_copies_the_skeleton_once(tmp_path, monkeypatch):
    lab = tmp_path / course.LABS["05"]
    shutil.copytree(course.lab_dir("05") / "skeleton", lab / "skeleton")
    monkeypatch.setattr(course, "LABS_DIR", tmp_path)
    monkeypatch.setattr(course, "REPO", tmp_path)
    with pytest.raises(course.LabError, match="no work copy yet"):
        course.files_dir("05")
    work = course.start("05")
    assert (work / "path_state.py").read_text() == (
        lab / "skeleton" / "path_state.py").read_text()
    assert course.started_at(work) is not None
    with pytest.raises(course.LabError, match="already exists"):
        course.start("05")
