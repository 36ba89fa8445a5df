#!/usr/bin/env python3
"""A/B: the benchmarks of two builds, interleaved, with new/base medians.

Use it before merging anything on a hot path (the task, actor, object or start-up
paths): this machine's speed drifts by 10-30% from run to run and from day to day, so
a figure is only worth comparing with its base measured in the same session,
interleaved. Each round runs every benchmark once with each build, alternating which
build goes first; each run starts its own cluster. Prints one JSON line per run, then
a table: for every figure the base and new medians with their ranges (min-max over
rounds), new/base of the medians, and the median of the per-round ratios (which
cancels slow drift). Figures ending in _s, _ms, _us or _ns are times: lower is better.

  bench/ab.py --base-rev 06e64e2 [--new build] [--rounds 5] [--set default|quick] [bench:name ...]
  bench/ab.py --base /path/to/other/build ...
  bench/ab.py --from-log ab.log          # the table again, from an earlier run's output

--base-rev REV builds REV (library, daemons, CLI, benchmarks; no tests) in a git
worktree under build-ab/REV (kept for the next run; ccache helps). --new defaults to
./build. Benchmarks are given as binary:name (task_bench:single_client_tasks_sync),
binary:section for scale_bench, or a bare binary for all it prints; --set picks a
default list. A run that fails is reported and left out of that round.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# binary -> (figures or sections asked with --only, extra arguments)
SETS = {
    "default": {
        "task_bench": (["single_client_tasks_sync", "single_client_tasks_async", "multi_client_tasks_async",
                        "single_client_put_calls_Plasma_Store", "single_client_get_calls_Plasma_Store",
                        "single_client_put_gigabytes", "init_shutdown_local_cluster_s"], ["--seconds", "2"]),
        "actor_bench": (["1_1_actor_calls_sync", "1_1_actor_calls_async", "n_n_actor_calls_async",
                         "actor_creations_per_s"], ["--seconds", "2"]),
        "scale_bench": (["stalls", "startup"], ["--runs", "3"]),
        "object_store_bench": ([], ["--transfer-rounds", "3"]),
        "futures_bench": (["async_actor", "await_tasks_per_s"], ["--seconds", "2"]),
    },
    "quick": {
        "task_bench": (["single_client_tasks_sync", "single_client_tasks_async", "init_shutdown_local_cluster_s"],
                       ["--seconds", "1"]),
        "actor_bench": (["1_1_actor_calls_async", "actor_creations_per_s"], ["--seconds", "1", "--creations", "30"]),
    },
}
# Binaries that take --only (the others run whole with their extra arguments).
TAKES_ONLY = {"task_bench", "actor_bench", "scale_bench", "futures_bench"}


def build_rev(rev):
    """Builds `rev` in a worktree under build-ab/ and returns its build directory."""
    sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", rev], check=True, stdout=subprocess.PIPE,
                         text=True).stdout.strip()
    tree = os.path.join(ROOT, "build-ab", sha)
    if not os.path.isdir(tree):
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", tree, sha], check=True)
    subprocess.run([os.path.join(tree, "scripts", "build"), "-DMANTA_BUILD_TESTS=OFF"], check=True)
    return os.path.join(tree, "build")


def flatten(value, prefix=""):
    """Numbers of a benchmark's JSON, nested objects as dotted names."""
    if isinstance(value, bool):
        return {}
    if isinstance(value, (int, float)):
        return {prefix: float(value)}
    if isinstance(value, dict):
        out = {}
        for key, inner in value.items():
            out.update(flatten(inner, f"{prefix}.{key}" if prefix else key))
        return out
    return {}


def run(build, binary, names, extra, timeout_s):
    cmd = [os.path.join(build, "bench", binary)] + extra
    if names and binary in TAKES_ONLY:
        cmd += ["--only", ",".join(names)]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout_s)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {out.returncode}: {out.stderr[-2000:]}")
    return flatten(json.loads(out.stdout))


def lower_is_better(name):
    """Times (_s, _ms, _us, _ns) are better lower; rates (..._per_s) higher."""
    last = name.split(".")[-1].split(":")[-1]
    return last.endswith(("_ms", "_us", "_ns")) or (last.endswith("_s") and not last.endswith("_per_s"))


