"""`make paper`: the MRC paper's section-5 experiments, in shape, with one command.

`python3 -m experiments.paper [--topo 2tier-8plane] [--dataplane kernel] [--only a,b]
[--shapes default|one|paper] [--loaded]` plays every row of experiments/paper/rows.py
(each row's scenario, then the pass it is measured against, shared between rows that
need the same one), judges each row (experiments/paper/judge.py) and writes, per fabric,
`results/<stamp>-<topology>-paper/`:

- `paper.md`: one line per row with the paper's claim and section, the criterion,
  the measured figures, the verdict (PASS, FAIL, INCONCLUSIVE with the reason, or NOT
  RUN where the data plane lacks what the row needs, saying what), the loaded-fabric
  variants in a table of their own, then per row what differs from the paper and a
  plot in the paper's form;
- `paper.json`: the same, with every figure and each pass's summary blocks;
- `<row>.png` (throughput in windows against time with the faults marked, EV activity,
  per-flow throughput, as the row's figure in the paper) and the agents' files per row
  and per reference pass.

Where the rows run (`plan`): by default the rows of the paper's clusters A and B (the
fault experiments: one NIC pair on a wide fabric) on their fabric (rows.py SHAPES,
cluster-b), with the links capped for the hosts those rows have sending at once, and
every other row on `--topo`; `--shapes one` plays every row on `--topo`, `--shapes
paper` each on its cluster's shape. The loaded-fabric variants (`-loaded`) play on
`--topo` with `--loaded`, or when `--only` names them. With more than one fabric,
`paper-shapes.md` in the first one's folder has every fabric's table.

Before a network is built, every row's scenario is checked against the topology
like a scenario file (one line and exit 2 on a mistake), and the links are capped at
the rate the machine's agents drive without falling behind (experiments/run/calibration.py,
measured first where it is not yet): MRC's timers must measure the network, not a CPU
stall. Each row is played REPETITIONS times and judged on them together (`combine`);
a row whose deciding proportions fall outside the paper's regime is INCONCLUSIVE
(experiments/analysis/similarity.py). The
run exits 0 when every row got a verdict, FAIL included: a FAIL is a finding, its
row says why; 1 when a row could not be run for another reason (its error is in the
row), 2 on a usage error, 130 on Ctrl-C. Everything is torn down in every case.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from experiments.analysis.plots import (
    ev_activity_plot,
    ev_paths_plot,
    flows_plot,
    goodput_plot,
    queue_plot,
    size_curves_plot,
    windows_plot,
)
from experiments.analysis.similarity import agents_lag_p99_ms, delay_emulated, headline, proportions
from experiments.dataplanes.twin import by_fabric, twin_steps
from experiments.paper.judge import DECIDING, Measured, judge
from experiments.paper.rows import (
    DEFAULT_TOPO,
    SHAPES,
    WIDE,
    Row,
    criteria_table,
    loaded_table,
    rows,
)
from experiments.run.lifecycle import PREFLIGHT_ERRORS, USAGE_ERROR, Interrupted, Run
from experiments.run.play import Pass, play_pass
from experiments.scenarios.scenario import (
    NotApplicable,
    Scenario,
    check_scenario,
    scale_note,
    scaled,
)
from topologies.errors import UserError
from topologies.model import Fabric, load_topology

PAPER = ('"Resilient AI Supercomputer Networking using MRC and SRv6" (OpenAI, Microsoft, '
         'AMD, Broadcom, NVIDIA; 2026), section 5')
# Each row is played this many times; its verdict is theirs together (`combine`).
REPETITIONS = 3
# The data-plane features a row may need, from RunningFabric.link_emulation().
FEATURES = ("faults", "trimming", "ecn", "queue_sampling")


@dataclass(frozen=True)
class CheckedRow:
    """A row with its scenario and the one it is measured against, checked against the
    fabric; or, where the row means nothing on the fabric, why (`not_applicable`)."""

    row: Row
    scenario: Scenario | None
    reference: Scenario | None = None
    not_applicable: str | None = None


def checked_rows(fabric: Fabric, only: set[str] | None, data_scale: float = 1.0
                 ) -> list[CheckedRow]:
    """Every row with its scenario and its reference, checked against `fabric`, their
    transfers at `data_scale` of their sizes (experiments/scenarios/scenario.py `scaled`)
    but for the rows timed in windows."""
    table = rows(fabric, (lambda key: key in only) if only else (lambda key: True))
    if only and len(table) != len(only):
        known = [r.key for r in rows(fabric)]
        unknown = sorted(only - set(known))
        raise UserError("--only", unknown[0], "is not a row of the paper suite",
                        f"use some of: {', '.join(known)}")
    out = []
    for row in table:
        source = f"paper row {row.key}"
        try:
            scenario = check_scenario({"name": row.key, **row.scenario}, source, fabric)
        except NotApplicable as err:
            out.append(CheckedRow(row, None, None, err.problem))
            continue
        if row.reference == "fault-free":
            reference = check_scenario({"name": f"{row.key}-reference",
                                        **{k: v for k, v in row.scenario.items()
                                           if k != "faults"}}, source, fabric)
        elif row.reference is None:
            reference = None
        else:
            reference = check_scenario({"name": f"{row.key}-reference", **row.reference},
                                       source, fabric)
        # Rows timed in windows (rows.py `window_rtts`) are sized for the rate `fabric`
        # runs at already: their transfers must last to the end of the judged time.
        scale = 1.0 if "window_s" in row.params else data_scale
        out.append(CheckedRow(row, scaled(scenario, scale),
                              None if reference is None else scaled(reference, scale)))
    return out


def _pass_key(scenario: Scenario, transports: tuple[str, ...]) -> str:
    """Passes that play the same thing are played once a repetition: a row's reference
    that is another row's run, or two rows that read one run."""
    return json.dumps([scenario.workload, scenario.params, transports,
                       scenario.protocol, [a.describe() for a in scenario.faults]],
                      sort_keys=True, default=str)


