"""benchmarks/step_parts.py compiles and times a piece of the step at the tiny size with random
weights (no torch needed), and refuses what it cannot run with a message that says what to do."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args):
    return subprocess.run([sys.executable, "benchmarks/step_parts.py", *args], cwd=ROOT,
                          capture_output=True, text=True)


@pytest.mark.slow
def test_forward_piece_compiles_and_times():
    """In bfloat16 products (``--compute_dtype``; float32, the default, is every other test's);
    the finalisation donated and not, in the same process."""
    proc = run("--size=tiny", "--weights=random", "--parts=forward,finalize,finalize-undonated",
               "--repeats=2", "--compute_dtype=bfloat16")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "random weights, bfloat16 products," in proc.stdout, proc.stdout
    row = re.search(r"^  forward +([\d.]+) +([\d.]+) +(\d+) +([\d.]+) +([\d.]+)$", proc.stdout,
                    re.M)
    assert row, proc.stdout
    lower_s, compile_s, fusions, peak_mib, median_ms = (float(v) for v in row.groups())
    assert compile_s > 0 and fusions > 0 and peak_mib > 0 and median_ms > 0, proc.stdout
    for part in ("finalize", "finalize-undonated"):
        assert re.search(rf"^  {part} +[\d.]+ +[\d.]+ +\d+ +[\d.]+ +[\d.]+$", proc.stdout,
                         re.M), proc.stdout
    assert "4 bands of banded noise, Adam" in proc.stdout, proc.stdout
    assert re.search(r"peak host memory \(RSS\) \d+ MiB", proc.stdout), proc.stdout


def test_unknown_part_is_refused():
    proc = run("--size=tiny", "--weights=random", "--parts=forward,backward")
    assert proc.returncode == 2 and "unknown --parts ['backward']" in proc.stderr, proc.stderr


def test_torchvision_weights_without_torch_say_what_to_install():
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError:
        proc = run("--size=tiny", "--parts=forward")
        assert proc.returncode == 2, proc.stderr
        assert "pip install -r requirements-bench.txt" in proc.stderr, proc.stderr
        assert "--weights=random" in proc.stderr, proc.stderr
    else:  # the benchmark environment: the converted weights load and the piece runs
        proc = run("--size=tiny", "--parts=forward", "--repeats=1")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "torchvision weights" in proc.stdout, proc.stdout
