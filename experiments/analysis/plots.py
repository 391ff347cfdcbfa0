"""PNG plots of a workload run: goodput over time with fault markers, completion-time CDF,
paths out of service over time, and each flow's throughput over time; and of make
paper's rows in the paper's forms: throughput against message size with spread bars
(Fig. 16, 17) and path activity (Fig. 14). matplotlib with the Agg backend (no display
needed)."""

from __future__ import annotations

import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first

from experiments.analysis.metrics import BIN_S, flow_series, goodput_series  # noqa: E402

# flows.png draws every flow up to this many; beyond (all-to-all on 8 hosts has 56),
# one line per destination with the sum of its flows, and each victim flow alone.
MAX_FLOW_LINES = 8


def _fault_markers(ax, faults: list[dict]) -> None:
    labelled = set()
    for fault in faults:
        label = "fault up" if fault["up"] else "fault down"
        ax.axvline(fault["t"], color="tab:green" if fault["up"] else "tab:red",
                   linestyle="--", linewidth=0.8, label=None if label in labelled else label)
        labelled.add(label)


def _save(fig, ax, path: Path, title: str, xlabel: str, ylabel: str,
          legend: str = "best") -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc=legend, fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def goodput_plot(path: Path, runs: list, events: dict[str, list[dict]]) -> None:
    fig, ax = plt.subplots(figsize=(8, 4))
    for run in runs:
        series = goodput_series(events[run.transport], run.start)
        if series:
            ax.plot([t for t, _ in series], [g for _, g in series], label=run.transport)
    if runs:
        _fault_markers(ax, runs[0].faults)
    _save(fig, ax, path, "Goodput over time", "time since workload start (s)",
          "goodput, all hosts (Mbit/s)")


def fct_cdf_plot(path: Path, runs: list) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    for run in runs:
        fcts = sorted(t.fct() for t in run.transfers if t.fct() is not None)
        if fcts:
            ax.step(fcts, [(i + 1) / len(run.transfers) for i in range(len(fcts))],
                    where="post", label=f"{run.transport} ({len(fcts)}/{len(run.transfers)} done)")
    ax.set_ylim(0, 1.02)
    _save(fig, ax, path, "Completion-time CDF", "transfer completion time (s)",
          "fraction of transfers", legend="lower right")


def path_state_plot(path: Path, runs: list, events: dict[str, list[dict]]) -> None:
    """EVs out of service (retired minus reinstated, over all hosts) over time."""
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for run in runs:
        level, xs, ys = 0, [0.0], [0]
        for event in events[run.transport]:
            kind = event.get("event")
            if kind in ("retire", "reinstate"):
                level += 1 if kind == "retire" else -1
                xs.append(event["t"] - run.start)
                ys.append(level)
        xs.append(run.end - run.start)
        ys.append(level)
        ax.step(xs, ys, where="post", label=run.transport)
    if runs:
        _fault_markers(ax, runs[0].faults)
    _save(fig, ax, path, "Paths out of service", "time since workload start (s)",
          "EVs retired")


def flow_lines(run, events: list[dict]) -> list[tuple[str, list[tuple[float, float]]]]:
    """The lines of one transport's panel of flows.png: (label, (t, Mbit/s) series).

    Every flow when there are at most MAX_FLOW_LINES; otherwise each victim flow alone
    and, per destination, the sum of its other flows (a destination's line is what its
    NIC took in, and one that falls behind the rest is the one to look at)."""
    series = flow_series(events, run.start, BIN_S)
    victims = {(t.src, t.dst) for t in run.transfers if t.role == "victim"}

    def label(flow):
        return f"{'victim ' if flow in victims else ''}h{flow[0]}->h{flow[1]}"

    if len(series) <= MAX_FLOW_LINES:
        return [(label(flow), points) for flow, points in sorted(series.items())]
    lines = [(label(flow), series[flow]) for flow in sorted(victims) if flow in series]
    by_dst: dict[int, list] = {}
    for (src, dst), points in sorted(series.items()):
        if (src, dst) not in victims:
            by_dst.setdefault(dst, []).append(points)
    for dst, parts in sorted(by_dst.items()):
        total = [0.0] * max(map(len, parts))
        for points in parts:
            for i, (_, mbps) in enumerate(points):
                total[i] += mbps
        lines.append((f"all->h{dst} ({len(parts)} flows)",
                      [(i * BIN_S, mbps) for i, mbps in enumerate(total)]))
    return lines