def run_rows(run: Run, table: list[CheckedRow], features: dict,
             repetitions: int = 1) -> list[dict]:
    """Play and judge every row `repetitions` times; a row that fails to run gets ERROR
    and the rest go on.

    The rows' transports are played fabric by fabric (experiments/dataplanes/twin.py: MRC on the
    run's fabric, RoCE on its single-plane twin), one bring-up each, every row's part
    on each, every repetition in turn; each repetition of a row is judged on its passes
    put back together, and the row's verdict is theirs together (`combine`)."""
    progress = run.progress
    results: dict[str, dict] = {}
    runnable: list[CheckedRow] = []
    for checked in table:
        row = checked.row
        entry = results[row.key] = {
            "key": row.key, "section": row.section, "claim": row.claim,
            "criterion": row.criterion, "differs": row.differs, "scenario": row.scenario,
            "reference": row.reference, "loaded": row.loaded, "duration_s": 0.0,
            "repetitions": repetitions}
        missing = [f for f in row.needs if not features.get(f)]
        if checked.not_applicable:
            entry.update(verdict="NOT APPLICABLE", measured=checked.not_applicable)
        elif missing:
            entry.update(verdict="NOT RUN", measured=f"not on this data plane: it has no "
                         f"{' and no '.join(missing)} (link_emulation in paper.json)")
        else:
            runnable.append(checked)
            continue
        progress(f"{row.key}: {entry['measured']}")
    played = {c.row.key: [(Pass(), Pass() if c.reference is not None else None)
                          for _ in range(repetitions)] for c in runnable}
    everything = tuple(dict.fromkeys(
        t for c in runnable for s in (c.scenario, c.reference) if s for t in s.transports))
    groups = by_fabric(everything, run.fabric)
    tasks = repetitions * sum(1 for fabric, here in groups for c in runnable
                              if any(t in here for t in c.scenario.transports))
    done, started_all, netem = 0, time.monotonic(), True
    for fabric, here in groups:
        steps = {c.row.key: twin_steps(c.scenario.faults, run.fabric, fabric)[0]
                 for c in runnable}
        network = run.up(fabric, tuple(a for key in steps for a in steps[key]))
        netem = network.features.netem
        for rep in range(repetitions):
            references: dict[str, Pass] = {}
            for checked in runnable:
                row, scenario, reference = checked.row, checked.scenario, checked.reference
                entry = results[row.key]
                mine = tuple(t for t in scenario.transports if t in here)
                if not mine:
                    continue
                done += 1
                if "verdict" in entry:
                    continue
                left = (time.monotonic() - started_all) / max(1, done - 1) * (tasks - done + 1)
                progress(f"[{done}/{tasks}, about {left / 60:.0f} min left] {row.key} on "
                         f"{fabric.name}, run {rep + 1} of {repetitions}: {row.claim}")
                where = run.folder / row.key / (f"run-{rep + 1}" if repetitions > 1 else "")
                started = time.monotonic()
                try:
                    # A row that reads another row's run differently (startup-losses,
                    # broken-at-start) judges the same pass.
                    key = _pass_key(scenario, mine)
                    faulty = references.get(key)
                    if faulty is None:
                        faulty = play_pass(network, mine, scenario.plan, steps[row.key], where,
                                           scenario.timeout_s, scenario.protocol, progress,
                                           label=row.key, queue=row.queue)
                    references.setdefault(key, faulty)
                    played[row.key][rep][0].add(faulty)
                    if reference is not None:
                        theirs = tuple(t for t in reference.transports if t in here)
                        key = _pass_key(reference, theirs)
                        if key not in references:
                            references[key] = play_pass(
                                network, theirs, reference.plan,
                                twin_steps(reference.faults, run.fabric, fabric)[0],
                                run.folder / f"reference-{fabric.name}-{len(references) + 1}"
                                / (f"run-{rep + 1}" if repetitions > 1 else ""),
                                reference.timeout_s, reference.protocol, progress,
                                label=f"{row.key} reference")
                        played[row.key][rep][1].add(references[key])
                except (KeyboardInterrupt, Interrupted):
                    raise
                except Exception as err:  # noqa: BLE001 - one row's failure is in its row
                    entry.update(verdict="ERROR", measured=f"{err.__class__.__name__}: {err}")
                    progress(f"  {row.key}: ERROR: {entry['measured']}")
                entry["duration_s"] = round(entry["duration_s"] + time.monotonic() - started, 1)
    for checked in runnable:
        row, scenario = checked.row, checked.scenario
        entry = results[row.key]
        if "verdict" in entry:
            continue
        verdicts, blocks = [], []
        try:
            for faulty, against in played[row.key]:
                faulty.order(scenario.transports)
                if against is not None:
                    against.order(checked.reference.transports)
                times = [(a.t, a.up) for a in scenario.faults]
                verdicts.append(judge(Measured(row, run.fabric, faulty, against, times,
                                               scenario.faults)))
                blocks.append((faulty, against))
        except Exception as err:  # noqa: BLE001 - a judge that cannot decide is the row's ERROR
            entry.update(verdict="ERROR", measured=f"{err.__class__.__name__}: {err}")
            continue
        similar = delay_emulated(run.fabric, netem)

        def regime(pairs: list[tuple[Pass, Pass | None]], scenario=scenario,
                   similar=similar) -> dict:
            # the agents' lag over these repetitions: one that fell behind measured the machine
            return proportions(run.fabric, scenario.protocol, scenario.faults, scenario.plan,
                               similar, agents_lag_p99_ms([b for f, _ in pairs for b in f.blocks]))

        kept, aside = trusted_runs([regime([pair]) for pair in blocks])
        verdicts, blocks = [verdicts[i] for i in kept], [blocks[i] for i in kept]
        middle = median_run(blocks)
        faulty, against = blocks[middle]
        row_plot(run.folder / f"{row.key}.png", row, faulty, verdicts[middle].figures)
        entry.update(combine(verdicts, middle, DECIDING[row.judge]), plot=f"{row.key}.png",
                     blocks=faulty.blocks, reference_blocks=against.blocks if against else None,
                     similarity=regime(blocks), set_aside=aside)
        if aside:
            entry["measured"] += f"; set aside: {'; '.join(aside)}"
        progress(f"  {row.key}: {headline(entry['similarity'])}")
        deciding = entry["similarity"]["deciding_out_of_band"]
        if deciding and entry["verdict"] in ("PASS", "FAIL"):
            entry["verdict"] = "INCONCLUSIVE"
            entry["measured"] += (f"; out of the paper's regime: {', '.join(deciding)} "
                                  "(docs/similarity.md)")
        progress(f"  {row.key}: {entry['verdict']}: {entry['measured']}")
    return [results[c.row.key] for c in table]


