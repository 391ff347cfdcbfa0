"""Each transport against its own fault-free run (pure): the slowdown a fault costs it.

Comparing MRC's time under faults with the baseline's says little when the two differ
without faults too (the baseline may use one plane of eight, or fewer paths). What a
fault costs a transport is its time under the fault over its time on the same workload
and network without it: the MRC paper's "slowdown" (section 5: e.g. at most 5% under
T0-T1 link flaps). Inputs are `experiments/analysis/metrics.py` summary blocks (one per
transport) of a run with the faults and of one without; nothing here runs anything.
"""

from __future__ import annotations


def slowdown(faulty: dict, clean: dict) -> dict:
    """One transport's workload time under faults against its fault-free run.

    `slowdown` is the fraction of time the faults added (0.05: 5% slower); when the
    faulty run did not finish, its time is only a lower bound, so is the slowdown, and
    `finished` says so. `goodput_ratio` is the faulty run's goodput over the clean one's.
    """
    if faulty["transport"] != clean["transport"]:
        raise ValueError(f"comparing {faulty['transport']} with {clean['transport']}'s "
                         "fault-free run")
    if not clean["ok"]:
        return {"transport": faulty["transport"], "slowdown": None, "finished": faulty["ok"],
                "faulty_s": faulty["workload_s"], "clean_s": clean["workload_s"],
                "goodput_ratio": None,
                "note": "the fault-free run did not finish: no reference"}
    clean_s, faulty_s = clean["workload_s"], faulty["workload_s"]
    clean_goodput = clean["goodput_mbps"]
    return {
        "transport": faulty["transport"],
        "slowdown": round(faulty_s / clean_s - 1, 4) if clean_s > 0 else None,
        "finished": faulty["ok"],
        "faulty_s": faulty_s,
        "clean_s": clean_s,
        "goodput_ratio": (round(faulty["goodput_mbps"] / clean_goodput, 4)
                          if clean_goodput > 0 else None),
        "note": "" if faulty["ok"] else unfinished(faulty),
    }


def unfinished(block: dict) -> str:
    """Why a transport did not finish under the faults: its job aborted (a RoCE queue
    pair went to the error state, as a training job's would) or it ran out of time."""
    aborted = block.get("aborted")
    if aborted:
        return (f"job aborted: a queue pair of h{aborted['src']} -> h{aborted['dst']} went "
                f"to the error state at {aborted['t']:.2f} s")
    return "did not finish under the faults: at least this slow"


def slowdowns(faulty_blocks: list[dict], clean_blocks: list[dict]) -> list[dict]:
    """`slowdown` for every transport of the faulty run, in its order; a transport
    without a fault-free run gets no figures and a note."""
    clean = {block["transport"]: block for block in clean_blocks}
    out = []
    for block in faulty_blocks:
        reference = clean.get(block["transport"])
        if reference is None:
            out.append({"transport": block["transport"], "slowdown": None,
                        "finished": block["ok"], "faulty_s": block["workload_s"],
                        "clean_s": None, "goodput_ratio": None,
                        "note": "no fault-free run of this transport"})
        else:
            out.append(slowdown(block, reference))
    return out


def describe(entry: dict) -> str:
    """One line for a report: '+4.8% (1.234 s against 1.178 s without faults)'."""
    if entry["slowdown"] is None:
        return f"n/a ({entry['note']})"
    bound = "" if entry["finished"] else ">= "
    text = (f"{bound}{entry['slowdown']:+.1%} ({entry['faulty_s']:.3f} s against "
            f"{entry['clean_s']:.3f} s without faults)")
    return text if entry["finished"] else f"{text}, did not finish"


def verdict(entries: list[dict], trustworthy: bool = True) -> str:
    """One line for the end of a run: whether MRC rode out the faults better than the
    other transports, each measured against its own fault-free run. `trustworthy`:
    whether the machine kept up (experiments/analysis/health.py); a verdict measured on
    a machine that did not is said to be the machine's as much as the network's."""
    by_name = {e["transport"]: e for e in entries}
    mrc = by_name.get("mrc")
    others = [e for e in entries if e["transport"] != "mrc"]
    if mrc is None or not others:
        return "verdict: none (the run needs mrc and another transport, with faults)"
    if mrc["slowdown"] is None or not mrc["finished"]:
        text = f"MRC did not ride out the faults here: {describe(mrc)}"
    else:
        beaten = [e for e in others if not e["finished"] or e["slowdown"] is None
                  or e["slowdown"] > mrc["slowdown"]]
        against = "; ".join(f"{e['transport']} {_short(e)}" for e in others)
        if len(beaten) == len(others):
            text = (f"MRC rode out the faults better: {mrc['slowdown']:+.1%} against "
                    f"{against}")
        else:
            text = (f"MRC was not better than every baseline here: {mrc['slowdown']:+.1%} "
                    f"against {against}")
    if not trustworthy:
        text += " (the machine did not keep up: see the emulation line)"
    return f"verdict: {text}"


def _short(entry: dict) -> str:
    if not entry["finished"]:
        return f"did not finish ({entry['note']})"
    return "n/a" if entry["slowdown"] is None else f"{entry['slowdown']:+.1%}"
