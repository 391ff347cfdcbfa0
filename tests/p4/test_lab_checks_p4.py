"""The P4 labs' checks on a real switch: the untouched skeletons fail on their
behaviour, the shortcut of issue 23 (`||` for `&&` in Lab 03's ECN condition, which
marks Not-ECT packets) fails, and right answers written another way (`host_facing !=
1`, `if (t.apply().hit) {} else {...}`, or with the skeleton's TODO comments left in)
pass. Each check
runs the project's PTF tests on the lab program (labs/p4lab.py run_on_bmv2); skipped,
with the reason, where BMv2 or root is missing (conftest.py).
"""

from __future__ import annotations

import argparse
import shutil

import pytest

from labs import course


@pytest.mark.parametrize("number, name, old, new, passes", [
    ("03", "ecn.p4", "ECN_NOT_ECT && meta.trim == 0", "ECN_NOT_ECT || meta.trim == 0", False),
    ("03", "ecn.p4", "meta.host_facing == 0", "meta.host_facing != 1", True),
    ("02", "forward.p4", "if (!next_hop.apply().hit) {\n    drop_unroutable();  // no route "
     "for the next uSID\n    return;\n}", "if (next_hop.apply().hit) {\n} else {\n"
     "    drop_unroutable();\n    return;\n}", True),
    ("02", "usid_shift.p4", "action usid_shift() {", "action usid_shift() {\n    // TODO 1: "
     "the shift", True),
], ids=["or-for-and", "host-facing-not-one", "hit-else", "todo-comment-left"])
def test_a_p4_lab_is_graded_by_its_behaviour(tmp_path, number, name, old, new, passes):
    folder = tmp_path / "work"
    shutil.copytree(course.files_dir(number, "solution"), folder)
    text = (folder / name).read_text()
    assert old in text
    (folder / name).write_text(text.replace(old, new))
    report = course.check_module(number).check(folder, argparse.Namespace(static_only=False))
    assert report.passed is passes, report.render()


@pytest.mark.parametrize("number", ["02", "03"])
def test_an_untouched_p4_skeleton_fails_on_its_behaviour(number):
    report = course.check_module(number).check(course.files_dir(number, "skeleton"),
                                               argparse.Namespace(static_only=False))
    assert not report.passed
    behaviour = [what for ok, what, _ in report.items if not ok and "BMv2" in what]
    assert behaviour or any(not ok and "compiles" in what for ok, what, _ in report.items), \
        report.render()
