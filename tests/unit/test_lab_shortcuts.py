"""The known shortcuts through the labs fail their checks, and right answers written
another way pass (issue 23): answers copied from a solution, tables taken from the
controller, runs that are not the student's, P4 judged by its text, and a P4 lab
"passed" without its behaviour ever being run.

BMv2 and p4c are stand-ins here (tests/lab_runs.py); the same P4 shortcuts on a real
switch are in tests/p4/test_labs_p4.py.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from labs import course, p4lab
from tests.lab_runs import (
    LAB08_SESSION,
    START,
    cli_session,
    fake_bmv2,
    fake_fabric,
    incast_trim_run,
    prepare_lab,
    work_copy,
)


def check(number: str, folder: Path, **options) -> course.Report:
    given = {"static_only": False, "offline": False, "live": False, **options}
    return course.check_module(number).check(folder, argparse.Namespace(**given))


def edited(folder: Path, name: str, old: str, new: str) -> Path:
    text = (folder / name).read_text()
    assert old in text, old
    (folder / name).write_text(text.replace(old, new))
    return folder


# ------------------------------------------------------------------ Lab 06
def test_lab06_answers_copied_with_the_solutions_runs_fail(tmp_path):
    """`cp -r solution/. work/` into a started work copy: the answers point at the runs
    shipped with the solution, made before the lab started and not under results/."""
    work = tmp_path / "work"
    work.mkdir()
    (work / course.STARTED).write_text("2026-12-01T00:00:00\n")
    shutil.copytree(course.files_dir("06", "solution"), work, dirs_exist_ok=True)
    root = tmp_path / "results"
    root.mkdir()
    report = check("06", work, results_root=root)
    assert not report.passed
    assert all(f.startswith("a ") and " run of yours" in f for f in report.failures()), (
        report.render())
    assert "your runs are written there" in report.render()


def test_lab06_refuses_a_run_on_another_topology_and_a_copy_never_started(
        tmp_path, monkeypatch):
    work, extra = prepare_lab("06", "skeleton", tmp_path, monkeypatch)
    flap = next(extra["results_root"].glob("*-link-flap"))
    text = (flap / "summary.json").read_text()
    (flap / "summary.json").write_text(text.replace('"2tier-2plane"', '"2tier-8plane"', 1))
    assert "not on 2tier-2plane as the lab asks" in check("06", work, **extra).render()
    (work / course.STARTED).unlink()
    assert check("06", work, **extra).failures() == [
        "your work copy was made by `make lab-start LAB=06`"]


# ------------------------------------------------------------------ Lab 04
CONTROLLERS_TABLE = '''from controller.tables import switch_tables


def routes(fabric, switch):
    return {r.usid: r.port for r in switch_tables(fabric, switch).routes}
'''
PORTS_READ = '''def routes(fabric, switch):
    return {next(p.usid for p in []) if False else 0: p.number
            for p in fabric.ports(switch.name)}
'''


@pytest.mark.parametrize("text, says", [
    (CONTROLLERS_TABLE, "routes.py imports controller.tables"),
    (CONTROLLERS_TABLE.replace("from controller.tables import switch_tables\n",
                               "switch_tables = __import__('controller.tables').tables"
                               ".switch_tables\n"), "imported at run time"),
    (PORTS_READ, "may read only fabric.spec, not fabric.ports"),
], ids=["controllers-table", "imported-at-run-time", "fabric-ports"])
def test_lab04_refuses_tables_not_worked_out(tmp_path, text, says):
    folder = tmp_path / "work"
    shutil.copytree(course.files_dir("04", "solution"), folder)
    (folder / "routes.py").write_text(text)
    report = check("04", folder)
    assert not report.passed and says in report.render(), report.render()


# ------------------------------------------------------------------ P4 labs
def test_a_p4_lab_without_bmv2_is_not_verified_and_fails(monkeypatch):
    if not p4lab.p4c_available():
        monkeypatch.setattr(p4lab, "p4c_available", lambda: True)
        monkeypatch.setattr(p4lab, "compile_program", lambda main, out: (out, out))
    monkeypatch.setattr(p4lab, "bmv2_missing", lambda: "simple_switch_grpc is not installed")
    for number in p4lab.PIECES:
        report = check(number, course.files_dir(number, "solution"))
        assert report.failures() == [
            f"the project's PTF tests on BMv2 (lab{number}): {p4lab.NOT_VERIFIED}"]
        assert report.render().endswith("not yet")


@pytest.mark.parametrize("number, name, old, new", [
    ("03", "ecn.p4", "meta.host_facing == 0", "meta.host_facing != 1"),
    ("02", "forward.p4", "if (!next_hop.apply().hit) {\n    drop_unroutable();  // no route "
     "for the next uSID\n    return;\n}", "if (next_hop.apply().hit) {\n} else {\n"
     "    drop_unroutable();\n    return;\n}"),
], ids=["host-facing-not-one", "hit-else"])
def test_right_p4_written_another_way_passes_without_a_hint(tmp_path, monkeypatch, number,
                                                           name, old, new):
    fake_bmv2(monkeypatch)
    folder = tmp_path / "work"
    shutil.copytree(course.files_dir(number, "solution"), folder)
    report = check(number, edited(folder, name, old, new))
    assert report.passed and not report.notes, report.render()


def test_lab03_or_for_and_is_graded_by_bmv2_and_hinted(tmp_path, monkeypatch):
    """`||` in place of `&&` marks Not-ECT packets and trimmed headers: the PTF tests on
    BMv2 fail it (tests/p4), and the hint names the condition."""
    fake_bmv2(monkeypatch, passed=False)
    folder = tmp_path / "work"
    shutil.copytree(course.files_dir("03", "solution"), folder)
    report = check("03", edited(folder, "ecn.p4", "ECN_NOT_ECT && meta.trim == 0",
                                "ECN_NOT_ECT || meta.trim == 0"))
    assert not report.passed
    assert any("only ECN-capable packets that were not trimmed" in n for n in report.notes)


@pytest.mark.parametrize("number", list(p4lab.PIECES))
def test_the_reading_copy_holds_the_skeleton_not_the_solution(number, tmp_path):
    main = p4lab.reading_copy(number, tmp_path / "reading")
    text = p4lab.normalized(main.read_text())
    for piece in p4lab.PIECES[number]:
        skeleton = (course.files_dir(number, "skeleton") / piece.student_file).read_text()
        solution = (course.files_dir(number, "solution") / piece.student_file).read_text()
        assert p4lab.normalized(skeleton) in text
        assert p4lab.normalized(solution) not in text
    assert "READING COPY" in main.read_text()


# ------------------------------------------------------------------ Lab 07
def test_lab07_refuses_imports_and_names_a_wrong_mac(tmp_path, monkeypatch):
    fake_fabric(monkeypatch)
    folder = tmp_path / "work"
    shutil.copytree(course.files_dir("07", "solution"), folder)
    entries = (folder / "entries.py").read_text()
    (folder / "entries.py").write_text("from controller.bmv2_entries import table_entries\n"
                                       + entries)
    assert "imports a module" in check("07", folder).render()
    (folder / "entries.py").write_text(entries.replace("02:00:10:01:00:03",
                                                       "02:00:10:01:00:02"))
    report = check("07", folder)
    assert not report.passed and "dmac" in report.render() and "0x20010010002" in (
        report.render()), report.render()


def test_lab07_without_bmv2_is_not_verified(monkeypatch):
    fake_fabric(monkeypatch)
    from labs.lab07_p4runtime_by_hand import check as lab07

    monkeypatch.setattr(lab07, "fabric_missing", lambda: "simple_switch_grpc is not installed")
    report = check("07", course.files_dir("07", "solution"))
    assert report.failures() == ["on a BMv2 fabric: not verified: needs BMv2"]


def test_lab07_paths_through_the_switch_must_arrive():
    from labs.lab07_p4runtime_by_hand.check import judge_paths
    from topologies.model import load_topology
    from topologies.paths import all_paths

    paths = all_paths(load_topology("2tier-2plane"))
    through = [p for p in paths if p.plane == 0 and p.spine == 1]
    assert through and judge_paths([], len(paths))[0]
    ok, _, hint = judge_paths(through[:1], len(paths))
    assert not ok and "through p0t1s1" in hint


# ------------------------------------------------------------------ Labs 08, 09
def test_lab08_refuses_sessions_before_the_start_or_elsewhere(tmp_path):
    work = edited(work_copy("08", "solution", tmp_path), "answers.yaml",
                  f"results: runs/{LAB08_SESSION}", 'results: ""')
    root = tmp_path / "results"
    cli_session(root / "20251231-235959-2tier-2plane-cli")  # before START
    cli_session(root / "20260102-000000-2tier-8plane-cli", "2tier-8plane")  # elsewhere
    report = check("08", work, results_root=root)
    assert not report.passed
    assert "before you started the lab" in report.render()
    assert "not on 2tier-2plane" in report.render()


def test_lab08_judges_counts_from_events_and_the_capture(tmp_path):
    work = work_copy("08", "solution", tmp_path)
    root = tmp_path / "results"
    cli_session(root / "20260102-000000-2tier-2plane-cli")
    text = (work / "answers.yaml").read_text().replace(
        f"results: runs/{LAB08_SESSION}", 'results: ""')
    (work / "answers.yaml").write_text(text)
    assert check("08", work, results_root=root).passed
    (work / "answers.yaml").write_text(text.replace("plane_status_sent: 2",
                                                    "plane_status_sent: 3"))
    assert check("08", work, results_root=root).failures() == ["plane_status_sent"]


def test_lab09_counts_nacks_h0_sent_and_refuses_other_runs(tmp_path):
    from labs.lab09_trim_or_drop.check import facts

    root = tmp_path / "results"
    run = incast_trim_run(root / "20260102-000000-2tier-2plane-incast-trim")
    found = facts(run)
    assert found["nacks_in_capture"] == 3 and found["nack_reason"] == "TRIMMED_LASTHOP"
    assert found["mrc_trimmed"] == 416 and found["no_trim_retired"] == 64
    work = work_copy("09", "skeleton", tmp_path)
    shutil.rmtree(run)
    incast_trim_run(root / "20260102-000000-2tier-8plane-incast-trim", "2tier-8plane")
    report = check("09", work, results_root=root)
    assert report.failures() == ["an incast-trim run of yours on 2tier-2plane"]


def test_start_stamps_the_copy_and_writes_the_reading_copy(tmp_path, monkeypatch):
    lab = tmp_path / course.LABS["03"]
    shutil.copytree(course.lab_dir("03") / "skeleton", lab / "skeleton")
    monkeypatch.setattr(course, "LABS_DIR", tmp_path)
    monkeypatch.setattr(course, "REPO", tmp_path)
    work = course.start("03")
    assert course.started_at(work) is not None and START
    assert (work / "reading" / "mrc_switch.p4").is_file()
