"""`make paper`: the MRC paper's section-5 experiments, in shape, with one command.

`python3 -m experiments.paper [--topo 2tier-8plane] [--dataplane kernel] [--only a,b]`
builds one network, plays every row of experiments/paper_rows.py on it (each row's
scenario, then the pass it is measured against, shared between rows that need the
same one), judges each row (experiments/paper_judge.py) and writes
`results/<stamp>-<topology>-paper/`:

- `paper.md`: one line per row with the paper's claim and section, the criterion,
  the measured figures, the verdict (PASS, FAIL, or NOT RUN where the data plane
  lacks what the row needs, saying what), then per row what differs from the paper
  and a plot;
- `paper.json`: the same, with every figure and each pass's summary blocks;
- `<row>.png` (goodput over time of the row's pass, faults marked) and the agents'
  files per row and per reference pass.

Before the network is built, every row's scenario is checked against the topology
like a scenario file (one line and exit 2 on a mistake), and the links are capped at
a rate the machine's cores drive without the agents' CPU being the bottleneck
(`AGENT_MBIT_PER_CORE`): MRC's timers must measure the network, not a CPU stall. The
run exits 0 when every row got a verdict, FAIL included: a FAIL is a finding, its
row says why; 1 when a row could not be run for another reason (its error is in the
row), 2 on a usage error, 130 on Ctrl-C. Everything is torn down in every case.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from datetime import datetime
from pathlib import Path

from experiments import ebpf_switch
from experiments.bringup import bring_up
from experiments.cleanup import cleanup
from experiments.dataplane import choose
from experiments.paper_judge import JUDGES, Measured
from experiments.paper_rows import Row, rows
from experiments.play import Pass, play_pass
from experiments.plots import goodput_plot
from experiments.runner import (
    Interrupted,
    Progress,
    ctrl_c_held,
    raise_interrupted,
    results_folder,
    tear_down_all,
)
from experiments.scenario import Scenario, check_scenario, scale_note, scaled
from topologies.errors import UserError
from topologies.model import Fabric, load_topology, with_rate_cap

PAPER = ('"Resilient AI Supercomputer Networking using MRC and SRv6" (OpenAI, Microsoft, '
         'AMD, Broadcom, NVIDIA; 2026), section 5')
# Python agents move about this much traffic per CPU core (sent and received, all hosts,
# with the fabric's forwarding on the same cores) before their timers start to measure
# CPU stalls instead of queues (2tier-8plane, two cores: 10 Mbit/s links gave spurious
# retirements, 2.5 Mbit/s none).
AGENT_MBIT_PER_CORE = 80.0
# The data-plane features a row may need, from Network.link_emulation().
FEATURES = ("faults", "trimming", "ecn")
USAGE_ERROR, INTERRUPTED = 2, 130


def cpu_fair_rate(fabric: Fabric, cores: int) -> float:
    """The per-link rate at which every host sending at line rate on every plane asks
    the agents for no more than AGENT_MBIT_PER_CORE per core."""
    return round(AGENT_MBIT_PER_CORE * cores / (len(fabric.hosts) * fabric.spec.planes), 3)


def checked_rows(fabric: Fabric, only: set[str] | None, data_scale: float = 1.0
                 ) -> list[tuple[Row, Scenario, Scenario | None]]:
    """Every row with its scenario and its reference, checked against `fabric`, their
    transfers at `data_scale` of their sizes (experiments/scenario.py `scaled`)."""
    table = rows(fabric, (lambda key: key in only) if only else (lambda key: True))
    if only and len(table) != len(only):
        known = [r.key for r in rows(fabric)]
        unknown = sorted(only - set(known))
        raise UserError("--only", unknown[0], "is not a row of the paper suite",
                        f"use some of: {', '.join(known)}")
    out = []
    for row in table:
        source = f"paper row {row.key}"
        scenario = check_scenario({"name": row.key, **row.scenario}, source, fabric)
        if row.reference == "fault-free":
            reference = check_scenario({"name": f"{row.key}-reference",
                                        **{k: v for k, v in row.scenario.items()
                                           if k != "faults"}}, source, fabric)
        elif row.reference is None:
            reference = None
        else:
            reference = check_scenario({"name": f"{row.key}-reference", **row.reference},
                                       source, fabric)
        out.append((row, scaled(scenario, data_scale),
                    None if reference is None else scaled(reference, data_scale)))
    return out


def _pass_key(scenario: Scenario) -> str:
    """Rows whose references play the same thing share one pass."""
    return json.dumps([scenario.workload, scenario.params, scenario.transports,
                       scenario.protocol, [a.describe() for a in scenario.faults]],
                      sort_keys=True, default=str)


def run_rows(net, fabric: Fabric, target, table, folder: Path, features: dict,
             progress) -> list[dict]:
    """Play and judge every row; a row that fails to run gets ERROR and the rest go on."""
    references: dict[str, Pass] = {}
    results = []
    for number, (row, scenario, reference) in enumerate(table, 1):
        progress(f"[{number}/{len(table)}] {row.key}: {row.claim}")
        entry = {"key": row.key, "section": row.section, "claim": row.claim,
                 "criterion": row.criterion, "differs": row.differs,
                 "scenario": row.scenario, "reference": row.reference}
        missing = [f for f in row.needs if not features.get(f)]
        if missing:
            entry.update(verdict="NOT RUN", measured=f"not on this data plane: it has no "
                         f"{' and no '.join(missing)} (link_emulation in paper.json)")
            progress(f"  {row.key}: {entry['measured']}")
            results.append(entry)
            continue
        started = time.monotonic()
        try:
            faulty = play_pass(net, fabric, target, scenario.transports, scenario.plan,
                               scenario.faults, folder / row.key, scenario.timeout_s,
                               scenario.protocol, progress, label=row.key)
            against = None
            if reference is not None:
                key = _pass_key(reference)
                if key not in references:
                    references[key] = play_pass(
                        net, fabric, target, reference.transports, reference.plan,
                        reference.faults, folder / f"reference-{len(references) + 1}",
                        reference.timeout_s, reference.protocol, progress,
                        label=f"{row.key} reference")
                against = references[key]
            if not scenario.faults:  # a later row may be measured against this pass
                references.setdefault(_pass_key(scenario), faulty)
            times = [(a.t, a.up) for a in scenario.faults]
            verdict = JUDGES[row.judge](Measured(row, fabric, faulty, against, times,
                                                 scenario.faults))
            goodput_plot(folder / f"{row.key}.png", faulty.runs, faulty.events)
            entry.update(verdict="PASS" if verdict.passed else "FAIL",
                         measured=verdict.measured, figures=verdict.figures,
                         plot=f"{row.key}.png", blocks=faulty.blocks,
                         reference_blocks=against.blocks if against else None)
        except (KeyboardInterrupt, Interrupted):
            raise
        except Exception as err:  # noqa: BLE001 - one row's failure is reported in its row
            entry.update(verdict="ERROR", measured=f"{err.__class__.__name__}: {err}")
        entry["duration_s"] = round(time.monotonic() - started, 1)
        progress(f"  {row.key}: {entry['verdict']}: {entry['measured']}")
        results.append(entry)
    return results


def write_paper(folder: Path, meta: dict, results: list[dict]) -> None:
    (folder / "paper.json").write_text(json.dumps({**meta, "rows": results}, indent=2,
                                                  default=str) + "\n")
    counts = {v: sum(r["verdict"] == v for r in results)
              for v in ("PASS", "FAIL", "NOT RUN", "ERROR")}
    lines = [
        f"# The MRC paper's experiments on {meta['topology']} ({meta['dataplane']})", "",
        f"Paper: {PAPER}. Each row runs the experiment in shape on this testbed and judges "
        "it by the criterion in the row; a FAIL is read against what differs from the "
        "paper (below the table).", "",
        f"Run: {meta['started_at']}, {meta['duration_s']:.0f} s on {meta['cores']} cores; "
        f"links at {meta['link_rate_mbit']:g} Mbit/s ({meta['link_rate_reason']}); "
        f"{meta['hosts']} hosts, {meta['planes']} planes, {meta['t1_per_plane']} T1 per "
        f"plane. Emulated here: ECN {meta['link_emulation'].get('ecn') or 'no'}, trimming "
        f"{meta['link_emulation'].get('trimming') or 'no'}, loss faults "
        f"{meta['link_emulation'].get('faults') or 'no'}.", "",
        "Verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n) + ".", "",
        "| experiment (section) | the paper's claim | criterion | measured | verdict |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r['key']} ({r['section']}) | {r['claim']} | {r['criterion']} | "
                     f"{r['measured']} | **{r['verdict']}** |")
    lines.append("")
    for r in results:
        lines += [f"## {r['key']}: {r['verdict']}", "", f"Differs from the paper: "
                  f"{r['differs']}", "", f"Measured: {r['measured']}", ""]
        if r.get("plot"):
            lines += [f"![{r['key']}]({r['plot']})", ""]
    for note in meta["link_emulation"].get("notes", []):
        lines.append(f"Note: {note}.")
    (folder / "paper.md").write_text("\n".join(lines) + "\n")


def run_paper(fabric: Fabric, target, reason: str, table, results_root: Path,
              rate_reason: str, progress) -> tuple[int, Path]:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, raise_interrupted)
    found = cleanup()
    if found:
        progress(f"removed leftovers of an earlier run: {found.describe()}")
    folder = results_folder(results_root, fabric, "paper")
    spec = fabric.spec
    meta = {"paper": PAPER, "topology": fabric.name, "dataplane": target.name,
            "dataplane_reason": reason, "hosts": len(fabric.hosts), "planes": spec.planes,
            "t1_per_plane": spec.t1_per_plane, "cores": os.cpu_count(),
            "link_rate_mbit": spec.host_t0.rate_mbit, "link_rate_reason": rate_reason,
            "started_at": datetime.now().isoformat(timespec="seconds"),
            "link_emulation": {}}
    status, net, results = 1, None, []
    try:
        progress(f"building {fabric.name} on {target.name}: {len(fabric.hosts)} hosts, "
                 f"{len(fabric.switches)} switches, links at {spec.host_t0.rate_mbit:g} Mbit/s")
        network = bring_up(fabric, target, progress)
        net = network.net
        meta["link_emulation"] = network.link_emulation()
        meta.update(target.summary_fields())
        if network.ebpf.available:
            ebpf_switch.prepare_faults(net, fabric,
                                       tuple(a for _, s, _ in table for a in s.faults))
        features = {name: meta["link_emulation"].get(name) for name in FEATURES}
        results = run_rows(net, fabric, target, table, folder, features, progress)
        status = 1 if any(r["verdict"] == "ERROR" for r in results) else 0
    except (KeyboardInterrupt, Interrupted) as stop:
        progress(f"interrupted ({stop or 'Ctrl-C'}): tearing down")
        status = INTERRUPTED
    except Exception as err:  # noqa: BLE001 - one line (e.g. a failed bring-up), still torn down
        progress(f"error: {err.__class__.__name__}: {err}")
        meta["error"] = f"{err.__class__.__name__}: {err}"
        status = 1
    finally:
        with ctrl_c_held():
            tear_down_all(net, progress)
        meta["duration_s"] = round(time.monotonic() - progress.start, 1)
        write_paper(folder, meta, results)
    return status, folder


def main(argv: list[str] | None = None) -> int:
    from experiments.__main__ import TargetError, prepare, results_root

    parser = argparse.ArgumentParser(prog="python3 -m experiments.paper",
                                     description="The MRC paper's section-5 experiments.")
    parser.add_argument("--topo", default="2tier-8plane", help="topology name or YAML path")
    parser.add_argument("--dataplane", default="kernel", help="kernel, bmv2 or auto")
    parser.add_argument("--only", default="", help="comma-separated row keys (default: all)")
    parser.add_argument("--results", default="results", help="folder for results")
    args = parser.parse_args(argv)
    progress = Progress()
    try:
        fabric = load_topology(args.topo)
        only = {k.strip() for k in args.only.split(",") if k.strip()} or None
        cores = os.cpu_count() or 1
        fair = cpu_fair_rate(fabric, cores)
        capped = with_rate_cap(fabric, fair)
        rate_reason = (f"capped from {fabric.spec.host_t0.rate_mbit:g} so that {cores} cores "
                       f"drive every host at line rate" if capped is not fabric
                       else "the topology's rate")
        table = checked_rows(capped, only)
        dataplane, reason = choose(args.dataplane)
        target, lock = prepare(dataplane)
        try:
            results = results_root(args.results)
            fabric = target.fabric_for(capped)  # BMv2: no faster than its CPU keeps up
            if fabric is not capped:
                rate_reason = ("capped so that the BMv2 switches' CPU keeps up; "
                               + scale_note(target.data_scale()))
                table = checked_rows(fabric, only, target.data_scale())
        except UserError:
            lock.release()
            raise
    except (UserError, PermissionError, TargetError) as err:
        print(f"error: {err}", file=sys.stderr)
        return USAGE_ERROR
    try:
        progress(f"{len(table)} experiments of the MRC paper on {fabric.name} "
                 f"({dataplane}: {reason})")
        status, folder = run_paper(fabric, target, reason, table, results, rate_reason,
                                   progress)
    finally:
        lock.release()
    print(f"paper: {folder / 'paper.md'}")
    print(f"results: {folder}")
    return status


if __name__ == "__main__":
    sys.exit(main())