# The fault kinds a plot does not mark: a controller's denials set up the EV
# experiment's paths at the start, they are not its fault.
UNMARKED = ("deny",)


def row_plot(path: Path, row: Row, faulty: Pass, figures: dict) -> None:
    """A row's plot in the paper's form: throughput in windows against time with the
    faults marked, beside the fault-free pass and, where the row is about the capacity
    left, the remaining-capacity line (Fig. 9-11); throughput and each EV's activity
    (Fig. 12-13, 14); the flows with the victim drawn bold for the incast (Fig. 18);
    a switch port's queue with the arrivals marked (Fig. 22); else goodput over time
    with the faults marked."""
    window = row.params.get("window_s")
    marks = faulty.runs[0].faults if faulty.runs else []  # one timeline for every transport
    title = f"{row.key} ({row.section})"
    if row.judge == "ev_loss" and "activity" in figures:
        ev_activity_plot(path, title, figures["series"], window, figures["activity"], marks,
                         UNMARKED)
    elif row.judge == "ecn_separation":
        ev_paths_plot(path, title, figures["series"], window, figures["held"],
                      figures["join_s"], row.params["horizon_s"], row.params["pinned"])
    elif "series" in figures and window:
        ylabel = ("throughput, one way (Mbit/s)" if row.judge == "line_rate"
                  else "throughput, both ways (Mbit/s)")
        windows_plot(path, title, figures["series"], window, marks, ylabel, UNMARKED)
    elif row.judge == "victim":
        flows_plot(path, faulty.runs, faulty.events)
    elif row.judge == "dcqcn_queue":
        queue_plot(path, title, figures["queue"], figures["arrivals_s"])
    else:
        goodput_plot(path, faulty.runs, faulty.events)


