#!/usr/bin/env python3
"""The sort of python_free_examples/sort.cc written for Dask, the peer a Python user
would pick, to compare with Manta on the same machine (README, "More data than the
store holds").

Written the way a Dask user writes it: M map tasks (dask.delayed, nout=R) each make
their share of 100-byte records from their index alone and return one numpy array per
key-range bucket; R reduce tasks each sort a column of buckets with numpy and return
a summary; the driver checks the record count, an order-independent checksum, that
each partition is sorted, and that partitions are in key order. It runs on a
LocalCluster of --workers processes of one thread each with --memory-per-worker
bytes (Dask spills to disk past its thresholds), and, in the same run, the same
functions in this process on one core. Prints one JSON object.

Needs Debian's python3-dask, python3-distributed and python3-numpy:
    apt-get install -y python3-dask python3-distributed python3-numpy
    /usr/bin/python3 bench/dask_sort.py --bytes 1073741824 --maps 24 --reduces 12
"""
import argparse
import json
import statistics
import sys
import tempfile
import time

try:
    import numpy as np
    import dask
    from dask.distributed import Client, LocalCluster
except ImportError as e:  # pragma: no cover - a clear message instead of a trace
    sys.exit(f"dask_sort: {e}; install python3-dask python3-distributed python3-numpy")

RECORD = 100
KEY = 10


def make_records(seed, records):
    """`records` records of map `seed`, deterministic."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(records, RECORD), dtype=np.uint8)


def checksum(recs):
    """Order-independent: the sum of each record's weighted byte sum, mod 2**64."""
    weights = (np.arange(RECORD, dtype=np.uint64) * np.uint64(0x9E3779B1) + np.uint64(1))
    return int((recs.astype(np.uint64) * weights).sum(dtype=np.uint64))


def map_task(seed, records, reduces):
    recs = make_records(seed, records)
    prefix = (recs[:, 0].astype(np.int64) << 8) | recs[:, 1]
    bucket = prefix * reduces // 65536
    order = np.argsort(bucket, kind="stable")
    bounds = np.searchsorted(bucket[order], np.arange(reduces + 1))
    parts = [recs[order[bounds[r]:bounds[r + 1]]] for r in range(reduces)]
    return tuple(parts) + ((records, checksum(recs)),)


def key_parts(recs):
    """A record's 10-byte key as two numbers: its first 8 bytes and its last 2."""
    hi = recs[:, :8].copy().view(">u8").ravel()
    lo = recs[:, 8:10].copy().view(">u2").ravel()
    return hi, lo


def reduce_task(*column):
    recs = np.concatenate(column) if column else np.empty((0, RECORD), np.uint8)
    hi, lo = key_parts(recs)
    order = np.lexsort((lo, hi))
    recs, hi, lo = recs[order], hi[order], lo[order]
    keys = recs[:, :KEY]
    ordered = bool(((hi[1:] > hi[:-1]) | ((hi[1:] == hi[:-1]) & (lo[1:] >= lo[:-1]))).all())
    first = bytes(keys[0]) if len(recs) else b""
    last = bytes(keys[-1]) if len(recs) else b""
    return len(recs), checksum(recs), ordered, first, last


def check(partitions, made, made_sum):
    records = sum(p[0] for p in partitions)
    total = sum(p[1] for p in partitions) % (1 << 64)
    if records != made:
        return f"{records} records sorted, {made} made"
    if total != made_sum % (1 << 64):
        return "the checksum of the sorted records differs from the one made"
    for j, p in enumerate(partitions):
        if not p[2]:
            return f"partition {j} is not sorted"
        if j and partitions[j - 1][0] and p[0] and partitions[j - 1][4] > p[3]:
            return f"partitions {j - 1} and {j} overlap"
    return ""


def sort_with_dask(maps, per_map, reduces):
    outs = [dask.delayed(map_task, nout=reduces + 1)(m, per_map, reduces) for m in range(maps)]
    reduced = [dask.delayed(reduce_task)(*[outs[m][r] for m in range(maps)]) for r in range(reduces)]
    summaries = [outs[m][reduces] for m in range(maps)]
    partitions, sums = dask.compute(reduced, summaries)
    return check(partitions, sum(s[0] for s in sums), sum(s[1] for s in sums))


def sort_on_one_core(maps, per_map, reduces):
    columns = [[] for _ in range(reduces)]
    made = made_sum = 0
    for m in range(maps):
        out = map_task(m, per_map, reduces)
        made += out[-1][0]
        made_sum += out[-1][1]
        for r in range(reduces):
            columns[r].append(out[r])
    partitions = []
    for r in range(reduces):
        partitions.append(reduce_task(*columns[r]))
        columns[r] = None
    return check(partitions, made, made_sum)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--maps", type=int, default=24)
    ap.add_argument("--reduces", type=int, default=12)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-per-worker", type=int, default=0, help="bytes; 0: no limit")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-one-core", action="store_true")
    a = ap.parse_args()
    per_map = a.bytes // RECORD // a.maps
    out = {"bytes": per_map * a.maps * RECORD, "maps": a.maps, "reduces": a.reduces, "workers": a.workers,
           "memory_per_worker": a.memory_per_worker, "runs": a.runs, "dask": dask.__version__}
    one_core = []
    if not a.no_one_core:
        for _ in range(a.runs):
            t0 = time.monotonic()
            problem = sort_on_one_core(a.maps, per_map, a.reduces)
            one_core.append(time.monotonic() - t0)
            if problem:
                sys.exit(f"dask_sort: the one-core sort is wrong: {problem}")
    problems, times = [], []
    with tempfile.TemporaryDirectory(prefix="dask_sort_") as spill:
        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                               memory_limit=a.memory_per_worker or None, local_directory=spill,
                               dashboard_address=None, host="127.0.0.1")
        with Client(cluster) as client:
            client.submit(sum, [1]).result()  # workers up
            for _ in range(a.runs + 1):  # the first warms up
                t0 = time.monotonic()
                try:
                    problem = sort_with_dask(a.maps, per_map, a.reduces)
                except Exception as e:  # a failed run is reported, not hidden
                    problem = f"{type(e).__name__}: {e}"
                times.append(time.monotonic() - t0)
                problems.append(problem)
        cluster.close()
    timed = times[1:]
    out["dask_s"] = statistics.median(timed)
    out["dask_runs_s"] = timed
    if one_core:
        out["one_core_s"] = statistics.median(one_core)
        out["speedup_over_one_core"] = out["one_core_s"] / out["dask_s"]
    out["problems"] = [p for p in problems if p]
    out["all_right"] = not out["problems"]
    print(json.dumps(out, indent=2))
    return 0 if out["all_right"] else 1


if __name__ == "__main__":
    sys.exit(main())
