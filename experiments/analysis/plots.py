"""PNG plots of a workload run: goodput over time with fault markers, completion-time CDF,
paths out of service over time, and each flow's throughput over time; and of make
paper's rows in the paper's forms: throughput in windows against time with the faults
marked (Fig. 9-12), EV activity against time (Fig. 13, 14), throughput against message
size with spread bars (Fig. 16, 17), a switch port's queue against time (Fig. 22).
matplotlib with the Agg backend (no display
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


def _fault_markers(ax, faults: list[dict], skip: tuple[str, ...] = ()) -> None:
    """A dashed line at each step of the fault log (red down, green up), but for the
    kinds in `skip`."""
    labelled = set()
    for fault in faults:
        if fault.get("fault") in skip:
            continue
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


# Lines of the windowed plots, by the name a judge gives its series.
WINDOW_STYLES = {"faults": {"color": "tab:blue", "linewidth": 1.6},
                 "fault-free": {"color": "grey", "linewidth": 1.0},
                 "remaining capacity": {"color": "black", "linestyle": ":", "linewidth": 1.2}}


def _steps(ax, points: list, window_s: float, label: str, **style) -> None:
    """One series of windows ([start, value]) as steps; a window without a value is a
    gap."""
    xs, ys = [], []
    for start, value in points:
        xs += [start, start + window_s]
        ys += [float("nan") if value is None else value] * 2
    if xs:
        ax.plot(xs, ys, label=label, **style)


def windows_plot(path: Path, title: str, series: dict[str, list], window_s: float,
                 faults: list[dict], ylabel: str = "throughput (Mbit/s)",
                 skip: tuple[str, ...] = ()) -> None:
    """Throughput in windows against time, as the paper's Fig. 9-12: each series of
    windows ([start, Mbit/s]), the faults marked."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for label, points in series.items():
        _steps(ax, points, window_s, label, **WINDOW_STYLES.get(label, {}))
    _fault_markers(ax, faults, skip)
    ax.set_ylim(bottom=0)
    _save(fig, ax, path, title, "time since workload start (s)", ylabel, legend="lower left")


def _activity_axis(ax, label: str, xs: list[float], active: list[bool]) -> None:
    ax.step(xs, [1 if a else 0 for a in active], where="post", color="tab:purple")
    ax.set_ylim(-0.2, 1.2)
    ax.set_yticks([0, 1], ["Inactive", "Active"])
    ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize="small")
    ax.grid(alpha=0.3)


def ev_activity_plot(path: Path, title: str, series: dict[str, list], window_s: float,
                     activity: dict[str, list], faults: list[dict],
                     skip: tuple[str, ...] = ()) -> None:
    """Throughput in windows (Fig. 12) above each EV's activity (Fig. 13): an EV is
    active in a window where its connection sent data on it. `activity`: "windows"
    (their starts) and, per EV, its packets per window."""
    evs = {k: v for k, v in activity.items() if k != "windows"}
    fig, axes = plt.subplots(1 + len(evs), 1, figsize=(8, 3.2 + 1.1 * len(evs)), sharex=True,
                             gridspec_kw={"height_ratios": [3] + [1] * len(evs)})
    top = axes[0]
    for label, points in series.items():
        _steps(top, points, window_s, label, **WINDOW_STYLES.get(label, {}))
    _fault_markers(top, faults, skip)
    top.set_ylim(bottom=0)
    top.set_ylabel("Mbit/s")
    top.set_title(title)
    top.grid(alpha=0.3)
    top.legend(loc="lower left", fontsize="small")
    starts = list(activity.get("windows", []))
    for ax, (label, counts) in zip(axes[1:], evs.items()):
        xs = starts + ([starts[-1] + window_s] if starts else [])
        _activity_axis(ax, label, xs, [c > 0 for c in counts] + [counts[-1] > 0 if counts
                                                                  else False])
        _fault_markers(ax, faults, skip)
        legend = ax.get_legend()
        if legend is not None:
            legend.remove()
    axes[-1].set_xlabel("time since workload start (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def ev_paths_plot(path: Path, title: str, series: dict[str, list], window_s: float,
                  held: dict[str, list], join_s: float, end_s: float, first: int = 0) -> None:
    """Each flow's throughput in windows above, per flow, the activity of every path its
    EVs sat on (Fig. 14): `held` gives per flow [time, {path: EVs}] steps. The path
    every EV started on (`first`) is EV-A, the others EV-B, EV-C... in the order they
    were first taken."""
    names: dict[int, str] = {first: "EV-A"}
    for steps in held.values():
        for _, on in steps:
            for p in sorted(int(k) for k in on):
                names.setdefault(p, f"EV-{chr(ord('A') + len(names))}")
    rows = [(flow, p) for flow, steps in held.items()
            for p in sorted({int(k) for _, on in steps for k in on}, key=lambda q: names[q])]
    fig, axes = plt.subplots(1 + len(rows), 1, figsize=(8, 3.2 + 0.9 * len(rows)),
                             sharex=True, gridspec_kw={"height_ratios": [3] + [1] * len(rows)})
    top = axes[0]
    for label, points in series.items():
        _steps(top, points, window_s, label)
    top.axvline(join_s, color="grey", linestyle=":", linewidth=0.8, label="flow 2 joins")
    top.set_ylim(bottom=0)
    top.set_ylabel("Mbit/s")
    top.set_title(title)
    top.grid(alpha=0.3)
    top.legend(loc="lower left", fontsize="small")
    for ax, (flow, p) in zip(axes[1:], rows):
        xs, active = [], []
        for t, on in held[flow]:
            xs.append(t)
            active.append(any(int(k) == p and n > 0 for k, n in on.items()))
        xs.append(end_s)
        active.append(active[-1])
        _activity_axis(ax, f"{flow}\n{names[p]} (path {p})", xs, active)
        ax.axvline(join_s, color="grey", linestyle=":", linewidth=0.8)
    axes[-1].set_xlabel("time since workload start (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def queue_plot(path: Path, title: str, queue: dict, arrivals: list[float]) -> None:
    """A switch port's queue against time, as the paper's Fig. 22: the lossless queue in
    frames (`queue`: the judge's samples [t, bytes, ingress ports pausing] and the frame
    size), each flow's arrival marked, the samples where the switch pauses a sender
    shaded."""
    fig, ax = plt.subplots(figsize=(8, 4))
    samples, frame = queue.get("samples", []), queue.get("frame_bytes") or 1
    ts = [s[0] for s in samples]
    ax.plot(ts, [s[1] / frame for s in samples], color="tab:blue", linewidth=0.8,
            label=f"queue at {queue.get('port')}")
    paused = [t for t, _, pausing in samples if pausing]
    if paused:
        ax.scatter(paused, [0] * len(paused), marker="|", color="tab:red", s=60,
                   label="PFC: the switch pauses a sender")
    for i, t in enumerate(arrivals):
        ax.axvline(t, color="grey", linestyle=":", linewidth=0.7,
                   label="a flow arrives" if i == 0 else None)
    ax.set_ylim(bottom=0)
    _save(fig, ax, path, title, "time since workload start (s)", "queue (frames)",
          legend="upper left")