def flows_plot(path: Path, runs: list, events: dict[str, list[dict]]) -> None:
    """Throughput over time per flow (flow_lines), one panel per transport, on one
    scale so that the panels compare; each bin is drawn at its middle."""
    fig, axes = plt.subplots(max(1, len(runs)), 1, figsize=(8, 2.2 + 2.3 * len(runs)),
                             sharex=True, sharey=True, squeeze=False)
    for ax, run in zip(axes[:, 0], runs):
        lines = flow_lines(run, events[run.transport])
        for label, points in lines:
            ax.plot([t + BIN_S / 2 for t, _ in points], [v for _, v in points], label=label,
                    linewidth=2.0 if label.startswith("victim") else 1.0)
        ax.set_ylim(bottom=0)
        _fault_markers(ax, run.faults)
        ax.set_title(run.transport)
        ax.set_ylabel("Mbit/s")
        ax.grid(alpha=0.3)
        if lines:
            ax.legend(loc="upper right", fontsize="x-small", ncol=2)
    axes[-1, 0].set_xlabel("time since workload start (s)")
    fig.suptitle("Throughput per flow")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def size_curves_plot(path: Path, title: str,
                     curves: dict[tuple[str, str], dict[int, list[float]]]) -> None:
    """Throughput per host against message size, as the paper's Fig. 16 and 17: one line
    per (transport, loss) with its repetitions' median, bars from their min to max; a
    colour per transport, a line style per loss."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    colours: dict[str, str] = {}
    styles: dict[str, str] = {}
    for (transport, loss), by_size in curves.items():
        sizes = sorted(by_size)
        if not sizes:
            continue
        colour = colours.setdefault(transport, f"C{len(colours)}")
        style = styles.setdefault(loss, ("-", "--", ":", "-.")[len(styles) % 4])
        mid = [statistics.median(by_size[s]) for s in sizes]
        low = [m - min(by_size[s]) for m, s in zip(mid, sizes)]
        high = [max(by_size[s]) - m for m, s in zip(mid, sizes)]
        ax.errorbar([s / 1000 for s in sizes], mid, yerr=[low, high], color=colour,
                    linestyle=style, marker="o", markersize=3, capsize=3,
                    label=f"{transport}, {loss}")
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    _save(fig, ax, path, title, "message size (kB)",
          "throughput per host (Mbit/s): median, min-max")


def migration_plot(path: Path, run, events: list[dict]) -> None:
    """Path activity as the paper's Fig. 14: each flow's throughput over time, and below
    it every ECN migration, by the host whose connection moved an EV."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 1]})
    for label, points in flow_lines(run, events):
        top.plot([t + BIN_S / 2 for t, _ in points], [v for _, v in points], label=label)
    for t in sorted({r.start for r in run.transfers}):
        top.axvline(t - run.start, color="grey", linestyle=":", linewidth=0.8)
    top.set_ylim(bottom=0)
    top.set_ylabel("Mbit/s")
    top.set_title("Throughput per flow (dotted: a flow starts)")
    top.grid(alpha=0.3)
    top.legend(loc="upper right", fontsize="x-small")
    moves = [(e["t"] - run.start, e.get("host", 0)) for e in events
             if e.get("event") == "migrate"]
    bottom.scatter([t for t, _ in moves], [f"h{h}" for _, h in moves], marker="|", s=120)
    bottom.set_ylabel("migrations")
    bottom.set_xlabel("time since workload start (s)")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