def curve_plots(folder: Path, table: list[CheckedRow], results: list[dict]) -> dict[str, str]:
    """One plot per figure drawn over message size (rows with a `curve`): each row's
    curves from every repetition, median and min-max (Fig. 16, 17). Returns the plot
    file of each figure."""
    figures: dict[str, dict] = {}
    for checked, entry in zip(table, results):
        if checked.row.curve is None or "figures_each" not in entry:
            continue
        figure, loss = checked.row.curve
        lines = figures.setdefault(figure, {})
        for figures_of_one in entry["figures_each"]:
            for transport, curve in figures_of_one.get("curves", {}).items():
                for size, value in curve.items():
                    lines.setdefault((transport, loss), {}).setdefault(size, []).append(value)
    plots = {}
    for number, (figure, lines) in enumerate(figures.items()):
        name = f"curves-{number + 1}.png"
        size_curves_plot(folder / name, figure, lines)
        plots[figure] = name
    return plots


# Repetitions a row keeps at least, of those whose agents kept up, to be judged on
# them alone.
MIN_TRUSTED = 2


def trusted_runs(regimes: list[dict]) -> tuple[list[int], list[str]]:
    """The repetitions a row is judged on, and those set aside with why: a repetition
    whose agents fell behind (`agent_lag_p99_rtt` out of the paper's regime) measured
    the machine, not the network, and is set aside while MIN_TRUSTED others kept up
    (one, for a single repetition); otherwise every repetition is kept, and the row's
    proportions make it INCONCLUSIVE."""
    behind = {i: r["numbers"]["agent_lag_p99_rtt"]["value"] for i, r in enumerate(regimes)
              if "agent_lag_p99_rtt" in r["out_of_band"]}
    kept = [i for i in range(len(regimes)) if i not in behind]
    if len(kept) < min(MIN_TRUSTED, len(regimes)):
        return list(range(len(regimes))), []
    return kept, [f"run {i + 1}, its agents' timers {lag:g} RTT late (p99)"
                  for i, lag in behind.items()]


