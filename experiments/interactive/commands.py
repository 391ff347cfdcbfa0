"""The testbed's commands in Mininet's CLI: `FabricCLI`, each command a `do_<name>`
whose docstring is its `help <name>` text.

A command reads its arguments (parse.py, cli_ev.py for `evs` and `ev`) and runs them on
the session (session.py: sends, faults, paths) or on a switch (switches.py: tables,
counters); what it prints is one report, or one line for a mistake or a failure, and
the CLI goes on. Mininet's own commands come from `MininetCommands`
(mininet_commands.py), with the fabric's hosts as its hosts.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import threading
from pathlib import Path

from mininet.cli import CLI

from experiments.interactive import switches
from experiments.interactive.cli_ev import EvCommands, parse_ev, parse_evs
from experiments.interactive.mininet_commands import MininetCommands
from experiments.interactive.parse import (
    CommandError,
    SendRequest,
    one_switch,
    parse_link,
    parse_paths,
    parse_port,
    parse_send,
    parse_switch,
)
from experiments.interactive.session import FabricSession
from experiments.run.lifecycle import ctrl_c_held
from topologies.errors import UserError

REPO = Path(__file__).resolve().parents[2]
TESTBED_HELP = ("Testbed commands: send, link, switch, port, paths, evs, ev, tables, "
                "counters, p4shell; `help <command>` explains one. Mininet's own (h0 ping h1, "
                "pingall, iperf h0 h1) reach each host over plane 0 (docs/cli.md). exit or "
                "Ctrl-D tears the fabric down.")


class FabricCLI(MininetCommands):
    """Mininet's CLI with the testbed's commands. Each `do_<name>` docstring is its
    `help <name>` text."""

    def __init__(self, session: FabricSession, **kwargs):
        self.session = session
        self.fabric = session.fabric
        super().__init__(session.net, **kwargs)

    def do_help(self, line: str) -> None:
        """List the commands, or explain one: help send"""
        method = getattr(self, f"do_{line.strip()}", None)
        # The testbed's commands and its versions of Mininet's: their docstrings, cleaned.
        if method is not None and method.__func__ is not getattr(CLI, method.__name__, None):
            self.say(inspect.cleandoc(method.__doc__))
            return
        super().do_help(line)
        if not line:
            self.say(TESTBED_HELP)

    def say(self, lines: list[str] | str) -> None:
        for line in [lines] if isinstance(lines, str) else lines:
            print(line, flush=True)

    def _run(self, work) -> None:
        """Run one command; a mistake or a failure is one line and the CLI goes on."""
        try:
            self.say(work())
        except UserError as err:
            self.say(f"error: {err}")
        except Exception as err:  # noqa: BLE001 - one line, the fabric stays up for the next
            self.say(f"error: {err.__class__.__name__}: {err}")

    def _background(self, reqs: tuple[SendRequest, ...], what: str) -> None:
        """A background send (`send ... &`): its report, or one line on failure. Cut
        short by the fabric's teardown (exit while it runs), it says so, not why its
        agents went away."""

        def work() -> str:
            try:
                return self.session.send(reqs)
            except Exception:
                if self.session.closing:
                    return f"the background send {what} was cut short: the fabric is going down"
                raise

        self._run(work)

    def do_send(self, line: str) -> None:
        """Send one message through the agents and print what happened.
        Usage: send SRC DST [BYTES] [TRANSPORT] [&]    e.g. send h0 h3 1M mrc
        Several sources, comma separated, start together towards DST, a message each:
        an incast (send h1,h2,h3 h0 2M fills h0's last hops and trims).
        With & at the end the transfer goes on in the background and prints its report
        when done, so that `link down`, `port down` or `paths` can be typed during it
        (one background send at a time).
        BYTES: 1500, 64k, 1M (default 1M = 1000000). TRANSPORT: mrc (default),
        mrc-no-trim, mrc-no-probe, and the RoCE baseline: roce, roce-8, roce-16 (and -pfc
        without DCQCN) on a single-plane fabric (make cli TWIN=1), with @planes on a
        multi-plane one (roce-8@planes). A new transport restarts the agents.
        Prints delivery, verification, time and the sender's counters during the
        transfer: retransmissions, EVs retired and reinstated, probes, timeouts..."""
        session = self.session
        args = line.replace("&", " & ").split()
        if args[-1:] != ["&"]:
            self._run(lambda: session.send(parse_send(self.fabric, args, session.transports)))
            return

        def start() -> str:
            if session.background is not None and session.background.is_alive():
                raise CommandError("send", "&", "a background send is still running",
                                   "wait for its report (one at a time)")
            reqs = parse_send(self.fabric, args[:-1], session.transports)
            session.agents_for(reqs[0].transport)  # a transport change fails here, not later
            session.background = threading.Thread(
                target=self._background, args=(reqs, f"{args[0]} -> {args[1]}"), daemon=True)
            session.background.start()
            return (f"sending {reqs[0].size} bytes {args[0]} -> {args[1]} over "
                    f"{reqs[0].transport} in the background; its report comes when it is "
                    "done")

        self._run(start)

    def do_link(self, line: str) -> None:
        """Fail or restore a link (both ends at once, as a cut cable).
        Usage: link down|up A B    e.g. link down p0t0r0 p0t1s0
        Mininet's order works too: link p0t0r0 p0t1s0 down"""
        self._run(lambda: self.session.fault(parse_link(self.fabric, line.split())))

    def do_switch(self, line: str) -> None:
        """Reboot or blackhole a switch.
        Usage: switch down|up|blackhole|restore S    e.g. switch down p0t1s0
        down: the switch loses power (ports dark, tables gone); up: it boots and gets
        the same static tables again. blackhole: it silently drops everything, links
        stay up; restore: it forwards again."""
        self._run(lambda: self.session.fault(parse_switch(self.fabric, line.split())))

    def do_port(self, line: str) -> None:
        """Take a host's NIC port of one plane down or up (the agent sees carrier loss).
        Usage: port down|up HOST PLANE    e.g. port down h0 1"""
        self._run(lambda: self.session.fault(parse_port(self.fabric, line.split())))

    def do_evs(self, line: str) -> None:
        """A host's EV profiles, through the control API (OCP MRC's query_ev_profile):
        per connection its mode (GEN, or EXP for an explicit array), ev_count,
        ev_min_active and event mask, then every EV: its port (plane + 1), the T1 of its
        path, its state (GOOD, ASSUMED_BAD, DENIED), whether it is in use, when it last
        carried a packet, and the packets its path has carried.
        Usage: evs HOST [PEER]    e.g. evs h0 h3"""
        self._run(lambda: EvCommands(self.session).evs(*parse_evs(self.fabric, line.split())))

    def do_ev(self, line: str) -> None:
        """The control API as a fabric controller uses it (hosts/mrc_ctl.py, named as
        OCP MRC's mrc_ctl.h names it). An EV names a path: its state is its path's.
          ev deny|allow HOST [PEER] plane P [spine S]
              a controller's denylist (the scenarios' `deny` kind): every EV of plane P
              (through T1 S only, if given) of HOST's connections, toward every peer
              (those it opens later too) or toward PEER, DENIED, or GOOD again
              e.g. ev deny h2 plane 1; ev allow h2 plane 1
          ev deny|allow HOST PEER EV       one EV (its path) of one connection
          ev replace HOST PEER OLD NEW     REPLACE_EV: NEW (same plane) takes OLD's place
          ev explicit HOST PEER EV [EV...] an explicit EV array (ev_mode EXP): the
                                           connection sprays over these alone
          ev probe HOST PEER [plane P [spine S]]
              EV probes (ep_batch_send_wait) on each path, each one's round trip
          ev events HOST [PEER] [GOOD] [ASSUMED_BAD] | off
              the EV event mask; `ev events HOST [PEER]` then shows the events received
              (state changes, with the reason: timeout, gap, probes, operator...)
        EV values as `evs` shows them (0x01000005: plane 1 in the top byte)."""
        self._run(lambda: EvCommands(self.session).ev(parse_ev(self.fabric, line.split())))

    def do_paths(self, line: str) -> None:
        """A host's paths to a peer (or to every other host): the switches on each
        path, its uSID address, the faults of this session that cut it, and the state
        of the sender's EVs on it (GOOD, SKIP, ASSUMED_BAD, DENIED).
        Usage: paths HOST [PEER]    e.g. paths h0 h3"""
        self._run(lambda: self.session.paths(*parse_paths(self.fabric, line.split())))

    def do_tables(self, line: str) -> None:
        """A switch's tables as the data plane holds them: on BMv2, the P4 table
        entries read over P4Runtime; on the kernel, the static tables and the routes
        and neighbours installed in the switch's namespace.
        Usage: tables S    e.g. tables p0t0r0"""
        session = self.session
        self._run(lambda: switches.tables(session.net, self.fabric, session.target,
                                          one_switch(self.fabric, line.split(), "tables")))

    def do_counters(self, line: str) -> None:
        """A switch's per-port counters, as the data plane counts them (forwarded,
        dropped, unroutable on BMv2 by the port it came in on, ECN-marked, trimmed
        under SONiC's names TRIM_PKTS, TX_TRIM_PKTS and DROPPED_TRIM_PKTS, PFC
        pauses); `trim` shows SONiC's `show interfaces counters trim` alone.
        Usage: counters S [trim]    e.g. counters p0t1s0 trim"""
        args = line.split()
        trim_only = args[-1:] == ["trim"]
        if trim_only:
            args = args[:-1]
        session = self.session
        self._run(lambda: switches.counters(session.network,
                                            one_switch(self.fabric, args, "counters"),
                                            trim_only))

    def do_p4shell(self, line: str) -> None:
        """Open p4runtime-shell on a BMv2 switch, read-only, or writing by hand with
        `write` (exit returns here; Ctrl-C stays in the shell).
        Usage: p4shell S [write]    e.g. p4shell p0t0r0
        Try: table_entry["MrcIngress.my_usid"].read(lambda e: print(e))"""
        args = line.split()
        write = args[-1:] == ["write"]
        try:
            switch = one_switch(self.fabric, args[:-1] if write else args, "p4shell")
            if self.session.target.name != "bmv2":
                raise CommandError("p4shell", "data plane",
                                   f"this fabric runs on {self.session.target.name}",
                                   "start the CLI with --dataplane bmv2 (make cli "
                                   "DATAPLANE=bmv2)")
        except UserError as err:
            self.say(f"error: {err}")
            return
        # Ctrl-C reaches the whole terminal's process group: the shell takes it (and
        # stays), the CLI must not (it would end the shell with it).
        with ctrl_c_held():
            subprocess.call([sys.executable, "-m", "experiments.interactive.p4shell",
                             "--switch", switch]
                            + (["--write"] if write else []), cwd=REPO)
