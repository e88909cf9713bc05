"""Committed training studies reproduce: one cheap seeded run of each, equal to its fixture.

Each committed study under docs/results/ (``default``: the README headline, ``multiclip``,
``context``) is a sweep config; this test takes one run of each sweep's grid (named in
``tests/fixtures/reproduce.json``), shrinks it to a few steps of the tiny preset on a few videos
(the fixture's ``overrides``, the same for every study), trains it in this process and requires
the report's numbers to be *exactly* the fixture's: every logged loss, σ, ε and the test metrics.
A change to the noise, the sampler, the clip offsets, the data generator or the model that moves
any result therefore fails here, and is then made deliberately: regenerate the fixture with

    MASKDP_WRITE_REPRODUCE=1 python -m pytest -q tests/test_reproduce.py

and the committed results with the commands in each results directory.

Exact equality holds for one JAX/XLA version on one CPU kind with this suite's XLA flags
(tests/conftest.py); the fixture records the versions it was written with, and the test says so
when they differ instead of reporting a spurious change.
"""

from __future__ import annotations

import hashlib
import json
import os

import jax
import jaxlib
import numpy as np
import pytest

import sweep
import train
from configs import sweep_context, sweep_multiclip, sweep_synthetic

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "reproduce.json")
# One run of each study's grid: the sweep config and the run's name in sweep.grid.
STUDIES = {
    "default": (sweep_synthetic, "configs/sweep_synthetic.py", "maskdp_eps1_k1_seed0"),
    "multiclip": (sweep_multiclip, "configs/sweep_multiclip.py", "dp_eps1_k2_seed0"),
    "context": (sweep_context, "configs/sweep_context.py",
                "nonprivate_epsinf_k1_seed0_background"),
}
# The sweep keys that narrow each study's grid to (about) that run, for the fixture's command.
NARROW = {
    "default": "--config.sweep.modes='(\"maskdp\",)' --config.sweep.epsilons='(1.0,)' "
               "--config.sweep.seeds='(0,)'",
    "multiclip": "--config.sweep.modes='(\"dp\",)' --config.sweep.clips='(2,)' "
                 "--config.sweep.seeds='(0,)'",
    "context": "--config.sweep.views='(\"background\",)' --config.sweep.seeds='(0,)'",
}
# Tiny: 4 logical steps of 8 videos on the test preset (δ below 1/N).
OVERRIDES = {
    "model.name": "mvit_test", "input.num_train": 32, "input.num_test": 16,
    "batch_size": 8, "physical_batch_size": 8, "num_epochs": 1.0, "privacy.delta": 1e-3,
    "log_every_steps": 1, "tensorboard": False, "compilation_cache_dir": "",
}
WRITE = os.environ.get("MASKDP_WRITE_REPRODUCE") == "1"


def study_run(study: str):
    """The run config of ``study``'s chosen run, shrunk by :data:`OVERRIDES`."""
    module, _, name = STUDIES[study]
    runs = dict(sweep.grid(module.get_config()))
    config = runs[name]
    for key, value in OVERRIDES.items():
        sweep._override(config, key, value, variant="reproduce")
    return config


def command(study: str) -> str:
    """The sweep command that trains the fixture's run (one seed, one ε/K/view of the grid)."""
    _, path, name = STUDIES[study]
    keys = " ".join(f"--config.base.{k}={v!r}" if isinstance(v, str) else f"--config.base.{k}={v}"
                    for k, v in OVERRIDES.items())
    return (f"XLA_FLAGS='{os.environ.get('XLA_FLAGS', '')}' python sweep.py --config={path} "
            f"--workdir=DIR {NARROW[study]} {keys}  # the run {name}")


def numbers(report: dict, logits: np.ndarray) -> dict:
    """What must reproduce: the logged losses, σ, ε, the test metrics and the test logits (their
    sha256 and sum: a dp run logs no loss, and a few test videos' top-1 moves by whole videos
    only, so the logits are what shows any change of the trained weights)."""
    losses = [{k: v for k, v in h.items() if k.endswith("loss") or k in ("step", "epsilon")}
              for h in report["history"]]
    return {
        "history": losses,
        "noise_multiplier": report["privacy"]["noise_multiplier"],
        "epsilon_pld": report["privacy"]["epsilon_pld"],
        "top1": report["metrics"]["top1"],
        "mean_class_accuracy": report["metrics"]["mean_class_accuracy"],
        "per_class_accuracy": report["metrics"]["per_class_accuracy"],
        "test_logits_sha256": hashlib.sha256(np.ascontiguousarray(logits, np.float32)
                                             .tobytes()).hexdigest(),
        "test_logits_sum": float(np.sum(logits, dtype=np.float64)),
    }


def _cpu() -> str:
    """The CPU model (XLA:CPU's code, hence the last bits of a float, may depend on it)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name")), "unknown")
    except OSError:
        return "unknown"


def versions() -> dict:
    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "cpu": _cpu(),
            "xla_flags": os.environ.get("XLA_FLAGS", "")}


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory):
    """Every study's run trained once in this process (the studies share compiled pieces)."""
    out = {}
    predict = train.evaluation.predict
    seen = []

    def recording(*args, **kwargs):  # the full-view test logits: evaluate's first prediction
        logits = predict(*args, **kwargs)
        seen.append(np.asarray(logits))
        return logits

    train.evaluation.predict = recording
    try:
        for study in STUDIES:
            workdir = str(tmp_path_factory.mktemp(study))
            seen.clear()
            report = train.train_and_evaluate(study_run(study), workdir)
            out[study] = numbers(report, seen[0])
    finally:
        train.evaluation.predict = predict
    if WRITE:
        with open(FIXTURE, "w") as f:
            json.dump({"about": "tests/test_reproduce.py: one tiny seeded run of each committed "
                                "study; regenerate deliberately (its docstring)",
                       "versions": versions(), "overrides": OVERRIDES,
                       "studies": {s: {"run": STUDIES[s][2], "command": command(s),
                                       "numbers": out[s]} for s in STUDIES}},
                      f, indent=1)
            f.write("\n")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("study", list(STUDIES))
def test_study_reproduces_exactly(study, reproduced):
    if not os.path.isfile(FIXTURE):
        pytest.fail(f"{FIXTURE} is missing: write it with MASKDP_WRITE_REPRODUCE=1 python -m "
                    "pytest -q tests/test_reproduce.py")
    with open(FIXTURE) as f:
        fixture = json.load(f)
    expected = fixture["studies"][study]
    assert expected["run"] == STUDIES[study][2] and fixture["overrides"] == OVERRIDES, (
        "the fixture was written for other runs or sizes; regenerate it (module docstring)")
    got = json.loads(json.dumps(reproduced[study]))  # the fixture's float round trip
    if got != expected["numbers"] and fixture["versions"] != versions():
        pytest.fail(f"{study}: results differ, and the fixture was written with "
                    f"{fixture['versions']}, this run uses {versions()}: exact equality is only "
                    "promised for one JAX/XLA build; regenerate the fixture on this one.")
    assert got == expected["numbers"], (
        f"{study} ({expected['command']}) no longer reproduces its committed numbers: something "
        "changed the noise, the sampler, the data or the model. If deliberate, regenerate the "
        "fixture and the committed results (module docstring).")
    assert got["test_logits_sum"] != 0.0 and len(got["history"]) == 4