def summarize(figures):
    rows = []
    for name in sorted(figures):
        base, new = figures[name]["base"], figures[name]["new"]
        if not base or not new:
            continue
        rounds = [n / b for b, n in zip(figures[name]["base_by_round"], figures[name]["new_by_round"])
                  if b is not None and n is not None and b != 0]
        med_b, med_n = statistics.median(base), statistics.median(new)
        rows.append({
            "figure": name, "base": med_b, "base_range": [min(base), max(base)], "new": med_n,
            "new_range": [min(new), max(new)], "new_over_base": med_n / med_b if med_b else None,
            "round_ratio_median": statistics.median(rounds) if rounds else None,
            "lower_is_better": lower_is_better(name), "rounds": len(rounds)})
    return rows


def print_table(rows, base_label, new_label):
    def fmt(x, spec=".4g"):
        return format(x, spec) if isinstance(x, (int, float)) else "n/a"
    print(f"\n| figure | base ({base_label}) | new ({new_label}) | new / base | per-round median |")
    print("|---|---|---|---|---|")
    for r in rows:
        arrow = " (lower is better)" if r["lower_is_better"] else ""
        print(f"| `{r['figure']}`{arrow} | {fmt(r['base'])} ({fmt(r['base_range'][0])}-{fmt(r['base_range'][1])}) "
              f"| {fmt(r['new'])} ({fmt(r['new_range'][0])}-{fmt(r['new_range'][1])}) "
              f"| {fmt(r['new_over_base'], '.3f')} | {fmt(r['round_ratio_median'], '.3f')} |")


def record_round(figures, results):
    """Adds one round's {"base": {name: value}, "new": {...}} to `figures`."""
    for name in set(results["base"]) | set(results["new"]):
        f = figures.setdefault(name, {"base": [], "new": [], "base_by_round": [], "new_by_round": []})
        for which in ("base", "new"):
            value = results[which].get(name)
            if value is not None:
                f[which].append(value)
            f[which + "_by_round"].append(value)


def figures_from_log(path):
    """The figures of the per-run JSON lines an earlier run printed."""
    figures, rounds = {}, {}
    for line in open(path):
        try:
            run = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "round" not in run or "failed" in run:
            continue
        results = rounds.setdefault(run["round"], {"base": {}, "new": {}})
        binary = run["binary"]
        values = {k: v for k, v in run.items() if k not in ("round", "build", "binary")}
        results[run["build"]].update({f"{binary}:{k}": v for k, v in flatten(values).items()})
    for round_no in sorted(rounds):
        record_round(figures, rounds[round_no])
    return figures


def parse_benches(args):
    if not args.benches:
        return SETS[args.set]
    chosen = {}
    for bench in args.benches:
        binary, _, name = bench.partition(":")
        names, extra = chosen.setdefault(binary, ([], list(SETS["default"].get(binary, ([], []))[1])))
        if name:
            names.append(name)
    return chosen


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--new", default=os.path.join(ROOT, "build"), help="build directory of the change")
    parser.add_argument("--base", help="build directory of the base")
    parser.add_argument("--base-rev", help="git revision to build as the base (in build-ab/)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--set", choices=sorted(SETS), default="default")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one benchmark run may take")
    parser.add_argument("--from-log", help="summarize the JSON lines of an earlier run instead of running")
    parser.add_argument("benches", nargs="*")
    args = parser.parse_args()
    if args.from_log:
        figures = figures_from_log(args.from_log)
        rows = summarize(figures)
        print_table(rows, "base", "new")
        return 0
    if bool(args.base) == bool(args.base_rev):
        parser.error("give exactly one of --base and --base-rev")
    base = args.base or build_rev(args.base_rev)
    builds = {"base": base, "new": args.new}
    benches = parse_benches(args)
    figures = {}
    for round_no in range(args.rounds):
        order = ("base", "new") if round_no % 2 == 0 else ("new", "base")
        results = {"base": {}, "new": {}}
        for binary, (names, extra) in benches.items():
            for which in order:
                try:
                    got = run(builds[which], binary, names, extra, args.timeout)
                except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
                    print(json.dumps({"round": round_no, "build": which, "binary": binary, "failed": str(e)[:500]}),
                          flush=True)
                    continue
                results[which].update({f"{binary}:{k}": v for k, v in got.items()})
                print(json.dumps({"round": round_no, "build": which, "binary": binary, **got}), flush=True)
        record_round(figures, results)
    rows = summarize(figures)
    print(json.dumps({"summary": rows}), flush=True)
    print_table(rows, args.base_rev or base, args.new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
