"""Committed training studies reproduce: one cheap run of each, equal to its fixture.

Each committed training study under docs/results/ is a sweep config or a ``train.py`` command;
this test takes one run of each (:data:`STUDIES`, named in ``tests/fixtures/reproduce.json``),
chosen for the code path that is the study's point:

* ``default`` (the untuned headline, the earlier settings' ε grid): maskdp at ε = 1, seeded, with
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
``overrides``, the same for every study) and trained in this process. What must reproduce, and how
(:func:`differences`):

* **exactly, on every machine**: the path taken (randomness, compute dtype, fine-tuning), the
  sampled indices of every step (a digest of each Poisson draw), the number of examples, the
  privacy block (σ, q, steps, both ε) and each logged step's ε. These are host NumPy and
  dp-accounting arithmetic in float64, the same on every x86-64 CPU;
* **within rounding, across CPUs**: every logged loss and the test logits, to
  :data:`RTOL` of their size. XLA:CPU compiles for the host's micro-architecture (vector width,
  fused multiply-adds, reduction order), so two CPU generations legitimately differ in the last
  bits of a float; :data:`RTOL` is set from the spread measured across CPU instruction sets and
  XLA flag sets, and far below what a change of the noise, the sampler, the data or the model
  moves (BUILD.md, "Reproduction across CPUs");
* **the predictions where the margins allow**: each test video's predicted class where the
  fixture's top two logits are further apart than the tolerance, and top-1, the per-class table
  and the confusion matrix when no video is that close;
* **bit for bit** where the host is the fixture's (:func:`maskdp_jax.reporting.results.
  build_environment`: the JAX build, the XLA flags and the CPU's vendor, family, model, stepping
  and feature flags all equal): then every float must be equal too.

A change to the noise, the sampler, the clip offsets, the data generator, the model, the bfloat16
cast or the export/restore of an init fails here, and is then made deliberately: regenerate the
fixture with

    MASKDP_WRITE_REPRODUCE=1 python -m pytest -q -m heavy tests/test_reproduce.py

and the committed results with the commands in each results directory. The second fixture,
``tests/fixtures/reproduce_avx.json``, holds the same runs compiled for another instruction set
(``XLA_FLAGS=--xla_cpu_max_isa=AVX``, the simulation of another CPU generation): every run must
match it by the cross-machine rules, which this test then exercises on every host. Rewrite it with
``MASKDP_REPRODUCE_FIXTURE=tests/fixtures/reproduce_avx.json`` and those flags added to the
command above.

Cost: the runs share compiled programs through the session's persistent compilation cache
(tests/conftest.py): runs of the same mode, shapes and constants compile once (spread after
default; robustness recompiles only the optimiser update, whose learning rate is a constant of
the program, where a clip-norm variant would recompile the per-example gradients). The sizes
are tests/test_train_e2e.py's (16 videos a step, 64 training videos), so its maskdp and
nonprivate runs find this file's programs in the cache, and the reverse. A study is trained when
a test first asks for it (``-k default`` trains one run).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os

import numpy as np
import pytest

from maskdp_jax import sweep, train
from maskdp_jax.core import randomness
from maskdp_jax.reporting import results
from maskdp_jax.run import checkpoint

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
FIXTURE = os.environ.get("MASKDP_REPRODUCE_FIXTURE") or os.path.join(FIXTURES, "reproduce.json")
#: The same runs compiled for AVX only (``--xla_cpu_max_isa=AVX``: no fused multiply-add, as on
#: a CPU generation without FMA), which round differently: another CPU, simulated.
OTHER_CPU_FIXTURE = os.path.join(FIXTURES, "reproduce_avx.json")


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
    # The untuned headline (docs/results/headline_untuned): maskdp with public backgrounds in
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
#: Relative tolerance of a loss or a logit across CPUs, |got − fixture| ≤ RTOL · (1 + |fixture|),
#: by the run's compute dtype. Float32: over 100 times the largest spread measured between
#: instruction sets and XLA flag sets (8e-7), 39 times below the smallest deliberate change
#: measured (BUILD.md, "Reproduction across CPUs"). Bfloat16 products round a last-bit difference
#: of their float32 inputs to a whole bfloat16 step (2^-8): the spread is 1.1e-2 there, as large
#: as small changes of the noise, data or model move it, so across CPUs the bfloat16 study's
#: floats are held to 5 times the spread and its noise, data and model are the float32 studies'.
RTOL = {"auto": 1e-4, "float32": 1e-4, "bfloat16": 5e-2}


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
                 "replaces maskdp_jax.core.randomness.draw_secret; a command draws a fresh one)")
    return line


def numbers(report: dict, logits: np.ndarray, batches: list[str]) -> dict:
    """What must reproduce (module docstring): the path taken, the sampled batches, the privacy
    block, the logged losses and ε, the test metrics and the test logits."""
    losses = [{k: v for k, v in h.items() if k.endswith("loss") or k in ("step", "epsilon")}
              for h in report["history"]]
    metrics = report["metrics"]
    return {
        # the path taken: where the noise came from, the products' precision, what was trained
        "randomness": report["privacy"]["randomness"],
        "compute_dtype": report["config"]["compute"]["dtype"],
        "finetune": report["config"]["model"]["finetune"],
        "batches": batches,
        "num_examples": {"train": report["privacy"]["num_examples"],
                         "test": metrics["num_examples"]},
        "privacy": {k: report["privacy"][k] for k in (
            "noise_multiplier", "q", "steps", "epsilon_pld", "epsilon_rdp")},
        "history": losses,
        **{k: metrics[k] for k in ("top1", "mean_class_accuracy", "per_class_accuracy",
                                   "confusion")},
        "test_logits": np.asarray(logits, np.float32).tolist(),
    }


#: Compared exactly on every machine: host arithmetic (NumPy, dp-accounting) and the path taken.
EXACT = ("randomness", "compute_dtype", "finetune", "batches", "num_examples", "privacy")
#: Follow from the predictions: exact where no test video's top two logits are within rounding.
PREDICTED = ("top1", "mean_class_accuracy", "per_class_accuracy", "confusion")


def _close(got, expected, rtol: float) -> bool:
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    return got.shape == expected.shape and bool(
        np.all(np.abs(got - expected) <= rtol * (1 + np.abs(expected))))


def differences(got: dict, expected: dict, *, same_host: bool) -> list[str]:
    """What of ``got`` does not reproduce ``expected`` (both :func:`numbers`), as sentences;
    empty when it reproduces. ``same_host``: bit for bit; else by the cross-machine rules
    (module docstring)."""
    if same_host:
        return [f"{k}: {got.get(k)!r} != {v!r}" for k, v in expected.items()
                if got.get(k) != v]
    out = [f"{k}: {got.get(k)!r} != {expected[k]!r}" for k in EXACT if got.get(k) != expected[k]]
    rtol = RTOL[expected["compute_dtype"]]
    steps = [[h["step"], h["epsilon"]] for h in got["history"]]
    if steps != [[h["step"], h["epsilon"]] for h in expected["history"]]:
        out.append(f"the logged steps and ε differ: {steps}")
    for g, e in zip(got["history"], expected["history"], strict=False):  # lengths: above
        for k in e.keys() - {"step", "epsilon"}:
            if not _close(g.get(k, np.nan), e[k], rtol):
                out.append(f"{k} at step {e['step']}: {g.get(k)} vs {e[k]}")
    logits, want = np.asarray(got["test_logits"]), np.asarray(expected["test_logits"])
    if not _close(logits, want, rtol):
        worst = np.max(np.abs(logits - want) / (1 + np.abs(want))) if logits.shape == want.shape \
            else "shape"
        out.append(f"test logits beyond the tolerance {rtol:g} (worst relative {worst})")
        return out
    top2 = np.sort(want, axis=-1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2 * rtol * (1 + np.abs(top2).max(axis=-1))
    moved = clear & (np.argmax(logits, -1) != np.argmax(want, -1))
    if np.any(moved):
        out.append(f"the predicted class of test videos {np.flatnonzero(moved).tolist()} moved")
    if np.all(clear):
        out += [f"{k}: {got[k]!r} != {expected[k]!r}" for k in PREDICTED if got[k] != expected[k]]
    return out


def versions() -> dict:
    return results.build_environment()


def _selection(study: str) -> dict:
    """What the fixture's entry was written for: the config, the run and its own keys."""
    s = STUDIES[study]
    return {"config": s.config, "run": s.run or "train.py", "keys": [list(k) for k in s.keys],
            "secret": s.secret, "init_from": s.init_from}


