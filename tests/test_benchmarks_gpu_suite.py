"""benchmarks/gpu_suite.py runs end to end at the tiny size on the CPU (its GPU use is a device
flag): every part writes its section, and a part whose dependencies are missing says so."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_gpu_suite_at_tiny_size_on_cpu(tmp_path):
    out = tmp_path / "suite.md"
    proc = subprocess.run(
        [sys.executable, "benchmarks/gpu_suite.py", "--size=tiny", "--device=cpu",
         "--parts=forward,step,cache,data", "--steps=2", "--data_videos=2", "--cache_videos=8",
         "--cache_dtypes=float32",  # bfloat16 on the CPU is slow; its model is tested apart
         f"--out={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = out.read_text()
    assert md.index("## forward") < md.index("## step") < md.index("## cache") < md.index(
        "## data")
    cache = md[md.index("## cache"):md.index("## data")]
    assert re.search(r"float32 compute\n\[ *\d+ s\] \| no cache \|.*epoch [\d.]+ s", cache), cache
    assert re.search(r"epoch speed-up with the cache: [\d.]+x", cache), cache
    assert "GFLOP per call (XLA cost analysis, lowered)" in md, md
    row = re.search(r"\| ([\d.]+) \| ([\d.]+) \| ([\d.e+-]+) \| ([\d.e+-]+) \| - \(give", md)
    assert row and all(float(v) > 0 for v in row.groups()), md
    step = md[md.index("## step"):md.index("## data")]
    try:
        import opacus  # noqa: F401
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        assert "| selective | maskdp |" in step, step
    except ImportError:
        assert "skipped:" in step and "pip install -r requirements-bench.txt" in step, step
    for source in ("decord", "pyav", "store"):
        assert re.search(rf"\| {source} \| [\d.]+ \| [\d.]+ \| [\d.]+×", md), (source, md)


def test_a_worker_s_lines_reach_the_file_as_printed_and_a_failure_is_kept(tmp_path):
    """What a device call cut off by its time limit relies on: each line a worker prints is in
    ``--out`` before the worker ends (here: the file is read while the worker still waits), and
    a failing worker's output and exit status stay in the file."""
    sys.path.insert(0, ROOT)
    import threading

    from benchmarks import gpu_suite

    out = tmp_path / "suite.md"
    flag = tmp_path / "seen"
    # The worker prints, then waits until the test has seen its line in the file (exit 3), or
    # gives up after 300 s (exit 4: the line did not reach the file while the worker ran).
    worker = ("import os, sys, time; print('measured', 1.5, 'ms', flush=True)\n"
              "t = time.time()\n"
              f"while not os.path.exists({str(flag)!r}) and time.time() - t < 300:\n"
              "    time.sleep(0.05)\n"
              f"print('boom', file=sys.stderr); sys.exit(3 if os.path.exists({str(flag)!r}) "
              "else 4)")
    done = threading.Event()

    def watch():
        while not done.is_set():
            if "measured 1.5 ms" in (out.read_text() if out.exists() else ""):
                flag.touch()
                return
            done.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    status = gpu_suite._run([sys.executable, "-c", worker], env=dict(os.environ), out=str(out))
    done.set()
    md = out.read_text()
    assert "FAILED (exit 3)" in status
    assert re.search(r"\[ *\d+ s\] measured 1.5 ms\n", md), md
    assert "boom" in md and "FAILED (exit 3)" in md, md