def median_run(blocks: list[tuple[Pass, Pass | None]]) -> int:
    """The repetition whose MRC workload time (under the row's faults; the first
    transport's in a row without MRC) is the median: the one whose figures and plot a
    row shows."""
    def seconds(index: int) -> float:
        played = blocks[index][0].blocks
        mrc = [b for b in played if b["transport"] == "mrc"] or played
        return mrc[0]["workload_s"] if mrc else 0.0

    order = sorted(range(len(blocks)), key=seconds)
    return order[len(order) // 2]


def combine(verdicts: list, middle: int, deciding: tuple[str, ...] = ()) -> dict:
    """A row's verdict over its repetitions: PASS or FAIL when every repetition agrees,
    INCONCLUSIVE when they do not (the spread straddles the criterion's limit) or when
    one could not show the claim (its judge says why, in its line). The measured line is
    the median repetition's, with every repetition's verdict and the median and range
    of the `deciding` figures (paths or their prefixes); the figures are every
    repetition's, and per number the median and range."""
    outcomes = [v.outcome for v in verdicts]
    verdict = outcomes[0] if len(set(outcomes)) == 1 else "INCONCLUSIVE"
    measured = verdicts[middle].measured
    reasons = sorted({v.inconclusive for v in verdicts if v.inconclusive}
                     - {verdicts[middle].inconclusive})
    if reasons:
        measured += f"; another run INCONCLUSIVE: {'; '.join(reasons)}"
    ranges = spread([v.figures for v in verdicts])
    if len(verdicts) > 1:
        shown = [f"{path} {_number(r['median'])} ({_number(r['min'])} to {_number(r['max'])})"
                 for path, r in ranges.items()
                 if any(path == d or path.startswith(d + ".") for d in deciding)]
        measured += (f" [{len(verdicts)} runs, this one the median; verdicts "
                     f"{', '.join(outcomes)}" + (f"; median (min to max): {'; '.join(shown)}"
                                                 if shown else "") + "]")
    return {"verdict": verdict, "measured": measured, "outcomes": outcomes,
            "figures": verdicts[middle].figures,
            "figures_each": [v.figures for v in verdicts],
            "spread": ranges}


def _number(value: float) -> str:
    return f"{value:.3g}"


def spread(figures: list[dict]) -> dict:
    """Every number of the repetitions' figures, by its path (a.b.c): median, min, max."""
    values: dict[str, list[float]] = {}

    def walk(node, path: str) -> None:
        if isinstance(node, dict):
            for key, child in node.items():
                walk(child, f"{path}.{key}" if path else str(key))
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            values.setdefault(path, []).append(float(node))

    for each in figures:
        walk(each, "")
    return {path: {"median": statistics.median(v), "min": min(v), "max": max(v)}
            for path, v in values.items() if len(v) == len(figures)}


def write_paper(folder: Path, meta: dict, results: list[dict]) -> None:
    (folder / "paper.json").write_text(json.dumps({**meta, "rows": results}, indent=2,
                                                  default=str) + "\n")
    counts = {v: sum(r["verdict"] == v for r in results)
              for v in ("PASS", "FAIL", "INCONCLUSIVE", "NOT RUN", "NOT APPLICABLE", "ERROR")}
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
        f"{meta['link_emulation'].get('faults') or 'no'}, PFC "
        f"{meta['link_emulation'].get('pfc') or 'no'}.", "",
        "Verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n) + ".", "",
    ]
    paper = [r for r in results if not r.get("loaded")]
    loaded = [r for r in results if r.get("loaded")]
    if paper:
        lines += ["| experiment (section) | the paper's claim | criterion | measured | verdict |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['key']} ({r['section']}) | {r['claim']} | {r['criterion']} | "
                  f"{r['measured']} | **{r['verdict']}** |" for r in paper]
        lines.append("")
    if loaded:
        lines += ["## On a loaded fabric", "",
                  "Variants of the fault rows with every host sending and receiving across "
                  "the T1s of a full-bisection fabric, MRC against the RoCE-like baseline. "
                  "There a T0-T1 link is a share of a plane's core, so every fault costs "
                  "throughput by construction: each criterion is a bound of the loaded "
                  "fabric (what equal plane loading allows), not the paper's claim.", "",
                  "| variant (section) | what it asks | criterion | measured | verdict |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['key']} ({r['section']}) | {r['claim']} | {r['criterion']} | "
                  f"{r['measured']} | **{r['verdict']}** |" for r in loaded]
        lines.append("")
    for r in results:
        lines += [f"## {r['key']}: {r['verdict']}", "", f"Differs from the paper: "
                  f"{r['differs']}", "", f"Measured: {r['measured']}", ""]
        if r.get("plot"):
            lines += [f"![{r['key']}]({r['plot']})", ""]
    for figure, name in meta.get("curve_plots", {}).items():
        lines += [f"## {figure}: throughput against message size", "",
                  "Median of the repetitions, bars from min to max.", "",
                  f"![{figure}]({name})", ""]
    for note in meta["link_emulation"].get("notes", []):
        lines.append(f"Note: {note}.")
    (folder / "paper.md").write_text("\n".join(lines) + "\n")


