"""benchmarks/gpu_suite.py runs end to end at the tiny size on the CPU (its GPU use is a device
flag): every part writes its section, and a part whose dependencies are missing says so."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Every row of ``--all``: (section, the row's first cells or its line's start)
FORWARD = [f"| {p} |" for p in ("float32", "tf32", "bfloat16")]
STEP = [f"| {p} | {m} | {fw} |" for m, ps in (("maskdp", ("bfloat16", "tf32", "float32")),
                                               ("nonprivate2", ("bfloat16", "tf32")),
                                               ("dp", ("bfloat16", "tf32")),
                                               ("nonprivate", ("bfloat16", "tf32")))
        for p in ps for fw in ("jax", "opacus")]
FULL = [f"| tf32 | maskdp | {fw} |" for fw in ("jax", "loop")]


def _sections(md: str) -> dict[str, str]:
    parts = ("forward", "step", "full", "cache", "data", "attention")
    assert [md.index(f"## {p}\n") for p in parts] == sorted(md.index(f"## {p}\n") for p in parts)
    bounds = [md.index(f"## {p}\n") for p in parts] + [len(md)]
    return {p: md[a:b] for p, a, b in zip(parts, bounds, bounds[1:], strict=False)}


def _has_every_row(md: str, forward=FORWARD) -> dict[str, str]:
    sec = _sections(md)
    for section, rows in (("forward", forward), ("step", STEP), ("full", FULL),
                          ("attention", ["| bfloat16 |"])):
        for row in rows:
            assert sec[section].count(row) == 1, (section, row, sec[section])
    return sec


def _main(monkeypatch, *argv):
    sys.path.insert(0, ROOT)
    from benchmarks import gpu_suite

    monkeypatch.setattr(sys, "argv", ["gpu_suite.py", *argv])
    gpu_suite.main()


def test_the_plan_of_all_has_every_section_and_row(tmp_path, monkeypatch):
    """``--all --dry_run`` writes the device line and date, every section and every row of the
    one device call (forward in three precisions; the step's four modes, ours and Opacus, in
    bfloat16 and TF32 and maskdp in float32; full fine-tuning; the cache in two dtypes; data),
    each with the command that measures it, in priority order."""
    out = tmp_path / "plan.md"
    _main(monkeypatch, "--all", "--dry_run", "--device=cpu", f"--out={out}")
    md = out.read_text()
    assert re.search(r"\(cpu\), \d+ CPUs; Python [\d.]+, jax [\d.]+", md), md[:300]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC, commit \w+", md), md[:300]
    sec = _has_every_row(md)
    assert md.count("dry run, not measured") == len(FORWARD) + len(STEP) + len(FULL) + 4
    assert "--worker=forward:bfloat16:einsum" in sec["attention"]
    assert sec["step"].index("| bfloat16 | maskdp | jax |") < sec["step"].index(
        "| tf32 | maskdp | jax |") < sec["step"].index("| bfloat16 | nonprivate2 |")
    assert "--compute_dtype=bfloat16 --worker=opacus:maskdp:selective" in sec["step"]
    assert "--precision=float32 --compute_dtype=float32 --worker=jax:maskdp:selective" in md
    assert sec["cache"].count("feature_cache") == 2 and "data_throughput" in sec["data"]


def test_a_row_that_does_not_fit_the_budget_is_skipped_with_a_line(tmp_path, monkeypatch):
    """With the budget spent every row says why it did not run (nothing is left out silently):
    the rows that need torch or the video packages where they are absent, the others that they
    do not fit, with the estimate and the seconds left."""
    out = tmp_path / "suite.md"
    _main(monkeypatch, "--all", "--budget_s=0", "--device=cpu", f"--out={out}")
    md = out.read_text()
    sec = _has_every_row(md)
    for section, row in [("forward", r) for r in FORWARD] + [("attention", "| bfloat16 |")]:
        assert re.search(re.escape(row) + r" skipped: needs ≈ \d+ s \(H100 estimate\), 0 s "
                         r"left of the 0 s budget", sec[section]), sec[section]
    for row in STEP + FULL:
        assert re.search(re.escape(row) + r" skipped: ", md), row
    assert sec["cache"].count("skipped: needs") == 2 and "skipped:" in sec["data"]


@pytest.mark.slow
@pytest.mark.heavy  # every row of the suite at the tiny size: 1 min
def test_gpu_suite_all_at_tiny_size_on_cpu(tmp_path):
    """The dry run of the device call: ``--all`` at the tiny size on the CPU runs every row's
    code (the step and full rows where torch, torchvision and opacus are installed; else each
    says so) and measures every row it runs. One forward precision and one cache dtype: each
    row is a fresh process (JAX's start and a compile), and the other precisions run the same
    code with another dtype or matmul-precision setting (the attention row runs the bfloat16
    forward; the plan of every row is the dry-run test's above)."""
    out = tmp_path / "suite.md"
    proc = subprocess.run(
        [sys.executable, "benchmarks/gpu_suite.py", "--all", "--size=tiny", "--device=cpu",
         "--steps=2", "--data_videos=2", "--cache_videos=8", "--budget_s=3000",
         "--forward_precisions=float32",
         "--cache_dtypes=float32",  # bfloat16 on the CPU is slow; its model is tested apart
         f"--out={out}", f"--cache_dir={tmp_path / 'xla'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    md = out.read_text()
    forward = ["| float32 |"]
    sec = _has_every_row(md, forward=forward)
    assert not any(row in sec["forward"] for row in FORWARD if row not in forward), sec["forward"]
    for section, row in [("forward", r) for r in forward] + [("attention", "| bfloat16 |")]:
        cells = re.search(re.escape(row) + r" ([\d.]+) \| ([\d.]+) \| ([\d.e+]+) \| "
                          r"([\d.e+-]+) \| - \(peak unknown\) \| (\d+) \|", sec[section])
        assert cells and all(float(v) > 0 for v in cells.groups()), sec[section]
    try:
        import opacus  # noqa: F401
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        for row in STEP + FULL:
            assert re.search(re.escape(row) + r" [\d.]+ \| [\d.]+ \| \d+ \| ", md), row
        assert re.search(r"\| opacus \| [\d.]+ \| [\d.]+ \| \d+ \| [\d.]+× \|", md), md
    except ImportError:
        assert md.count("pip install -r requirements-bench.txt") == len(STEP) + len(FULL), md
    cache = sec["cache"]
    assert re.search(r"\[ *\d+ s\] \| no cache \|.*epoch [\d.]+ s", cache), cache
    assert re.search(r"epoch speed-up with the cache: [\d.]+x", cache), cache
    for source in ("decord", "pyav", "store"):
        assert re.search(rf"\| {source} \| [\d.]+ \| [\d.]+ \| [\d.]+×", md), (source, md)
    assert re.search(r"Suite: \d+ s of the 3000 s budget", md)


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


@pytest.mark.parametrize("call", [1, 2])
def test_the_lease_plan_is_two_calls_of_priority_rows_each_cold_with_targets(
        call, tmp_path, monkeypatch):
    """``--lease``: call 1 times full fine-tuning's maskdp and nonprivate2 in one process (ghost
    norms, B = 128), then the bfloat16 forward and its einsum-attention ablation; call 2 the
    selective maskdp step with a profile, maskdp with einsum attention against Opacus, the
    two-view baseline, then step_parts in bfloat16. Every row compiles cold (its own caches).
    The targets table says "not measured" for what a call did not run (here: a dry run)."""
    sys.path.insert(0, ROOT)
    from benchmarks import gpu_suite

    out = tmp_path / "lease.md"
    _main(monkeypatch, "--lease", f"--lease_call={call}", "--dry_run", "--device=cpu",
          f"--out={out}")
    md = out.read_text()
    if call == 1:
        order = ["## full", "| bfloat16 | maskdp+nonprivate2 | jax |",
                 "--worker=jax:maskdp+nonprivate2:full --per_example=ghost", "## forward",
                 "| bfloat16 |", "## attention", "--worker=forward:bfloat16:einsum"]
        assert "--batch=128 --physical=16" in md and "--steps=3" in md
        assert "## step" not in md and "| opacus |" not in md
    else:
        order = ["## step", "| bfloat16 | maskdp | jax |", "profile",
                 "| bfloat16, einsum attention | maskdp | jax |", "--attention=einsum",
                 "| bfloat16, einsum attention | maskdp | opacus |",
                 "| bfloat16 | nonprivate2 | jax |", "## parts", "finalize-undonated",
                 "--compute_dtype=bfloat16"]
        assert md.count("--batch=128 --physical=32") == 4 and "## full" not in md
    order.append("## targets")
    at = 0
    for text in order:
        at = md.index(text, at) + len(text)
    assert "## cache" not in md and "| tf32 |" not in md and "| float32 |" not in md
    for name, *_ in gpu_suite.TARGETS:
        assert re.search(re.escape(name) + r" \| [<>]= [\d.]+( %)? \| not measured \| - \|", md)

    class Args:
        cache_dir = "/c"

    env = gpu_suite._cold_env({"XLA_FLAGS": "--xla_gpu_per_fusion_autotune_cache_dir=/c/autotune",
                               "JAX_COMPILATION_CACHE_DIR": "/c"}, Args, 3)
    assert env == {"XLA_FLAGS": "--xla_gpu_per_fusion_autotune_cache_dir=/c/row3/autotune",
                   "JAX_COMPILATION_CACHE_DIR": "/c/row3"}


def test_targets_are_marked_met_or_not_from_the_measured_medians():
    sys.path.insert(0, ROOT)
    from benchmarks import gpu_suite

    einsum = "bfloat16, einsum attention"
    done = {("step", einsum, "maskdp", "opacus"): {"median_s": 1.35},
            ("step", einsum, "maskdp", "jax"): {"median_s": 0.49},
            ("step", "bfloat16", "maskdp", "jax"): {"median_s": 0.49},
            ("step", "bfloat16", "nonprivate2", "jax"): {"median_s": 0.35},
            ("full", "bfloat16", "maskdp", "jax"): {"median_s": 3.0},
            ("forward", "bfloat16"): {"tflops": 197.9, "device_kind": "NVIDIA H200"}}
    table = gpu_suite.targets_section(done)
    assert "| >= 2.0 | 2.76× | met |" in table
    assert "| <= 1.15 | 1.40× | not met |" in table
    assert "one process | <= 1.15 | not measured | - |" in table
    assert "| >= 15.0 % | 20.0 % | met |" in table


def test_the_forward_row_counts_its_flops_on_the_host(monkeypatch):
    """The forward's FLOPs need no cost analysis from XLA (jax 0.11.2 on an H200 gave none):
    with none given, the row still counts the lowered program's products."""
    sys.path.insert(0, ROOT)
    import jax

    from benchmarks import gpu_suite

    monkeypatch.setattr(jax.stages.Lowered, "cost_analysis", lambda self: None)
    r = gpu_suite.forward_row("mvit_test", 5, 2, "float32", 1)
    assert r["gflop"] > 0 and r["tflops"] > 0, r
    row = gpu_suite.Row("forward", "float32", [], 0.0)
    assert re.match(r"\| float32 \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.e+-]+ \| - \(peak "
                    r"unknown\) \| \d+ \|", gpu_suite.format_row(row, r, {}))


def test_what_the_lease_carries_fits_the_device_call():
    """The tracked tree plus the lease's wheels (:file:`benchmarks/gpu_wheels.txt` less av and
    decord, whose row the lease skips; their sizes as fetched for cp312, 5.3 MB) stay under the
    64 MiB a device call takes along, with 8 MiB to spare for the tree's growth."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    tracked = sum(os.path.getsize(os.path.join(ROOT, f)) for f in files
                  if f and os.path.isfile(os.path.join(ROOT, f)))
    wheels = 5_268_600
    assert tracked + wheels <= 64 * 2**20 - 8 * 2**20, (tracked, wheels)


def test_a_profile_summarises_the_step_s_top_operations(tmp_path):
    """The lease's profile row on the CPU at the tiny size: two traced steps of our selective
    maskdp step, summarised by operation with the programs' names, their time share and the
    FLOPs and rates of the products read from the compiled HLO."""
    sys.path.insert(0, ROOT)
    import jax
    import optax

    from benchmarks import opacus_maskdp as bench

    size = dict(bench.SIZES["tiny"], preset="mvit_test")  # the smallest MViT: a short compile
    jmodel, trainable, frozen, apply_fn = bench.jax_setup(size, "selective", None)
    data = bench.make_data(n=size["batch"], input_size=jmodel.input_size,
                           classes=size["classes"], seed=1)
    batches = bench.jax_batches(data, size["physical"])
    tx = optax.sgd(0.1)
    run = bench.make_jax_step("maskdp", apply_fn=apply_fn, tx=tx,
                              cfg=bench.dp_config(size, jmodel, sigma=1.0, clip=1.0))
    holder = [bench.jax_state(trainable, frozen, tx)]
    holder[0], _ = run(holder[0], batches)
    jax.block_until_ready(holder[0])
    path = bench.profile(run, holder, batches, log_dir=str(tmp_path / "profile"))
    md = open(path).read()
    head = re.search(r"Traced operations: \d+, [\d.]+ ms of operation time per step, "
                     r"([\d.e+-]+) GFLOP of counted products per step", md)
    assert head and float(head.group(1)) > 0, md  # the dots found in the HLO of the programs
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \| ([\w-]+) \| ([\d.]+) % \| [\d.]+ \| "
                      r"([\d.e+-]+|-) \| ([\d.e+-]+|-) \|", md, re.M)
    assert len(rows) == 15, md
    assert {module for _, module, *_ in rows} <= {"jit_public_pass", "jit_private_pass",
                                                  "jit_finalize_step", "jit_zeros_accumulator"}
    assert int(holder[0].step) == 3  # the profiled steps are steps of the same run


def test_a_pair_of_modes_is_timed_in_one_process_alternating():
    """The lease's full fine-tuning ratio, maskdp / nonprivate2, comes from one process: both
    steps compiled, then timed in turn."""
    sys.path.insert(0, ROOT)
    from benchmarks import opacus_maskdp as bench

    size = dict(bench.SIZES["tiny"], preset="mvit_test", batch=4, physical=4)
    out = bench.time_pair(["maskdp", "nonprivate2"], "selective", size, steps=2, warmup=1,
                          device="cpu", microbatch=None)
    for mode in ("maskdp", "nonprivate2"):
        r = out["modes"][mode]
        assert r["steps"] == 2 and 0 < r["min_s"] <= r["median_s"] <= r["max_s"], r
        assert r["first_step_s"] > 0
