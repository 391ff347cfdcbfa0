"""PNG plots of a workload run: goodput over time with fault markers, completion-time CDF,
and paths out of service over time. matplotlib with the Agg backend (no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first

from experiments.metrics import goodput_series  # noqa: E402


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