class Reproduced:
    """Each study's run, trained in this process when first asked for (its ``init_from`` study
    first), as :func:`numbers`. Runs of the same shapes and constants reuse the session's
    compiled programs (tests/conftest.py)."""

    def __init__(self, tmp_path_factory):
        self._tmp, self._numbers, self._exported = tmp_path_factory, {}, {}

    def __getitem__(self, study: str) -> dict:
        if study not in self._numbers:
            self._train(study)
        return self._numbers[study]

    def _train(self, study: str) -> None:
        s = STUDIES[study]
        if s.init_from and s.init_from not in self._exported:
            self._train(s.init_from)
        workdir = str(self._tmp.mktemp(study))
        logits, batches = [], []
        predict, load_batch = train.evaluation.predict, train.load_logical_batch
        draw_secret = randomness.draw_secret

        def recording(*args, **kwargs):  # the full-view test logits: evaluate's first prediction
            logits.append(np.asarray(predict(*args, **kwargs)))
            return logits[-1]

        def drawn(dataset, batch, **kwargs):  # each step's Poisson draws, before they are loaded
            digest = hashlib.sha256()
            for indices in (batch.public, batch.private):
                digest.update(b"-" if indices is None else np.asarray(indices, np.int64).tobytes())
            batches.append(digest.hexdigest()[:16])
            return load_batch(dataset, batch, **kwargs)

        train.evaluation.predict, train.load_logical_batch = recording, drawn
        randomness.draw_secret = (lambda: SECRET) if s.secret else draw_secret
        try:
            report = train.train_and_evaluate(
                study_run(study, self._exported.get(s.init_from, "")), workdir)
        finally:
            train.evaluation.predict, train.load_logical_batch = predict, load_batch
            randomness.draw_secret = draw_secret
        self._numbers[study] = numbers(report, logits[0], batches)
        if any(other.init_from == study for other in STUDIES.values()):
            # as `python -m maskdp_jax.export` writes it
            self._exported[study] = os.path.join(workdir, "init")
            checkpoint.export_params(workdir, self._exported[study], drop_head=True)


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory):
    """:class:`Reproduced`; with ``MASKDP_WRITE_REPRODUCE=1`` every study is trained and
    :data:`FIXTURE` written first."""
    runs = Reproduced(tmp_path_factory)
    if WRITE:
        with open(FIXTURE, "w") as f:
            json.dump({"about": "tests/test_reproduce.py: one tiny seeded run of each committed "
                                "study; regenerate deliberately (its docstring)",
                       "versions": versions(), "overrides": OVERRIDES,
                       "studies": {s: {**_selection(s), "command": command(s),
                                       "numbers": runs[s]} for s in STUDIES}},
                      f, indent=1)
            f.write("\n")
    return runs


