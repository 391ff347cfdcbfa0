"""The P4 labs on a real switch: their programs compile, and the project's own PTF tests
pass on them.

The lab program is p4src/ with the pieces of Lab 02 (ingress: uSID shift, forwarding)
and Lab 03 (egress: trimming, ECN) put in by labs/p4lab.py: by default the labs'
solutions, or the folders named in MRC_LAB_P4_SOURCES ("02=/path,03=/path"), which is
how `python -m labs check 02` runs a student's work here. The PTF tests are those of
test_mrc_switch.py, collected again under a `test_labNN_` name, on a switch that
conftest.py starts with the lab program instead of p4src/'s.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import test_mrc_switch as project  # this folder's tests, run again on the lab program

from labs import course
from labs.p4lab import LAB_SOURCE_ENV, PIECES, build_program, compile_program


def lab_sources() -> dict[str, Path]:
    given = os.environ.get(LAB_SOURCE_ENV)
    if not given:
        return {number: course.files_dir(number, "solution") for number in PIECES}
    pairs = (item.split("=", 1) for item in given.split(",") if item)
    return {course.lab_number(number): Path(folder) for number, folder in pairs}


def build_lab(out: Path) -> tuple[Path, Path]:
    """(P4Info, BMv2 JSON) of the lab program."""
    main = build_program(lab_sources(), out / "p4src")
    return compile_program(main, out)


@pytest.fixture(scope="module", autouse=True)
def lab_program():
    """conftest.py's `switch` compiles with experiments.dataplanes.bmv2_target.compile_program: for
    this module it compiles the lab program instead of p4src/'s (labs/p4lab.py reaches
    the real compiler through the module's original function). Autouse, so it is in
    place before the module's switch starts."""
    from experiments.dataplanes import bmv2_target

    real = bmv2_target.compile_program

    def lab_instead(build: Path, main: Path = bmv2_target.P4_MAIN) -> tuple[Path, Path]:
        if main != bmv2_target.P4_MAIN:  # already a lab's program (labs/p4lab.py)
            return real(build, main)
        return build_lab(build)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bmv2_target, "compile_program", lab_instead)
        yield


@pytest.mark.compile_only
def test_lab_program_compiles_with_the_tables_the_controller_writes(tmp_path):
    from controller.bmv2_entries import table_entries
    from controller.p4info import P4Info
    from controller.tables import all_tables
    from topologies.model import load_topology

    p4info_path, json_path = build_lab(tmp_path)
    assert json_path.stat().st_size > 0
    p4info = P4Info.load(p4info_path)
    for tables in all_tables(load_topology("2tier-2plane")).values():
        assert len(table_entries(p4info, tables)) == tables.entry_count


# Lab 02: shift-and-forward.
test_lab02_shift_and_forward_up_to_a_t1 = project.test_shift_and_forward_up_to_a_t1
test_lab02_the_other_spine_is_the_other_port = project.test_the_other_spine_is_the_other_port
test_lab02_last_hop_to_a_host = project.test_last_hop_to_a_host
test_lab02_same_rack_path_down_from_the_t0 = project.test_same_rack_path_down_from_the_t0
test_lab02_drops = project.test_not_mine_no_route_and_not_ipv6_are_dropped_and_counted
test_lab02_hop_limit = project.test_hop_limit

# Lab 03: ECN and trimming.
test_lab03_ecn_marked_on_a_busy_uplink = project.test_ecn_marked_on_a_busy_uplink
test_lab03_never_marked_on_the_last_hop_nor_when_not_ect = (
    project.test_never_marked_on_the_last_hop_nor_when_not_ect)
test_lab03_trimming_with_a_saturated_queue = project.test_trimming_with_a_saturated_queue
test_lab03_trimmed_on_the_last_hop_carries_trimmed_lasthop = (
    project.test_trimmed_on_the_last_hop_carries_trimmed_lasthop)
test_lab03_retransmissions_are_trimmable_too = project.test_retransmissions_are_trimmable_too
test_lab03_untrimmable_data_is_never_trimmed = (
    project.test_untrimmable_data_is_never_trimmed_and_a_full_queue_drops_it)
test_lab03_the_priority_class_is_never_trimmed_and_overtakes_data = (
    project.test_the_priority_class_is_never_trimmed_and_overtakes_data)
test_lab03_roce_is_marked_on_the_last_hop = (
    project.test_the_roce_class_is_marked_on_the_last_hop_and_mrc_data_is_not)
