"""Preemption: SIGTERM, then kill -9 a train.py run at random steps, rerun it, and get the
uninterrupted result.

The train.py subprocesses (SIGTERM'd; its copy run to the end uninterrupted; resumed then
kill -9'd; resumed to the end) share one persistent compilation cache, so only the first
compiles. The model is the tiny MViTv2 preset with a linear probe (smallest compile). The privacy
journal must cover every released step. The kill test runs in secret mode, where the
uninterrupted run is a copy of the broken one's workdir (its secret); the set-up test in seeded
mode.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from maskdp_jax import train
from maskdp_jax.run import checkpoint
from maskdp_jax.run import journal as journal_lib

pytestmark = pytest.mark.slow  # every test here trains, audits or compiles a model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 6
# Time limits guard against a hang only: a busy 2-core machine may take minutes per run.
HANG = 1800


def _cmd(workdir, cache, randomness="seeded", every_steps=1):
    return [
        sys.executable, os.path.join(ROOT, "train.py"), f"--workdir={workdir}",
        "--config.model.name=mvit_test", "--config.model.init_from=", "--config.input.num_train=32",
        "--config.input.num_test=8", "--config.batch_size=8", "--config.physical_batch_size=8",
        f"--config.num_epochs={STEPS * 8 / 32}", "--config.log_every_steps=1",
        "--config.privacy.delta=1e-3", "--config.privacy.noise_multiplier=1.0",
        f"--config.checkpoint.every_steps={every_steps}", "--config.checkpoint.keep=2",
        "--config.tensorboard=False", "--config.model.finetune=linear",
        f"--config.compilation_cache_dir={cache}",
        f"--config.privacy.randomness={randomness}",
    ]


def _env():
    env = dict(os.environ, JAX_PLATFORMS="cpu")  # with the session's XLA_FLAGS (conftest.py)
    return env


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One persistent XLA cache for both tests (same programs: the noise key is an argument)."""
    return tmp_path_factory.mktemp("xla_cache")


def _run_until(workdir, cache, logged_steps, sig, randomness="seeded", every_steps=1):
    """Start train.py, send ``sig`` once ``logged_steps`` metric lines exist; return its code."""
    proc = subprocess.Popen(_cmd(workdir, cache, randomness, every_steps), env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + HANG
    while time.time() < deadline and proc.poll() is None:
        if (workdir / "metrics.jsonl").exists() and len(_logged_steps(workdir)) >= logged_steps:
            os.kill(proc.pid, sig)
            break
        time.sleep(0.02)
    assert proc.wait(timeout=HANG) is not None
    assert proc.returncode != 0, "finished before the signal"
    return proc.returncode


def _final_params(workdir):
    ckpt = checkpoint.Checkpointer(str(workdir), keep=2)
    try:
        step, state, meta = ckpt.read_latest()
    finally:
        ckpt.close()
    return step, state["trainable"], meta


def _logged_steps(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line)["step"] for line in f if line.strip()]


def jax_leaves(tree):
    import jax

    return jax.tree.leaves(tree)