def _fixture(path: str, study: str) -> tuple[dict, dict]:
    """``(the fixture at path, its entry for study)``, checked to be written for these runs."""
    if not os.path.isfile(path):
        pytest.fail(f"{path} is missing: write it with MASKDP_WRITE_REPRODUCE=1 python -m "
                    "pytest -q -m heavy tests/test_reproduce.py")
    with open(path) as f:
        fixture = json.load(f)
    expected = fixture["studies"][study]
    assert ({k: expected.get(k) for k in _selection(study)} == _selection(study)
            and fixture["overrides"] == OVERRIDES), (
        f"{path} was written for other runs or sizes; regenerate it (module docstring)")
    return fixture, expected


@pytest.mark.slow
@pytest.mark.heavy  # the eight studies' tiny runs: 1.5 min on the 2-core CPU
@pytest.mark.parametrize("study", list(STUDIES))
def test_study_reproduces(study, reproduced):
    fixture, expected = _fixture(FIXTURE, study)
    got = json.loads(json.dumps(reproduced[study]))  # the fixture's float round trip
    same_host = fixture["versions"] == versions()
    wrong = differences(got, expected["numbers"], same_host=same_host)
    how = ("bit for bit: this host is the fixture's" if same_host else
           f"across CPUs: the fixture was written with {fixture['versions']}, this run uses "
           f"{versions()}")
    assert not wrong, (
        f"{study} ({expected['command']}) no longer reproduces its committed numbers ({how}): "
        f"{'; '.join(wrong)}. Something changed the noise, the sampler, the data or the model; "
        "if deliberate, regenerate the fixture and the committed results (module docstring).")
    assert np.any(np.asarray(got["test_logits"])) and len(got["history"]) == 4


@pytest.mark.slow
@pytest.mark.heavy  # no training of its own: the runs above
@pytest.mark.parametrize("study", list(STUDIES))
def test_study_reproduces_on_another_cpu(study, reproduced):
    """The same runs compiled for AVX only: the cross-machine rules hold between instruction
    sets, and this host takes them (its XLA flags are not the fixture's); on a host where the
    AVX build is bit-identical this still checks the rules, only not their tolerance."""
    fixture, expected = _fixture(OTHER_CPU_FIXTURE, study)
    assert "--xla_cpu_max_isa=AVX" in fixture["versions"]["xla_flags"].split()
    assert fixture["versions"] != versions()
    got = json.loads(json.dumps(reproduced[study]))
    assert differences(got, expected["numbers"], same_host=False) == []