def run_paper(run: Run, table, rate_reason: str, repetitions: int = REPETITIONS) -> None:
    """Play and judge every row in `run` (prepared, not entered); writes paper.md and
    paper.json whatever happens. run.status: 0 when every row got a verdict, 1 when one
    could not run (its error is in its row) or the run failed."""
    fabric, target, progress = run.fabric, run.target, run.progress
    spec = fabric.spec
    meta = {"paper": PAPER, "topology": fabric.name, "dataplane": target.name,
            "dataplane_reason": run.reason, "hosts": len(fabric.hosts), "planes": spec.planes,
            "t1_per_plane": spec.t1_per_plane, "cores": os.cpu_count(),
            "link_rate_mbit": spec.host_t0.rate_mbit, "link_rate_reason": rate_reason,
            "started_at": datetime.now().isoformat(timespec="seconds"),
            "link_emulation": {}}
    results: list[dict] = []
    with run:
        progress(f"{len(table)} experiments of the MRC paper on {fabric.name} "
                 f"({target.name}: {run.reason}), links at {spec.host_t0.rate_mbit:g} Mbit/s")
        network = run.up(fabric, tuple(a for c in table if c.scenario
                                       for a in c.scenario.faults))
        meta["link_emulation"] = network.link_emulation()
        meta.update(target.summary_fields())
        features = {name: meta["link_emulation"].get(name) for name in FEATURES}
        results = run_rows(run, table, features, repetitions)
        meta["curve_plots"] = curve_plots(run.folder, table, results)
        run.status = 1 if any(r["verdict"] == "ERROR" for r in results) else 0
    if run.error and run.error != "interrupted":
        meta["error"] = run.error
    meta.update(run.target.summary_fields())
    meta["duration_s"] = round(time.monotonic() - progress.start, 1)
    write_paper(run.folder, meta, results)


