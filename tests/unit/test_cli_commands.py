"""The interactive fabric's commands without a network: parsing, fault bookkeeping, reports.

What `make cli` does with a parsed command runs on Mininet (tests/integration/
test_cli.py); here every argument mistake must be one line naming the argument and the
fix, and each command must become the same fault step a scenario would use.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from experiments.interactive.parse import (
    CommandError,
    SendRequest,
    parse_link,
    parse_port,
    parse_send,
    parse_size,
    parse_switch,
)
from experiments.interactive.reports import ev_summary, path_faults, send_report
from experiments.interactive.session import FabricSession
from experiments.run.agents import AgentError
from hosts.protocol import TRANSPORTS
from tests.steps import step
from topologies.paths import catalogue, path_nodes


def one_line_error(call, *args) -> str:
    with pytest.raises(CommandError) as err:
        call(*args)
    text = str(err.value)
    assert "\n" not in text and "; fix: " in text
    return text


def test_send_defaults_sizes_and_transports(fabric):
    assert parse_send(fabric, ["h0", "h3"], TRANSPORTS) == (SendRequest(0, 3, 1_000_000, "mrc"),)
    assert parse_send(fabric, ["h1", "h2", "64k", "single-path"], TRANSPORTS) == \
        (SendRequest(1, 2, 64_000, "single-path"),)
    assert parse_send(fabric, ["h1", "h2", "mrc-no-trim", "1500"], TRANSPORTS) == \
        (SendRequest(1, 2, 1500, "mrc-no-trim"),)
    assert parse_size("2M") == 2_000_000


def test_several_sources_are_an_incast_a_message_each(fabric):
    assert parse_send(fabric, ["h1,h2,h3", "h0", "2M"], TRANSPORTS) == tuple(
        SendRequest(src, 0, 2_000_000, "mrc") for src in (1, 2, 3))


@pytest.mark.parametrize("args, names", [
    (["h0"], "send: arguments"),
    (["h0", "h9"], "send: destination: 'h9' is not a host"),
    (["h0", "h0"], "send: destination: is the source itself"),
    (["h1,h0", "h0"], "send: destination: is the source itself"),
    (["h1,h1", "h0"], "send: source: 'h1,h1' names a host twice"),
    (["h1,h7", "h0"], "send: source: 'h7' is not a host"),
    (["h0", "h3", "tcp"], "send: transport: 'tcp' is not a transport"),
    (["h0", "h3", "0"], "send: bytes"),
    (["h0", "h3", "12q"], "send: bytes"),
    (["h0", "h3", "300M"], "send: bytes: 300000000 is more than a message may hold"),
])
def test_send_mistakes_are_one_line(fabric, args, names):
    assert one_line_error(parse_send, fabric, args, TRANSPORTS).startswith(names)


def test_on_a_multi_plane_fabric_roce_is_sent_with_at_planes(fabric):
    from experiments.dataplanes.twin import fabric_of

    here = tuple(t for t in TRANSPORTS if fabric_of(t, fabric) is fabric)
    assert "roce-8@planes" in here and "roce-8" not in here and "mrc" in here
    (req,) = parse_send(fabric, ["h0", "h3", "roce-8@planes"], here)
    assert req.transport == "roce-8@planes"
    assert one_line_error(parse_send, fabric, ["h0", "h3", "roce-8"], here).startswith(
        "send: transport: roce-8 runs on the single-plane twin of 2tier-2plane, not on this "
        "fabric; fix: use roce-8@planes here, or start the CLI on the twin (make cli TWIN=1)")


def test_link_in_both_orders_is_the_scenarios_link_flap(fabric):
    down = parse_link(fabric, ["down", "p0t0r0", "p0t1s0"])
    assert down == step(0.0, False, "link-flap", ("p0t0r0", "p0t1s0"))
    assert down.kind == "link-flap" and down.target == ("p0t0r0", "p0t1s0")
    mininet_order = parse_link(fabric, ["p0t1s0", "p0t0r0", "up"])
    assert mininet_order.up and mininet_order.fault.key() == down.fault.key()
    assert "are not linked" in one_line_error(parse_link, fabric, ["down", "h0", "h3"])
    assert "state" in one_line_error(parse_link, fabric, ["off", "p0t0r0", "p0t1s0"])


def test_switch_and_port_faults(fabric):
    assert parse_switch(fabric, ["down", "p1t1s0"]) == step(0.0, False, "switch-reboot",
                                                              ("p1t1s0",))
    reboot = parse_switch(fabric, ["p1t1s0", "start"])  # Mininet's order
    assert (reboot.kind, reboot.up) == ("switch-reboot", True)
    blackhole = parse_switch(fabric, ["blackhole", "p0t1s1"])
    assert (blackhole.kind, blackhole.up) == ("blackhole", False)
    assert parse_switch(fabric, ["restore", "p0t1s1"]).up
    assert "not a switch" in one_line_error(parse_switch, fabric, ["down", "h0"])
    port = parse_port(fabric, ["down", "h2", "1"])
    assert (port.kind, port.target, port.up) == ("nic-port-down", ("h2", 1), False)
    assert "port: plane" in one_line_error(parse_port, fabric, ["down", "h2", "2"])


def test_a_fault_cuts_exactly_the_paths_through_it(fabric):
    faults = {a.fault.key(): a.fault for a in (
        parse_link(fabric, ["down", "p0t1s0", "p0t0r0"]),
        parse_port(fabric, ["down", "h3", "1"]))}
    cuts = {}
    for path in catalogue(fabric, 0, 3):
        nodes = path_nodes(fabric, path.usids, "h0")
        assert nodes[0] == "h0" and nodes[-1] == "h3"
        cuts[(path.plane, path.spine)] = path_faults(nodes, path.plane, faults)
    assert cuts[(0, 0)] == ["link p0t0r0-p0t1s0 down"]
    assert cuts[(0, 1)] == []
    assert cuts[(1, 0)] == cuts[(1, 1)] == ["port h3 plane 1 down"]


def test_ev_summary_counts_states_in_and_out_of_rotation():
    evs = [{"state": "GOOD", "active": True}, {"state": "SKIP", "active": True},
           {"state": "GOOD", "active": True}, {"state": "ASSUMED_BAD", "active": False}]
    assert ev_summary(evs) == "2 GOOD, 1 SKIP; out of rotation: 1 ASSUMED_BAD"
    assert ev_summary(evs[3:]) == "none in use; out of rotation: 1 ASSUMED_BAD"
    assert ev_summary([]) == "none in use"


def test_send_report_says_what_happened(fabric):
    req = SendRequest(0, 3, 1_000_000, "mrc")
    before = {"data_tx": 10, "retransmits": 1, "retired": 0}
    after = {"data_tx": 850, "retransmits": 4, "retired": 1}
    lines = send_report(req, fabric, 0.5, 0.51, True, before, after)
    assert lines[0] == ("h0 -> h3 over mrc: 1000000 bytes delivered in 0.500 s (16.0 Mbit/s), "
                        "verified, all acknowledged after 0.510 s")
    assert lines[1] == "  sender h0: packets sent 840, retransmitted 3, EVs retired 1"
    lost = send_report(req, fabric, None, None, None, before, after)
    assert lost[0].endswith("NOT delivered")


def test_send_report_says_a_queue_pair_failed(fabric):
    req = SendRequest(0, 3, 1_000_000, "roce-8")
    lines = send_report(req, fabric, None, None, None, {"qp_errors": 1}, {"qp_errors": 4})
    assert lines[-1] == ("  3 queue pair(s) went to the error state (a packet timed out past "
                         "the retry count): a training job would abort here")
    assert not any("error state" in line for line in
                   send_report(req, fabric, None, None, None, {"qp_errors": 1},
                               {"qp_errors": 1}))


def test_leaving_waits_for_the_background_send_and_starts_no_agents(fabric, tmp_path):
    """`exit` during `send ... &`: the background send's report comes before the
    teardown, and a background send that reaches its agents only after they were
    stopped gets an error, not new agents on a fabric going down."""
    network = SimpleNamespace(net=None, fabric=fabric, target=None)
    session = FabricSession(network, tmp_path, TRANSPORTS)
    reported = []

    def background() -> None:
        time.sleep(0.2)
        with pytest.raises(AgentError, match="going down"):
            session.agents_for("mrc")
        reported.append("cut short")

    session.background = threading.Thread(target=background)
    session.background.start()
    session.close()
    assert session.closing and reported == ["cut short"]
