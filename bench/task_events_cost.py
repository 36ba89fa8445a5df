#!/usr/bin/env python3
"""What task events cost: task_bench and actor_bench with events on against off.

On a shared VM one run of a benchmark differs from the next by 15-30%, as much as
the cost being measured, and the host's load drifts over minutes. Runs are 6 s each
by default: a 2-s run of single_client_tasks_sync swings with the few moments the
scheduler puts the driver and the worker on one core (tens to hundreds of ms each),
and two identical configurations differed by 3% over 30 rounds of them. So the two are
run in interleaved rounds (on then off, off then on, ...), each run a fresh cluster, and
compared by medians: of the figures, and of the ratio within each round (which
cancels the slow drift). Prints one JSON line per round, then a JSON summary per
benchmark: on and off medians, the ratio of the medians, the median and range of
the per-round ratios, and a 90% interval for that median (a bootstrap over rounds:
how far the median could be from the true one, given how much rounds vary; the
target is met robustly when the interval's low end clears it). With --control each round also runs events off a second time
("off2"), and the summary gives off2 against off the same way: the noise floor, what
a ratio of identical runs looks like on this machine.

usage: task_events_cost.py [--build DIR] [--rounds N] [--seconds S] [--control] [bench:name ...]
"""
import argparse
import itertools
import json
import os
import random
import statistics
import subprocess

DEFAULT_BENCHES = [
    "task_bench:single_client_tasks_sync",
    "task_bench:single_client_tasks_async",
    "task_bench:multi_client_tasks_async",
    "actor_bench:1_1_actor_calls_async",
    "actor_bench:n_n_actor_calls_async",
]


def run(binary, names, seconds, events):
    env = dict(os.environ, MANTA_task_events_enabled="1" if events else "0")
    out = subprocess.run([binary, "--only", ",".join(names), "--seconds", str(seconds)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{binary} exited with {out.returncode}; the end of its stderr:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build"))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--control", action="store_true", help="also run events off twice per round")
    parser.add_argument("benches", nargs="*", default=DEFAULT_BENCHES)
    args = parser.parse_args()
    by_binary = {}
    for bench in args.benches:
        binary, name = bench.split(":")
        by_binary.setdefault(binary, []).append(name)
    kinds = ("on", "off", "off2") if args.control else ("on", "off")
    # Every order in turn: no kind keeps an advantage of a place in the round (the
    # middle of three runs was 5% faster in one test).
    orders = list(itertools.permutations(kinds))
    figures = {name: {k: [] for k in kinds} for names in by_binary.values() for name in names}
    for round_no in range(args.rounds):
        for events in orders[round_no % len(orders)]:
            for binary, names in by_binary.items():
                result = run(os.path.join(args.build, "bench", binary), names, args.seconds, events == "on")
                for name in names:
                    figures[name][events].append(result[name])
                print(json.dumps({"round": round_no, "events": events, **result}), flush=True)
    summary = {}
    for name, f in figures.items():
        summary[name] = compare(f["on"], f["off"], "on")
        if args.control:
            summary[name]["control"] = compare(f["off2"], f["off"], "off2")
    print(json.dumps(summary, indent=2))


def compare(a, off, label):
    """`a` against `off`: medians, the ratio of the medians, and the per-round ratios."""
    ratios = [x / y for x, y in zip(a, off)]
    med_a, med_off = statistics.median(a), statistics.median(off)
    return {label: med_a, "off": med_off, f"{label}_over_off": round(med_a / med_off, 4),
            "round_ratio_median": round(statistics.median(ratios), 4),
            "round_ratio_min": round(min(ratios), 4), "round_ratio_max": round(max(ratios), 4),
            "round_ratio_median_ci90": median_interval(ratios)}


def median_interval(values, resamples=5000, seed=1):
    """A 90% bootstrap interval for the median of `values`: the 5th and 95th
    percentiles of the medians of `resamples` resamples drawn with replacement."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return [round(medians[int(0.05 * resamples)], 4), round(medians[int(0.95 * resamples) - 1], 4)]


if __name__ == "__main__":
    main()
