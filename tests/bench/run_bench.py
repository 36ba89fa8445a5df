#!/usr/bin/env python3
"""The benchmark smoke run (CTest bench_smoke_*): runs one bench/ binary on a short
setting and fails unless it exits 0 and prints one JSON object whose figures are all
finite numbers. The figures themselves are not judged here (speed is measured with
bench/ab.py on a quiet machine, never asserted in tests).

usage: run_bench.py BINARY [ARGS...]
"""
import json
import math
import subprocess
import sys


def leaves(value, name=""):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from leaves(inner, f"{name}.{key}" if name else key)
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from leaves(inner, f"{name}[{i}]")
    else:
        yield name, value


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cmd = sys.argv[1:]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(out.stderr[-8000:])
    print(out.stdout)
    if out.returncode != 0:
        sys.exit(f"run_bench: {' '.join(cmd)} exited with {out.returncode}")
    try:
        result = json.loads(out.stdout)
    except json.JSONDecodeError as e:
        sys.exit(f"run_bench: the output is not JSON ({e})")
    if not isinstance(result, dict) or not result:
        sys.exit("run_bench: expected a non-empty JSON object")
    bad = [name for name, v in leaves(result)
           if not isinstance(v, (int, float, str)) or (isinstance(v, float) and not math.isfinite(v))]
    if bad:
        sys.exit(f"run_bench: figures that are not finite numbers: {bad}")
    numbers = [name for name, v in leaves(result) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not numbers:
        sys.exit("run_bench: no figure in the output")
    print(f"run_bench: {len(numbers)} figures", file=sys.stderr)


if __name__ == "__main__":
    main()
