"""Scenario files are checked in one step, before root is needed: every mistake is one line.

The bad files below go through the real command line (`experiments.__main__.main`);
each must end with exit status 2 and one line on stderr naming the file and the field,
quickly and without a traceback. Reaching the data-plane choice would mean that a bad
file passed validation, so the test fails there.
"""

from __future__ import annotations

import threading

import pytest

from experiments import __main__ as cli
from experiments.dataplanes import choice as dataplane
from experiments.scenarios.scenario import available_scenarios, load_scenario
from topologies.model import load_topology

# A value whose last list nests aliases nine levels deep: 10^9 elements if expanded.
ALIAS_BOMB = "[&a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1], " + ", ".join(
    f"&{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]" for i in range(8)) + "]"
FLAP = "{kind: link-flap, link: [p0t0r0, p0t1s0], at_s: 0.5, down_s: 0.5"

BAD = {
    # name: (file content, the field the error names)
    "fan-in-text": ("workload: incast\nparams: {fan_in: three}\n", "params.fan_in"),
    "fan-in-negative": ("workload: incast\nparams: {fan_in: -3}\n", "params.fan_in"),
    "count-text": ("workload: transfer\nparams: {count: two}\n", "params.count"),
    "count-fraction": ("workload: transfer\nparams: {count: 3.7}\n", "params.count"),
    "count-huge": ("workload: transfer\nparams: {count: 100000000}\n", "params.count"),
    "flap-count-huge": (f"workload: all-reduce\nfaults:\n  - {FLAP}, count: 100000000}}\n",
                        "faults[0].count"),
    "flap-count-fraction": (f"workload: all-reduce\nfaults:\n  - {FLAP}, count: 3.7}}\n",
                            "faults[0].count"),
    "flap-after-timeout": (f"workload: all-reduce\ntimeout_s: 5\nfaults:\n  - {FLAP}, "
                           "count: 10, every_s: 1}\n", "faults[0].count"),
    "not-utf8": (b"workload: transfer\ndescription: caf\xe9\n", "file"),
    "binary": (bytes(range(256)) * 8, "file"),
    "not-yaml": ("workload: [transfer\n", "line 2"),
    "deep": ("workload: " + "[" * 2000 + "\n", "file"),
    "empty": ("", "document"),
    "a-list": ("- workload: transfer\n", "document"),
    "unknown-field": ("workload: transfer\ncolour: red\n", "colour"),
    "key-with-newline": ('workload: transfer\n"col\\nour\\u2028": red\n', "col\\nour\\u2028"),
    "key-with-escape": ('workload: transfer\n"\\e[31mred": 1\n', "\\x1b[31mred"),
    "no-workload": ("name: x\n", "workload"),
    "unknown-workload": ("workload: gossip\n", "workload"),
    "bad-name": ("name: ../../etc\nworkload: transfer\n", "name"),
    "description-list": ("workload: transfer\ndescription: [1]\n", "description"),
    "unknown-param": ("workload: all-reduce\nparams: {size: 3}\n", "params.size"),
    "params-list": ("workload: all-reduce\nparams: [1]\n", "params"),
    "bytes-infinite": ("workload: all-reduce\nparams: {data_bytes: .inf}\n", "params.data_bytes"),
    "victim-short": ("workload: incast\nparams: {victim: [0]}\n", "params.victim"),
    "alias-bomb": (f"workload: transfer\nparams: {{count: {ALIAS_BOMB}}}\n", "params.count"),
    "timeout-infinite": ("workload: transfer\ntimeout_s: .inf\n", "timeout_s"),
    "timeout-negative": ("workload: transfer\ntimeout_s: -1\n", "timeout_s"),
    "transports-twice": ("workload: transfer\ntransports: [mrc, mrc]\n", "transports"),
    "transports-unknown": ("workload: transfer\ntransports: [tcp]\n", "transports"),
    "transports-empty": ("workload: transfer\ntransports: []\n", "transports"),
    "protocol-list": ("workload: transfer\nprotocol: [1]\n", "protocol"),
    "protocol-unknown": ("workload: transfer\nprotocol: {windw: 4}\n", "protocol.windw"),
    "protocol-zero": ("workload: transfer\nprotocol: {window: 0}\n", "protocol.window"),
    "protocol-text": ("workload: transfer\nprotocol: {window: '8'}\n", "protocol.window"),
    "protocol-nan": ("workload: transfer\nprotocol: {reconvergence_s: .nan}\n",
                     "protocol.reconvergence_s"),
    "faults-mapping": ("workload: transfer\nfaults: {kind: blackhole}\n", "faults"),
    "fault-not-mapping": ("workload: transfer\nfaults: [link-flap]\n", "faults[0]"),
    "fault-unknown-kind": ("workload: transfer\nfaults: [{kind: meteor, at_s: 1}]\n",
                           "faults[0].kind"),
    "fault-unknown-key": ("workload: transfer\nfaults: [{kind: blackhole, switch: p0t1s0, "
                          "at_s: 1, down_s: 1, colour: red}]\n", "faults[0].colour"),
    "fault-bad-link": ("workload: transfer\nfaults: [{kind: link-flap, link: [h0], at_s: 1, "
                       "down_s: 1}]\n", "faults[0].link"),
    "fault-bool-plane": ("workload: transfer\nfaults: [{kind: nic-port-down, host: h0, "
                         "plane: true, at_s: 1}]\n", "faults[0].plane"),
    "fault-nan-time": ("workload: transfer\nfaults: [{kind: blackhole, switch: p0t1s0, "
                       "at_s: .nan, down_s: 1}]\n", "faults[0].at_s"),
    "pathcheck-faults": ("workload: pathcheck\nfaults: []\n", "faults"),
    "pathcheck-copies": ("workload: pathcheck\nparams: {copies: 0}\n", "params.copies"),
    "pathcheck-param": ("workload: pathcheck\nparams: {count: 3}\n", "params.count"),
    "check-paths-text": ("workload: transfer\ncheck_paths: 'yes'\n", "check_paths"),
    "pathcheck-check-paths": ("workload: pathcheck\ncheck_paths: true\n", "check_paths"),
}


