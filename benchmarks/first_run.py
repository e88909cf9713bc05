r"""Where a first ``python train.py`` spends its time: compile seconds per function, and a second
run from the persistent compilation cache.

    python benchmarks/first_run.py                      # configs/default.py, twice
    python benchmarks/first_run.py --args=--config=configs/default.py:dp

Runs ``train.py`` twice as a subprocess, each in a fresh workdir, sharing one fresh persistent
XLA cache directory (``--config.compilation_cache_dir``), with ``JAX_LOG_COMPILES=1``. For each
run it prints the wall time, the total XLA compile seconds and the slowest compiled functions
(from JAX's "Finished XLA compilation of <fn> in <s> sec" lines). The second run shows
what the persistent cache saves. Wall times depend on the machine's load: report the load
average with the numbers (printed).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPILE = re.compile(r"Finished XLA compilation of (\S+) in ([0-9.eE+-]+) sec")


def one_run(workdir: str, cache: str, extra: list[str]) -> dict:
    env = dict(os.environ, JAX_LOG_COMPILES="1")
    cmd = [sys.executable, os.path.join(ROOT, "train.py"), f"--workdir={workdir}",
           f"--config.compilation_cache_dir={cache}", "--config.tensorboard=False", *extra]
    start = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.time() - start
    if proc.returncode != 0:
        raise SystemExit(f"train.py failed:\n{proc.stderr[-3000:]}")
    per_fn = collections.defaultdict(float)
    for fn, sec in COMPILE.findall(proc.stderr + proc.stdout):
        per_fn[fn] += float(sec)
    return {"wall": wall, "compile": sum(per_fn.values()), "per_fn": per_fn}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--args", default="", help="extra train.py flags, one string")
    args = parser.parse_args()
    extra = shlex.split(args.args)
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "xla_cache")
        results = []
        for i in (1, 2):
            r = one_run(os.path.join(tmp, f"run{i}"), cache, extra)
            results.append(r)
            top = sorted(r["per_fn"].items(), key=lambda kv: -kv[1])[:6]
            print(f"run {i}: wall {r['wall']:.1f} s, XLA compile {r['compile']:.1f} s in "
                  f"{len(r['per_fn'])} functions; slowest: "
                  + ", ".join(f"{fn} {sec:.1f} s" for fn, sec in top))
        print(f"second / first wall: {results[1]['wall'] / results[0]['wall']:.2f}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
