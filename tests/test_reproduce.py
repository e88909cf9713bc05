"""Committed training studies reproduce: one cheap run of each, equal to its fixture.

Each committed training study under docs/results/ is a sweep config or a ``train.py`` command;
this test takes one run of each (:data:`STUDIES`, named in ``tests/fixtures/reproduce.json``),
chosen for the code path that is the study's point:

* ``default`` (the README headline, the default setting's ε grid): maskdp at ε = 1, seeded, with
  public backgrounds in the hidden cells; ``synthetic`` (the earlier default's ε grid): maskdp at
  ε = 1 with the fixed texture;
* ``context``: the non-private run on the background view;
* ``multiclip_pretrain``: the non-private public pre-training on other videos (``data_seed``),
  exported without its head as ``python -m maskdp_jax.export --drop_head`` does;
* ``multiclip_segment``: dp with K = 2 clips of segment-cue videos, ``norms`` fine-tuning from
  that export (``model.init_from``; the committed init is an mvit_cpu one, the test's is the
  tiny preset's, from the run above);
* ``precision``: its bfloat16 run; ``spread``: the default run in secret randomness;
  ``robustness``: its halved learning rate, also in secret randomness. Secret runs draw a fresh
  secret, so the test pins it (:data:`SECRET`): the secret-derived noise key and batch seeds
  are checked, not the secret's draw.

Each run is shrunk to a few steps of the tiny preset on a few videos (the fixture's
``overrides``, the same for every study), trained in this process, and the report's numbers must
be *exactly* the fixture's: every logged loss, σ, ε, the test metrics and the test logits. A
change to the noise, the sampler, the clip offsets, the data generator, the model, the bfloat16
cast or the export/restore of an init that moves any result therefore fails here, and is then
made deliberately: regenerate the fixture with

    MASKDP_WRITE_REPRODUCE=1 python -m pytest -q -m heavy tests/test_reproduce.py

and the committed results with the commands in each results directory.

Cost: the runs share compiled programs through the session's persistent compilation cache
(tests/conftest.py): runs of the same mode, shapes and constants compile once (spread after
default; robustness recompiles only the optimiser update, whose learning rate is a constant of
the program, where a clip-norm variant would recompile the per-example gradients). The sizes
are tests/test_train_e2e.py's (16 videos a step, 64 training videos), so its maskdp and
nonprivate runs find this file's programs in the cache, and the reverse.

Exact equality holds for one JAX/XLA version on one CPU kind with this suite's XLA flags
(tests/conftest.py); the fixture records the versions it was written with, and the test says so
when they differ instead of reporting a spurious change.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os

import numpy as np
import pytest

from maskdp_jax import randomness, sweep, train
from maskdp_jax.reporting import results
from maskdp_jax.run import checkpoint

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "reproduce.json")


@dataclasses.dataclass(frozen=True)
class Study:
    """One committed study and the run of it that the test trains.

    Attributes:
      config: its config file: a sweep config (``python -m maskdp_jax.sweep``) or a training
        config (``train.py``).
      run: the run's name in ``sweep.grid`` of a sweep config; "" for a training config.
      keys: ``((dotted key, value), ...)`` of the training config that its results' command sets
        (a training config's ``--config.<key>``); none for a sweep, whose grid sets them.
      narrow: the sweep's command-line keys that narrow its grid to (about) the run.
      secret: the study runs with secret randomness; the test pins the secret (:data:`SECRET`).
      init_from: a study whose run's final parameters, exported without the head as the study
        exports them (``python -m maskdp_jax.export --drop_head``), are this run's
        ``model.init_from``; that study must come first in :data:`STUDIES`.
    """

    config: str
    run: str = ""
    keys: tuple = ()
    narrow: str = ""
    secret: bool = False
    init_from: str = ""


# One run of each committed training study under docs/results/, chosen for the code path that is
# the study's point.
STUDIES = {
    # The default setting's headline (docs/results/default): maskdp with public backgrounds in
    # the hidden cells, fine-tuned (the tiny preset: from scratch).
    "default": Study("configs/sweep_headline.py:person", "maskdp_eps1_k1_seed0",
                     narrow="--config.sweep.modes='(\"maskdp\",)' "
                            "--config.sweep.epsilons='(1.0,)' --config.sweep.seeds='(0,)'"),
    "synthetic": Study("configs/sweep_synthetic.py", "maskdp_eps1_k1_seed0",
                       narrow="--config.sweep.modes='(\"maskdp\",)' "
                              "--config.sweep.epsilons='(1.0,)' --config.sweep.seeds='(0,)'"),
    "context": Study("configs/sweep_context.py", "nonprivate_epsinf_k1_seed0_background",
                     narrow="--config.sweep.views='(\"background\",)' "
                            "--config.sweep.seeds='(0,)'"),
    # Public pre-training on other videos (data_seed), exported without the head ...
    "multiclip_pretrain": Study("configs/default.py:context_scratch", keys=(
        ("mode", "nonprivate"), ("input.data_seed", 1000), ("privacy.randomness", "seeded"),
        ("tensorboard", False), ("input.prefetch", 1))),
    # ... and fine-tuned (norms) privately on segment-cue videos, dp with K = 2 clips.
    "multiclip_segment": Study("configs/sweep_multiclip_segment.py", "dp_eps1_k2_seed0",
                               narrow="--config.sweep.modes='(\"dp\",)' "
                                      "--config.sweep.clips='(2,)' --config.sweep.seeds='(0,)'",
                               init_from="multiclip_pretrain"),
    "precision": Study("configs/sweep_precision.py", "maskdp_eps1_k1_seed0_bfloat16",
                       narrow="--config.sweep.seeds='(0,)'"),
    "spread": Study("configs/sweep_spread.py", "maskdp_eps1_k1_seed0",
                    narrow="--config.sweep.seeds='(0,)'", secret=True),
    "robustness": Study("configs/sweep_robustness.py", "maskdp_eps1_k1_seed0_lr_half",
                        narrow="--config.sweep.seeds='(0,)'", secret=True),
}
# Tiny: 4 logical steps of 16 videos on the test preset (δ below 1/N).
OVERRIDES = {
    "model.name": "mvit_test", "model.init_from": "", "input.num_train": 64, "input.num_test": 16,
    "batch_size": 16, "physical_batch_size": 16, "num_epochs": 1.0, "privacy.delta": 1e-3,
    "log_every_steps": 1, "tensorboard": False, "compilation_cache_dir": "",
}
# The secret of the secret-randomness studies' runs (a fresh run draws one from the OS; pinned
# here so that the secret-derived noise key and batch seeds are checked too). Not a real secret.
SECRET = 0x5EC2E7_0123_4567_89AB_CDEF_0011_2233
WRITE = os.environ.get("MASKDP_WRITE_REPRODUCE") == "1"


def _get_config(path: str):
    """``get_config()`` of ``configs/<name>.py[:<argument>]``."""
    path, _, argument = path.partition(":")
    module = importlib.import_module(os.path.splitext(path)[0].replace("/", "."))
    return module.get_config(argument) if argument else module.get_config()


def study_run(study: str, init_from: str = ""):
    """The run config of ``study``'s chosen run, shrunk by :data:`OVERRIDES`; ``init_from``:
    the exported parameters of ``STUDIES[study].init_from``'s run."""
    s = STUDIES[study]
    if s.run:
        config = dict(sweep.grid(_get_config(s.config)))[s.run]
    else:
        config = _get_config(s.config)
    for key, value in (*s.keys, *OVERRIDES.items(),
                       *((("model.init_from", init_from),) if s.init_from else ())):
        sweep._override(config, key, value, variant="reproduce")
    return config


def _flags(prefix: str, keys) -> str:
    return " ".join(f"--config.{prefix}{k}={v!r}" if isinstance(v, str)
                    else f"--config.{prefix}{k}={v}" for k, v in keys)


def command(study: str) -> str:
    """The command that trains the fixture's run: the study's sweep narrowed to one seed (and
    ε/K/view) of its grid, or its ``train.py`` command, at the tiny :data:`OVERRIDES`."""
    s = STUDIES[study]
    flags = f"XLA_FLAGS='{os.environ.get('XLA_FLAGS', '')}'"
    if s.run:
        init = " --config.base.model.init_from=INIT" if s.init_from else ""
        line = (f"{flags} python -m maskdp_jax.sweep --config={s.config} --workdir=DIR {s.narrow} "
                f"{_flags('base.', OVERRIDES.items())}{init}  # the run {s.run}")
        if s.init_from:
            line += f"; INIT: the {s.init_from} entry's export"
    else:
        line = (f"{flags} python train.py --config={s.config} --workdir=DIR "
                f"{_flags('', (*s.keys, *OVERRIDES.items()))} "
                "&& python -m maskdp_jax.export "
                "--workdir=DIR --dst=INIT --drop_head")
    if s.secret:
        line += (f"  # secret randomness with the secret pinned to {SECRET:#x} (the test "
                 "replaces maskdp_jax.randomness.draw_secret; a command draws a fresh one)")
    return line


def numbers(report: dict, logits: np.ndarray) -> dict:
    """What must reproduce: the logged losses, σ, ε, the test metrics and the test logits (their
    sha256 and sum: a dp run logs no loss, and a few test videos' top-1 moves by whole videos
    only, so the logits are what shows any change of the trained weights)."""
    losses = [{k: v for k, v in h.items() if k.endswith("loss") or k in ("step", "epsilon")}
              for h in report["history"]]
    return {
        # the path taken: where the noise came from, the products' precision, what was trained
        "randomness": report["privacy"]["randomness"],
        "compute_dtype": report["config"]["compute"]["dtype"],
        "finetune": report["config"]["model"]["finetune"],
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


def versions() -> dict:
    return results.build_environment()


def _selection(study: str) -> dict:
    """What the fixture's entry was written for: the config, the run and its own keys."""
    s = STUDIES[study]
    return {"config": s.config, "run": s.run or "train.py", "keys": [list(k) for k in s.keys],
            "secret": s.secret, "init_from": s.init_from}


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory):
    """Every study's run trained once in this process, in :data:`STUDIES`' order (runs of the
    same shapes and constants reuse the session's compiled programs, tests/conftest.py)."""
    out = {}
    exported = {}
    predict, draw_secret = train.evaluation.predict, randomness.draw_secret
    seen = []

    def recording(*args, **kwargs):  # the full-view test logits: evaluate's first prediction
        logits = predict(*args, **kwargs)
        seen.append(np.asarray(logits))
        return logits

    train.evaluation.predict = recording
    try:
        for study, s in STUDIES.items():
            workdir = str(tmp_path_factory.mktemp(study))
            seen.clear()
            randomness.draw_secret = (lambda: SECRET) if s.secret else draw_secret
            report = train.train_and_evaluate(study_run(study, exported.get(s.init_from, "")),
                                              workdir)
            out[study] = numbers(report, seen[0])
            if any(other.init_from == study for other in STUDIES.values()):
                # as `python -m maskdp_jax.export` writes it
                exported[study] = os.path.join(workdir, "init")
                checkpoint.export_params(workdir, exported[study], drop_head=True)
    finally:
        train.evaluation.predict, randomness.draw_secret = predict, draw_secret
    if WRITE:
        with open(FIXTURE, "w") as f:
            json.dump({"about": "tests/test_reproduce.py: one tiny seeded run of each committed "
                                "study; regenerate deliberately (its docstring)",
                       "versions": versions(), "overrides": OVERRIDES,
                       "studies": {s: {**_selection(s), "command": command(s),
                                       "numbers": out[s]} for s in STUDIES}},
                      f, indent=1)
            f.write("\n")
    return out


@pytest.mark.slow
@pytest.mark.heavy  # the seven studies' tiny runs: 1.5 min on the 2-core CPU
@pytest.mark.parametrize("study", list(STUDIES))
def test_study_reproduces_exactly(study, reproduced):
    if not os.path.isfile(FIXTURE):
        pytest.fail(f"{FIXTURE} is missing: write it with MASKDP_WRITE_REPRODUCE=1 python -m "
                    "pytest -q -m heavy tests/test_reproduce.py")
    with open(FIXTURE) as f:
        fixture = json.load(f)
    expected = fixture["studies"][study]
    assert ({k: expected.get(k) for k in _selection(study)} == _selection(study)
            and fixture["overrides"] == OVERRIDES), (
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