def run_main(argv: list[str], timeout_s: float = 30.0) -> int:
    """main(argv) in a thread, so that a hang fails the test instead of stalling it."""
    result: list = []
    thread = threading.Thread(target=lambda: result.append(cli.main(argv)), daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert not thread.is_alive(), f"{argv} still running after {timeout_s}s"
    assert result, f"{argv} raised (see the thread's traceback above)"
    return result[0]


@pytest.fixture
def no_run(monkeypatch):
    """Fail where a valid scenario would go on to choose a data plane."""
    def passed(requested):
        raise AssertionError("the scenario passed validation")

    monkeypatch.setattr(dataplane, "choose", passed)


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_scenario_is_one_line_naming_the_field(case, tmp_path, capsys, no_run):
    content, fieldname = BAD[case]
    path = tmp_path / f"{case}.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    status = run_main(["run", "--topo", "2tier-2plane", "--scenario", str(path),
                       "--results", str(tmp_path / "results")])
    out, err = capsys.readouterr()
    assert status == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: {path}: {fieldname}: "), lines[0]
    assert "; fix: " in lines[0] and len(lines[0]) < 600, lines[0]
    assert not (tmp_path / "results").exists()


def test_every_shipped_scenario_is_parsed_whole(no_run):
    fabric = load_topology("2tier-8plane")
    for name in available_scenarios():
        scenario = load_scenario(name, fabric)
        assert scenario.name == name
        assert bool(scenario.plan) == (scenario.workload != "pathcheck")
    flap = load_scenario("link-flap", fabric)
    # Two links, four flaps each: a down and an up step per flap, in time order.
    assert len(flap.faults) == 16 and [a.t for a in flap.faults] == sorted(
        a.t for a in flap.faults)
    assert flap.transports == ("mrc", "roce-8") and flap.timeout_s == 90
    # Ring all-reduce on 8 hosts: 2(N-1) phases of one chunk per host.
    assert len(flap.plan) == 14 and {t.size for p in flap.plan for t in p} == {1_000_000}
    check = load_scenario("pathcheck", fabric)
    assert (check.check_copies, check.check_wait_s, check.faults) == (2, 3.0, ())


def test_the_scenario_is_checked_against_the_topology(tmp_path, capsys, no_run):
    # p2t1s1 exists on 2tier-8plane, not on 2tier-2plane: the same file fails there.
    path = tmp_path / "s.yaml"
    path.write_text("workload: all-to-all\nfaults: [{kind: blackhole, switch: p2t1s1, "
                    "at_s: 0.5, down_s: 1}]\n")
    assert load_scenario(str(path), load_topology("2tier-8plane")).faults
    assert run_main(["run", "--topo", "2tier-2plane", "--scenario", str(path)]) == 2
    assert "faults[0].switch: 'p2t1s1' is not a switch of 2tier-2plane" in capsys.readouterr().err


