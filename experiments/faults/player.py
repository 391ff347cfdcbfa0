"""Plays a fault timeline on a started network, in a background thread, and logs it.

`apply_before_start()` puts the steps in place before the workload starts (and logs
them at t=0); `FaultInjector` plays the rest at their times through `apply(step)`,
records what it did (`log`) and what failed (`errors`), and on `stop(restore=...)`
brings back every fault still down, so nothing of one transport's run is left for the
next.
"""

from __future__ import annotations

import threading
import time

from experiments.faults.base import Fault, Step


class FaultInjector:
    """Plays steps through `apply(step)` in a background thread.

    `played`: the log of steps applied before the start (`apply_before_start`), which
    the injector's log begins with, and their faults, which `stop()` restores like its
    own."""

    def __init__(self, steps: list[Step], apply, clock=time.monotonic,
                 played: tuple[list[dict], list[Step]] = ((), ())):
        self.steps = steps
        self.apply = apply
        self.clock = clock
        self.log: list[dict] = list(played[0])
        self.errors: list[str] = []
        self._down: dict[tuple, Fault] = {}  # faults down now, by what they act on
        for step in played[1]:
            self._track(step)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._restored = False
        self.start_time = 0.0

    def start(self, start_time: float) -> None:
        self.start_time = start_time
        self._thread = threading.Thread(target=self._run, name="faults", daemon=True)
        self._thread.start()

    def _track(self, step: Step) -> None:
        key = step.fault.key()
        if step.up:
            self._down.pop(key, None)
        else:
            self._down[key] = step.fault

    def _run(self) -> None:
        for step in self.steps:
            delay = self.start_time + step.t - self.clock()
            if delay > 0 and self._stop.wait(delay):
                return
            try:
                self.apply(step)
                self._track(step)
                self.log.append(log_entry(step, round(self.clock() - self.start_time, 4)))
            except Exception as err:  # noqa: BLE001 - reported in the summary, run goes on
                self.errors.append(f"{step.describe()}: {err}")

    def stop(self, restore=None) -> None:
        """Stop playing; `restore(step)` is called with an up step for every fault left
        down (once: a second stop restores nothing again). A step that fails, played or
        restoring, goes to `errors`, which fail the run."""
        self._stop.set()
        if self._thread:
            self._thread.join()
        if restore and not self._restored:
            self._restored = True
            for fault in self._down.values():
                step = Step(0.0, True, fault)
                try:
                    restore(step)
                except Exception as err:  # noqa: BLE001 - reported like any failed step
                    self.errors.append(f"restoring {step.describe()}: {err}")
            self._down.clear()


def log_entry(step: Step, t: float) -> dict:
    """The fault log's record of a step applied at `t` (seconds from the start)."""
    entry = {"t": t, "event": "fault", **step.fault.log(step.up)}
    if step.before_start:
        entry["before_start"] = True
    return entry


def apply_before_start(steps: list[Step], apply) -> tuple[list[dict], list[str], list[Step]]:
    """Apply the steps in place before the start, now: (their log entries at t=0, the
    errors of those that failed, the steps applied)."""
    log, errors, applied = [], [], []
    for step in steps:
        try:
            apply(step)
        except Exception as err:  # noqa: BLE001 - reported in the summary, run goes on
            errors.append(f"{step.describe()} (before the start): {err}")
            continue
        log.append(log_entry(step, 0.0))
        applied.append(step)
    return log, errors, applied
