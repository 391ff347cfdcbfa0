"""`make cli` end to end, driven from a pty as a student would type: a message h0 -> h3
over mrc, a link failure, the message again (delivered around the failure), the path
states (the failed path is cut and its EVs retired), a bad command (one line, the CLI
goes on), Mininet's own commands, then exit or Ctrl-D: nothing may be left behind.
"""

from __future__ import annotations

import json
import re

from experiments.run.cleanup import find_leftovers
from tests.cli_session import DOWN_S, SEND_S, command, finish, pexpect, start_cli


def kernel_cli(tmp_path):
    return start_cli(tmp_path, "--dataplane", "kernel")


def test_send_fail_a_link_send_again_paths_exit(tmp_path):
    child = kernel_cli(tmp_path)
    try:
        out = command(child, "send h0 h3 200k mrc")
        assert re.search(r"h0 -> h3 over mrc: 200000 bytes delivered in [\d.]+ s "
                         r"\([\d.]+ Mbit/s\), verified, all acknowledged", out), out

        out = command(child, "link down p0t0r0 p0t1s0")
        assert "link-flap p0t0r0 p0t1s0 down: done" in out, out

        out = command(child, "send h0 h3 1M")
        assert re.search(r"1000000 bytes delivered in .*, verified, all acknowledged", out), out
        # Packets sprayed onto the dead path were lost, resent, and the path retired.
        retired = re.search(r"retransmitted (\d+), EVs retired (\d+)", out)
        assert retired and int(retired.group(1)) > 0 and int(retired.group(2)) > 0, out

        out = command(child, "paths h0 h3")
        lines = out.splitlines()
        assert "h0 -> h3: 4 paths; EV states of the mrc sender" in out, out
        dead = lines.index(next(x for x in lines if "h0 > p0t0r0 > p0t1s0 > p0t0r1 > h3" in x))
        assert "network: link p0t0r0-p0t1s0 down" in lines[dead + 1], out
        # Its EVs were retired and replaced by EVs of the same plane on the live spine.
        assert "EVs: none in use; out of rotation:" in lines[dead + 1], out
        assert "ASSUMED_BAD" in lines[dead + 1] and "GOOD" not in lines[dead + 1], out
        alive = lines.index(next(x for x in lines if "h0 > p0t0r0 > p0t1s1 > p0t0r1 > h3" in x))
        assert "no fault set" in lines[alive + 1] and "GOOD" in lines[alive + 1], out

        out = command(child, "send h0 h9")
        assert "error: send: destination: 'h9' is not a host of 2tier-2plane; fix:" in out, out
        out = command(child, "link up p0t1s0 p0t0r0")
        assert "link-flap p0t1s0 p0t0r0 up: done" in out, out

        # Mininet's own commands still work.
        assert "fcbb:bb00:8000::" in command(child, "h0 ip -6 addr show dev lo")
        assert "p0t1s1" in command(child, "nodes")
        out = command(child, "tables p0t0r0")
        assert "my uSID 0x1000" in out and "seg6local" in out, out
        out = command(child, "counters p0t1s0")
        assert "p0t1s0-eth0" in out and "p0t0r0" in out, out
        out = command(child, "help send")
        assert "Usage: send SRC DST [BYTES] [TRANSPORT]" in out, out
    except BaseException:
        child.terminate(force=False)
        raise
    finish(child, tmp_path, "exit")


def test_end_of_input_tears_down_and_a_failed_queue_pair_ends_its_send(tmp_path):
    child = kernel_cli(tmp_path)
    out = command(child, "send h1 h2 100k single-path")  # RoCE runs on the twin
    assert "single-path runs on the single-plane twin of 2tier-2plane" in out, out
    out = command(child, "send h1 h2 100k single-path@planes")
    assert "h1 -> h2 over single-path@planes: 100000 bytes delivered" in out, out
    # A queue pair that fails ends the wait for its message at once: a T1 that drops
    # everything with its links up, which routing never moves a queue pair off (a
    # link down is routed around within the retry budget).
    out = command(child, "send h0 h3 20M roce-8@planes &")
    assert "in the background" in out, out
    command(child, "switch blackhole p0t1s0")
    child.expect(r"20000000 bytes NOT delivered", timeout=SEND_S)
    child.expect(r"stopped waiting [\d.]+ s in: a queue pair of the message failed",
                 timeout=SEND_S)
    command(child, "switch restore p0t1s0")
    finish(child, tmp_path, "eof")


def test_exit_during_a_background_send_says_it_was_cut_short(tmp_path):
    child = kernel_cli(tmp_path)
    out = command(child, "send h1 h0 50M &")
    assert "in the background" in out, out
    child.sendline("exit")
    child.expect("torn down", timeout=DOWN_S)
    said = child.before.replace("\r\n", "\n")
    assert "the background send h1 -> h0 was cut short: the fabric is going down" in said, said
    assert "error" not in said, said
    child.expect(pexpect.EOF, timeout=DOWN_S)
    child.close()
    assert child.exitstatus == 0 and not find_leftovers()