SHAPE_MODES = ("default", "one", "paper")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m experiments.paper",
                                     description="The MRC paper's section-5 experiments.")
    parser.add_argument("--topo", default=DEFAULT_TOPO, help="topology name or YAML path")
    parser.add_argument("--dataplane", default="kernel", help="kernel, bmv2 or auto")
    parser.add_argument("--only", default="", help="comma-separated row keys (default: all)")
    parser.add_argument("--results", default="results", help="folder for results")
    parser.add_argument("--rate-cap", default="calibrated",
                        help="cap the links to what the agents drive here (default), to a "
                             "link rate in Mbit/s (e.g. 4), or not (off)")
    parser.add_argument("--mtu", type=int, default=None,
                        help="payload bytes per DATA packet instead of each topology's "
                             "mtu_payload (e.g. 4096, as the NICs carry)")
    parser.add_argument("--repetitions", type=int, default=REPETITIONS,
                        help=f"runs of each row (default {REPETITIONS}; 1: QUICK=1)")
    parser.add_argument("--shapes", choices=SHAPE_MODES, default="default",
                        help="the rows of the paper's Clusters A and B on their fabric "
                             "(cluster-b), the others on --topo (default); every row on "
                             "--topo (one); each on the shape of the paper's cluster it ran "
                             "on (paper)")
    parser.add_argument("--servers", default=None, metavar="FILE",
                        help="a cluster file placing each fabric's planes and hosts on "
                             "other servers (docs/scale-out.md); every fabric of the run "
                             "must fit it")
    parser.add_argument("--loaded", action="store_true",
                        help="also play the fault rows' loaded-fabric variants (-loaded) "
                             "on --topo")
    args = parser.parse_args(argv)
    try:
        only = {k.strip() for k in args.only.split(",") if k.strip()} or None
        legs = plan(args.topo, args.shapes, only, args.loaded, args.mtu)
    except PREFLIGHT_ERRORS as err:
        print(f"error: {err}", file=sys.stderr)
        return USAGE_ERROR
    status, folders = 0, []
    for leg in legs:
        try:
            run = Run.prepare("paper", leg.fabric, args.dataplane, args.results,
                              cap=args.rate_cap, active_hosts=leg.active_hosts,
                              servers=args.servers)
        except PREFLIGHT_ERRORS as err:
            print(f"error: {err}", file=sys.stderr)
            return USAGE_ERROR
        # The rows are written for the rate the agents drive (their sizes, their faults'
        # times), so the calibrated cap shrinks nothing; BMv2's slower cap scales them.
        rate_reason = run.facts.get("rate_cap", "the topology's rate")
        if run.target.data_scale() < 1.0:  # BMv2: no faster than its CPU keeps up
            rate_reason = ("capped so that the BMv2 switches' CPU keeps up; "
                           + scale_note(run.target.data_scale()))
        table = checked_rows(run.fabric, leg.keys, run.target.data_scale())
        run_paper(run, table, rate_reason, max(1, args.repetitions))
        print(f"paper: {run.folder / 'paper.md'}")
        print(f"results: {run.folder}")
        folders.append(run.folder)
        status = max(status, run.status)
        if run.status == 130:
            break
    if len(folders) > 1:
        print(f"paper, every fabric: {write_shapes_index(folders)}")
    return status


@dataclass(frozen=True)
class Leg:
    """One fabric of a make paper run: the rows it plays, and how many hosts those rows
    have sending at once (the links are capped for them; None: every host)."""

    fabric: Fabric
    keys: set[str]
    active_hosts: int | None = None