def test_kill9_and_resume_equals_uninterrupted_and_restores_the_secret(tmp_path, cache):
    """Secret mode (the default): a SIGTERM'd run's workdir is copied; the copy runs to the end
    uninterrupted, the original is resumed, kill -9'd at a random later step and resumed again:
    both end bit-identical, with the same ledger, privacy block and history (the secret is
    restored from the checkpoint, so re-executed steps are the same). Nothing the run publishes
    or prints holds the secret."""
    clean, broken = tmp_path / "clean", tmp_path / "broken"
    rng = np.random.default_rng()
    term_at = int(rng.integers(1, STEPS - 2))
    # Checkpoint and stop on SIGTERM, with the "try again" status (not 0: not finished).
    assert _run_until(broken, cache, term_at, signal.SIGTERM, "secret") == \
        train.PREEMPTED_EXIT_CODE == 75
    step_term, _, meta_term = _final_params(broken)
    assert step_term >= term_at  # checkpointed at the step boundary after the signal
    secret = meta_term["randomness"]["secret"]
    assert meta_term["randomness"]["mode"] == "secret" and len(secret) > 16
    shutil.copytree(broken, clean)
    out_clean = subprocess.run(_cmd(clean, cache, "secret"), env=_env(), check=True,
                               capture_output=True, text=True, timeout=HANG)

    kill_at = int(rng.integers(step_term + 1, STEPS))  # a random later step, logged
    assert _run_until(broken, cache, kill_at, signal.SIGKILL, "secret") == -signal.SIGKILL
    # Every released step (logged line, checkpoint) is in the journal written before it.
    assert journal_lib.read_ledger_journal(str(broken)).steps >= max(_logged_steps(broken)) \
        >= kill_at
    out_broken = subprocess.run(_cmd(broken, cache, "secret"), env=_env(), check=True,
                                capture_output=True, text=True, timeout=HANG)

    step_a, params_a, meta_a = _final_params(clean)
    step_b, params_b, meta_b = _final_params(broken)
    assert step_a == step_b == STEPS
    assert meta_a["randomness"] == meta_b["randomness"] == meta_term["randomness"]
    for a, b in zip(jax_leaves(params_a), jax_leaves(params_b), strict=True):
        np.testing.assert_array_equal(a, b)  # same host: same batches, same noise keys
    # The ledger counts every executed step once (re-executed steps are identical).
    assert meta_b["ledger"] == meta_a["ledger"]
    assert journal_lib.read_ledger_journal(str(broken)).steps == STEPS
    # The outputs equal an uninterrupted run's: the privacy block and the whole history, each
    # step logged once (steps re-executed after the kill are not duplicated), timing aside.
    report_a = json.loads((clean / "report.json").read_text())
    report_b = json.loads((broken / "report.json").read_text())
    assert report_b["privacy"] == report_a["privacy"]

    def untimed(rows):
        return [{k: v for k, v in r.items() if k != "steps_per_second"} for r in rows]

    assert [r["step"] for r in report_b["history"]] == list(range(1, STEPS + 1))
    assert untimed(report_b["history"]) == untimed(report_a["history"])
    assert _logged_steps(broken) == _logged_steps(clean) == list(range(1, STEPS + 1))

    # The secret is in the checkpoints only: not in the report, metrics, journal or output.
    forms = [secret, secret.upper(), str(int(secret, 16)), json.dumps(meta_b["noise_key"])]
    published = [out_clean.stdout + out_clean.stderr, out_broken.stdout + out_broken.stderr]
    for name in ("report.json", "report.md", "metrics.jsonl", journal_lib.JOURNAL):
        published.append((broken / name).read_text())
    for text in published:
        for form in forms:
            assert form not in text
    assert json.loads((broken / "report.json").read_text())["privacy"]["randomness"] == "secret"


def test_secret_mode_kill9_before_the_first_periodic_checkpoint_resumes(tmp_path, cache):
    """Secret mode, killed before the first periodic checkpoint (at the last step here): the
    secret was checkpointed at step 0, before any release, so the rerun resumes with it (the
    journal's steps are re-executed identically) instead of drawing a new secret (refused)."""
    workdir = tmp_path / "run"
    kill_at = int(np.random.default_rng().integers(1, STEPS))
    assert _run_until(workdir, cache, kill_at, signal.SIGKILL, "secret", every_steps=STEPS) \
        == -signal.SIGKILL
    step0, _, meta0 = _final_params(workdir)
    assert step0 == 0 and meta0["randomness"]["mode"] == "secret"
    assert journal_lib.read_ledger_journal(str(workdir)).steps >= kill_at
    subprocess.run(_cmd(workdir, cache, "secret", every_steps=STEPS), env=_env(), check=True,
                   capture_output=True, timeout=HANG)
    step, _, meta = _final_params(workdir)
    assert step == STEPS and meta["randomness"] == meta0["randomness"]
    assert journal_lib.read_ledger_journal(str(workdir)).steps == STEPS


def test_sigterm_during_set_up_stops_before_the_first_step(tmp_path, cache):
    """Issue 19, item 7: a SIGTERM after the model is built (while the run sets up, before its
    first step compiles) is honoured before step 1: checkpoint at step 0, status 75; the rerun
    resumes and finishes."""
    workdir = tmp_path / "run"
    proc = subprocess.Popen(_cmd(workdir, cache), env=dict(_env(), PYTHONUNBUFFERED="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:  # "Model mvit_test: ..." is printed once the handler is installed
        if line.startswith("Model "):
            os.kill(proc.pid, signal.SIGTERM)
            break
    out, _ = proc.communicate(timeout=HANG)
    assert proc.returncode == train.PREEMPTED_EXIT_CODE, out[-3000:]  # was killed: -15
    step, _, _ = _final_params(workdir)
    # Normally before step 1; on a machine so loaded that the signal lands only once the first
    # step is compiling, right after that step (the next safe point).
    if step == 0:
        assert "SIGTERM before step 1: checkpointed step 0" in out
        assert not (workdir / "metrics.jsonl").read_text().strip()
    else:
        assert step == 1 and "SIGTERM: checkpointed step 1" in out
    subprocess.run(_cmd(workdir, cache), env=_env(), check=True, capture_output=True, timeout=HANG)
    assert _final_params(workdir)[0] == STEPS
    assert journal_lib.read_ledger_journal(str(workdir)).steps == STEPS
