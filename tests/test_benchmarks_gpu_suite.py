"""benchmarks/gpu_suite.py runs end to end at the tiny size on the CPU (its GPU use is a device
flag): every part writes its section, and a part whose dependencies are missing says so."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    assert re.search(r"float32 compute\n\| no cache \|.*epoch [\d.]+ s", cache), cache
    assert re.search(r"epoch speed-up with the cache: [\d.]+x", cache), cache
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