def test_the_cli_lists_denies_and_probes_evs(tmp_path):
    child = kernel_cli(tmp_path)
    try:
        out = command(child, "send h0 h3 200k mrc")
        assert "delivered" in out, out
        out = command(child, "evs h0 h3")
        assert re.search(r"h0 -> h3: profile 0x3, ev_mode GEN, ev_count 16", out), out
        out = command(child, "ev deny h0 plane 1")
        assert "deny h0 plane 1 set: done" in out, out
        out = command(child, "paths h0 h3")
        assert "EVs denied by the controller (deny h0 plane 1)" in out, out
        before = command(child, "evs h0 h3")
        out = command(child, "send h0 h3 500k")
        assert "verified, all acknowledged" in out, out
        after = command(child, "evs h0 h3")

        def plane1_tx(text: str) -> list[int]:
            rows = [line.split() for line in text.splitlines() if line.strip().startswith("0x")]
            return sorted(int(r[-1]) for r in rows if r[1] == "2")

        assert plane1_tx(before) == plane1_tx(after), (before, after)
        assert all(" DENIED " in line for line in after.splitlines()
                   if line.strip().startswith("0x") and line.split()[1] == "2"), after
        out = command(child, "ev allow h0 plane 1")
        assert "deny h0 plane 1 lifted: done" in out, out
        out = command(child, "ev probe h0 h3")
        assert "h0 -> h3: EV probes on 4 paths, 4 answered" in out, out
        out = command(child, "ev events h0 GOOD ASSUMED_BAD")
        assert "are collected" in out, out
        out = command(child, "help ev")
        assert "ev deny|allow HOST [PEER] plane P [spine S]" in out, out
        out = command(child, "ev deny h0 plane 5")
        assert "error: ev deny: plane: '5' is not a plane of 2tier-2plane; fix:" in out, out
    except BaseException:
        child.terminate(force=False)
        raise
    finish(child, tmp_path, "exit")


def test_mininets_own_commands_reach_the_hosts_over_a_usid_path(tmp_path):
    """ping, ping6, pingall and iperf as in any Mininet network: each host's IPv4 and
    IPv6 address reached over plane 0's first path, encapsulated in SRv6, around a
    port flap, beside the agents' own traffic."""
    child = kernel_cli(tmp_path)
    try:
        out = command(child, "h0 ping -c 2 h1")
        assert "PING 10.0.0.2 " in out and "2 received, 0% packet loss" in out, out
        out = command(child, "h0 ping6 -c 2 h3")
        assert "PING fd00::8003" in out and "2 received, 0% packet loss" in out, out
        # A host's name is its address in its commands; h3 by plane 0, spine 0.
        out = command(child, "h0 ip route get h3")
        assert "10.0.0.4  encap seg6 mode encap segs 1 [ fcbb:bb00:1000:2000:1001:8003:: ]" \
            in out, out
        out = command(child, "pingall")
        assert "*** Results: 0% dropped (12/12 received)" in out, out
        assert "p0t0r0" not in out, out  # the switches are no hosts here
        out = command(child, "iperf h0 h1")
        assert re.search(r"\*\*\* Results: \['[\d.]+ [KM]bits/sec', '[\d.]+ [KM]bits/sec'\]",
                         out), out
        out = command(child, "iperfudp 2M h2 h0")
        assert re.search(r"\*\*\* Results: \['2M', '[\d.]+ [KM]bits/sec'", out), out

        # A port that comes back gets its routes back, as the host's own.
        assert "down: done" in command(child, "port down h0 0")
        assert "up: done" in command(child, "port up h0 0")
        out = command(child, "h0 ping -c 1 -W 2 h3")
        assert "1 received, 0% packet loss" in out, out
        out = command(child, "send h0 h3 200k")
        assert "200000 bytes delivered" in out and "verified" in out, out

        assert "h0-eth0:p0t0r0-eth0" in command(child, "net")
        assert "h0 h1 h2 h3 p0t0r0" in command(child, "nodes")
        assert "h0-eth0<->p0t0r0-eth0 (OK OK)" in command(child, "links")
        assert "<FabricHost h0: h0-eth0:10.0.0.1," in command(child, "dump")
        assert "\nUsage: pingall [timeout]" in command(child, "help pingall")
    except BaseException:
        child.terminate(force=False)
        raise
    finish(child, tmp_path, "exit")


def test_agents_started_after_a_link_down_are_told_it(tmp_path):
    """New agents (another transport) are told what the fabric's routing holds down,
    as a run's agents are told of the faults in place before its start (delay 0): the
    RoCE baseline's queue pairs leave the dead spine before their first packet."""
    child = kernel_cli(tmp_path)
    try:
        out = command(child, "link down p0t0r0 p0t1s0")
        assert "link-flap p0t0r0 p0t1s0 down: done" in out, out
        # Both hosts send, so that each one's routing knowledge is in use both ways
        # (data and acknowledgements).
        out = command(child, "send h3 h0 3M roce-8@planes &")
        assert "in the background" in out, out
        out = command(child, "send h0 h3 1M roce-8@planes")
        assert "h0 -> h3 over roce-8@planes: 1000000 bytes delivered" in out, out
        # The background report comes when its transfer ends: during the send above
        # (printed before its prompt) or after it.
        background = r"h3 -> h0 over roce-8@planes: 3000000 bytes (NOT )?delivered"
        report = re.search(background, out)
        if report is None:
            child.expect(background, timeout=SEND_S)
            report = child.match
        assert report.group(1) is None, out + child.before
    except BaseException:
        child.terminate(force=False)
        raise
    folder = finish(child, tmp_path, "exit")

    def events(host: int) -> list[dict]:
        path = folder / "agents" / f"events-roce-8@planes-h{host}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    # Each new agent heard of the link at once: h0 and h1 as their T0's uplink, h2 and
    # h3 as a path further on.
    for host, kind in ((0, "local-down"), (1, "local-down"), (2, "remote-down"),
                       (3, "remote-down")):
        routes = [e for e in events(host) if e["event"] == "route"]
        assert [(e["kind"], e["effective"] == e["t"]) for e in routes] == [(kind, True)], \
            (host, routes)
    # No packet of h0's waited for an answer on plane 0's dead spine (EV 0).
    sent = events(0)
    assert not [e for e in sent if e["event"] == "timeout" and e["ev"] == 0], sent