def test_a_target_that_cannot_be_created_is_one_line_and_leaves_no_folder(
        tmp_path, capsys, monkeypatch):
    from experiments.dataplanes import targets
    from experiments.run import lifecycle
    from topologies.bmv2 import Bmv2Error

    def broken(name, program=None):
        raise Bmv2Error("p4c-bm2-ss could not compile p4src/mrc_switch.p4:\n"
                        "['error: syntax error']")

    monkeypatch.setattr(dataplane, "choose", lambda requested: ("bmv2", "requested"))
    monkeypatch.setattr(lifecycle, "require_root", lambda what: None)
    monkeypatch.setenv("MRC_FABRIC_LOCK", str(tmp_path / "fabric.lock"))
    monkeypatch.setattr(targets, "make_target", broken)
    results = tmp_path / "results"
    status = run_main(["run", "--topo", "2tier-2plane", "--dataplane", "bmv2",
                       "--results", str(results)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.strip().splitlines() == [
        "error: DATAPLANE=bmv2: p4c-bm2-ss could not compile p4src/mrc_switch.p4: "
        "['error: syntax error']"]
    assert not results.exists()


def test_a_results_folder_that_cannot_be_made_is_one_line(tmp_path, capsys, monkeypatch):
    from experiments.dataplanes import targets
    from experiments.run import lifecycle

    monkeypatch.setattr(dataplane, "choose", lambda requested: ("kernel", "requested"))
    monkeypatch.setattr(lifecycle, "require_root", lambda what: None)
    monkeypatch.setenv("MRC_FABRIC_LOCK", str(tmp_path / "fabric.lock"))
    monkeypatch.setattr(targets, "make_target", lambda name, program=None: object())
    blocker = tmp_path / "file"
    blocker.write_text("")
    status = run_main(["run", "--topo", "2tier-2plane", "--results", str(blocker / "results")])
    err = capsys.readouterr().err
    assert status == 2
    assert err.strip().splitlines() == [
        f"error: --results {blocker}/results: cannot be made (Not a directory); "
        "fix: give a folder you can write to"]


def test_a_rate_cap_that_is_not_one_is_one_line_and_leaves_no_folder(
        tmp_path, capsys, monkeypatch):
    from experiments.run import lifecycle

    monkeypatch.setattr(dataplane, "choose", lambda requested: ("kernel", "requested"))
    monkeypatch.setattr(lifecycle, "require_root", lambda what: None)
    monkeypatch.setenv("MRC_FABRIC_LOCK", str(tmp_path / "fabric.lock"))
    results = tmp_path / "results"
    for bad in ("fast", "0", "-3", "nan", "inf"):
        status = run_main(["run", "--topo", "2tier-2plane", "--rate-cap", bad,
                           "--results", str(results)])
        assert status == 2
        assert capsys.readouterr().err.strip().splitlines() == [
            f"error: RATE_CAP={bad}: is not a rate cap; fix: use calibrated, cached, off, "
            "or a link rate in Mbit/s (e.g. 4)"]
    assert not results.exists()


def test_a_rate_cap_in_mbits_caps_every_link_and_says_so():
    from experiments.run.lifecycle import Progress, _agents_cap
    from topologies.model import load_topology

    fabric = load_topology("2tier-2plane")  # links at 20 Mbit/s
    capped, note = _agents_cap(fabric, "5", Progress())
    assert {capped.spec.host_t0.rate_mbit, capped.spec.t0_t1.rate_mbit} == {5.0}
    assert note.startswith("links capped from 20 to 5 Mbit/s (RATE_CAP=5)")
    # queues keep their depth in round trips: a quarter of the rate, a quarter the frames
    assert capped.spec.host_t0.queue_pkts < fabric.spec.host_t0.queue_pkts
    assert _agents_cap(fabric, "40", Progress()) == (fabric, "")  # no faster than its own


def test_a_rate_cap_bmv2_cannot_run_at_is_said_in_one_line():
    from experiments.dataplanes.bmv2_target import choose_rate
    from experiments.run.lifecycle import _slower_than_asked
    from topologies.model import load_topology, with_rate_cap

    fabric = load_topology("2tier-8plane")  # 8 hosts x 8 planes at 10 Mbit/s
    choice = choose_rate(fabric, 25.6, "what the switches forward here")  # 0.4 Mbit/s
    running = with_rate_cap(fabric, choice.rate_mbit)
    for asked in ("0.625", "off"):
        line = _slower_than_asked(asked, running, "bmv2", choice)
        assert line.startswith(f"RATE_CAP={asked}: BMv2 keeps up with no faster links "
                               "here, so they run at 0.4 Mbit/s (capped from the "
                               "topology's 10 Mbit/s")
    # A cap it honours, a calibrated one, or the kernel: nothing to say.
    for asked, plane_kind in (("0.2", "bmv2"), ("0.4", "bmv2"), ("calibrated", "bmv2"),
                              ("0.625", "kernel")):
        assert _slower_than_asked(asked, running, plane_kind, choice) == ""


def test_a_dead_runs_leftovers_go_before_a_calibration_builds_its_fabrics(
        tmp_path, monkeypatch):
    from experiments.run import lifecycle
    from topologies.model import load_topology

    order: list[str] = []
    monkeypatch.setattr(dataplane, "choose", lambda requested: ("kernel", "requested"))
    monkeypatch.setattr(lifecycle, "require_root", lambda what: None)
    monkeypatch.setenv("MRC_FABRIC_LOCK", str(tmp_path / "fabric.lock"))
    monkeypatch.setattr(lifecycle, "_take_over", lambda lock, progress: order.append("clean"))

    def cap(fabric, cap, progress, lock=None, active_hosts=None):
        order.append("calibrate")
        return fabric, ""

    monkeypatch.setattr(lifecycle, "_agents_cap", cap)
    run = lifecycle.Run.prepare("run", load_topology("2tier-2plane"), "kernel",
                                results=tmp_path / "results")
    run.lock.release()
    assert order == ["clean", "calibrate"]