def plan(topo: str, shapes: str = "default", only: set[str] | None = None,
         loaded: bool = False, mtu: int | None = None) -> list[Leg]:
    """Where each chosen row runs (module docstring), as one `Leg` per fabric: the
    fabrics of the shapes first, in the order of rows.py SHAPES, then `topo`. The rows:
    `only`, else every row but the loaded variants, which `loaded` adds. Every row is
    checked against its fabric here (a mistake is a UserError, before anything runs)."""
    base = load_topology(topo, mtu)
    if only:
        checked_rows(base, only)  # an unknown key: one line naming the rows there are
    chosen = [r for r in rows(base)
              if (r.key in only if only else not r.loaded or loaded)]
    by_place: dict[tuple[int, str], set[str]] = {}
    order: dict[str, int] = {}  # each shape's fabric, in the order of SHAPES
    for name in SHAPES.values():
        order.setdefault(name, len(order))
    for row in chosen:
        on_shape = not row.loaded and (shapes == "paper"
                                       or (shapes == "default"
                                           and (row.shape in WIDE or row.own_fabric)))
        name = SHAPES[row.shape] if on_shape else topo
        place = (order[name] if on_shape else len(order), name)
        by_place.setdefault(place, set()).add(row.key)
    fabrics: dict[str, Fabric] = {topo: base}
    legs = []
    for (_, name), keys in sorted(by_place.items()):
        fabric = fabrics.get(name) or fabrics.setdefault(name, load_topology(name, mtu))
        legs.append(Leg(fabric, keys, sending_hosts(fabric, checked_rows(fabric, keys))))
    return legs


def sending_hosts(fabric: Fabric, table: list[CheckedRow]) -> int | None:
    """The most hosts one of the rows' passes has sending at once (their transfers'
    sources), or None when that is every host of the fabric."""
    most = max((len({t.src for phase in s.plan for t in phase})
                for c in table for s in (c.scenario, c.reference) if s is not None),
               default=len(fabric.hosts))
    return None if most >= len(fabric.hosts) else most


def documented_rows() -> tuple[list[Row], list[Row]]:
    """The rows docs/paper.md lists, each built on the fabric a plain `make paper`
    plays it on: the paper's rows, then the loaded variants, in the order of rows.py."""
    placed = {}
    for leg in plan(DEFAULT_TOPO, loaded=True):
        placed.update({row.key: row for row in rows(leg.fabric) if row.key in leg.keys})
    ordered = [placed[row.key] for row in rows(load_topology(DEFAULT_TOPO))]
    return ([r for r in ordered if not r.loaded], [r for r in ordered if r.loaded])


def criteria_markdown() -> tuple[str, str]:
    """docs/paper.md's two tables of claims and criteria (the paper's rows; the loaded
    variants), from the rows themselves (rows.py `criteria_table`, `loaded_table`)."""
    paper, loaded = documented_rows()
    return "\n".join(criteria_table(paper)), "\n".join(loaded_table(loaded))


def write_shapes_index(folders: list[Path]) -> Path:
    """paper-shapes.md of a run on several fabrics: each fabric's table, in the folder of
    the first one's run."""
    lines = ["# The MRC paper's experiments, on each fabric they ran on", ""]
    for folder in folders:
        data = json.loads((folder / "paper.json").read_text())
        planes = f"{data['planes']} plane{'s' if data['planes'] != 1 else ''}"
        lines += [f"## {data['topology']}: {data['hosts']} hosts, {planes}, "
                  f"links at {data['link_rate_mbit']:g} Mbit/s, {data['duration_s']:.0f} s",
                  "", f"Rows and plots: [{folder.name}/paper.md](../{folder.name}/paper.md)", "",
                  "| experiment | measured | verdict |", "|---|---|---|"]
        lines += [f"| {r['key']} ({r['section']}) | {r['measured']} | **{r['verdict']}** |"
                  for r in data["rows"]]
        lines.append("")
    index = folders[0] / "paper-shapes.md"
    index.write_text("\n".join(lines) + "\n")
    return index


if __name__ == "__main__":
    sys.exit(main())
