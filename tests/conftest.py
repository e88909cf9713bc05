"""Shared fixtures: a tiny convolutional video model with the same surface as ``models``.

Core DP properties (clipping, noise, views, sampling) are tested on this model because it compiles
in a second; the MViTv2 presets are exercised by the end-to-end tests. ``no_model`` is for the
catalogue of malformed inputs (``tests/malformed.py``): input refused before the model is built.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

# Compilation is most of this suite's time on a 2-core machine, so the whole session (and every
# subprocess it starts, which inherits the environment) compiles with two settings, both set
# before JAX starts its backend:
# - XLA:CPU without its expensive optimisation passes: compiles ~1.5x faster; the tests check
#   properties and equalities within one setting, never speed. A test whose meaning depends on
#   the default optimisation (the bit-for-bit shadow models) sets its subprocess's flags itself.
# - one persistent compilation cache per session: end-to-end tests of the same tiny preset and
#   batch shapes compile the same programs (the noise key, σ and the data are arguments), so
#   each is compiled once. A fresh directory per session: nothing leaks between sessions.
FAST_XLA = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
# The caller's XLA_FLAGS come after the suite's, so a flag given there wins (XLA takes a repeated
# flag's last value): benchmarks/reproduce_spread.py compiles the suite at other settings so.
# pytest-xdist's workers inherit the flags from the controlling process: add them once.
if not os.environ.get("XLA_FLAGS", "").startswith(FAST_XLA):
    os.environ["XLA_FLAGS"] = f"{FAST_XLA} {os.environ.get('XLA_FLAGS', '')}".strip()
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="maskdp-tests-xla-")
    atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs",
                  float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))

# The files that take longest (test time summed over a file, measured with --durations=0 on the
# 2-core machine; BUILD.md "Checks"), longest first. pytest-xdist's --dist loadfile hands whole
# files to its workers in collection order, so starting the long ones first keeps one worker from
# finishing a long file alone at the end. Scheduling only: a file not named here runs after
# these, in collection order, and nothing a test checks depends on the order.
LONGEST_FILES_FIRST = (
    "test_reproduce.py", "test_train_e2e.py", "test_train_resume.py", "test_models_mvit_ops.py",
    "test_examples.py",
    "test_audit_runs.py", "test_anonymize.py", "test_maskdp_jax_tokenizer.py",
    "test_benchmarks_gpu_suite.py", "test_run_features.py", "test_data_store.py",
    "test_audit_canaries.py", "test_maskdp_jax_train_step.py", "test_maskdp_jax_ghost.py",
    "test_run_views.py", "test_maskdp_jax_parallel.py", "test_reporting_paper_tables.py",
    "test_release.py", "test_reporting_results.py", "test_public_api.py",
    "test_audit_shadows.py", "test_run_datasets.py", "test_pretrain.py",
    "test_audit_feature_masking.py",
)


def pytest_collection_modifyitems(config, items):
    """Longest files first (:data:`LONGEST_FILES_FIRST`); a stable sort keeps each file's own
    order and its module-scoped fixtures together."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


PATCH_STRIDE = (2, 4, 4)
CLIP_SHAPE = (4, 16, 16, 3)  # T, H, W, C
NUM_CLASSES = 3


class TinyVideoNet(nn.Module):
    """Patchify conv (kernel = stride, so a token sees exactly its cell) -> LayerNorm -> head."""

    num_classes: int = NUM_CLASSES
    patch_stride: tuple[int, int, int] = PATCH_STRIDE

    @nn.compact
    def __call__(self, x):
        x = nn.Conv(8, self.patch_stride, strides=self.patch_stride, name="patch_embed")(x)
        x = nn.LayerNorm(name="norm")(nn.gelu(x))
        x = jnp.mean(x, axis=(1, 2, 3))
        return nn.Dense(self.num_classes, name="head")(x)


@pytest.fixture
def no_model(monkeypatch):
    """Replaces ``train.build_model`` by a function that fails the test."""
    from maskdp_jax import train

    def build_model(*args, **kwargs):
        raise AssertionError("the bad input was not refused before the model was built")

    monkeypatch.setattr(train, "build_model", build_model)


@pytest.fixture(scope="session")
def tiny_model():
    model = TinyVideoNet()
    params = model.init(jax.random.key(0), jnp.zeros((1, *CLIP_SHAPE)))["params"]

    def apply_fn(p, x):
        return model.apply({"params": p}, x)

    return model, params, apply_fn


def random_batch(rng: np.random.Generator, *, size: int, clips: int = 1, public_fraction=0.5):
    """A physical batch with random videos, random block masks and labels, all weights 1."""
    t, h, w, c = CLIP_SHAPE
    video = rng.normal(size=(size, clips, t, h, w, c)).astype(np.float32)
    mask = (rng.random((size, clips, t, h, w)) < public_fraction).astype(np.uint8)
    # Make whole public blocks so that most videos have public cells after erosion.
    blocks = rng.random((size, clips, t // 2, h // 4, w // 4)) < public_fraction
    mask |= np.kron(blocks, np.ones((2, 4, 4), np.uint8)).astype(np.uint8)
    return {
        "video": video,
        "mask": mask,
        "label": rng.integers(0, NUM_CLASSES, size).astype(np.int32),
        "weight": np.ones(size, np.float32),
    }


def train_preempted_then_resumed(config, workdir: str, monkeypatch, *, step: int = 1) -> dict:
    """``train.train_and_evaluate`` stopped by a SIGTERM while step ``step`` loads (the trainer's
    handler checkpoints and raises ``Preempted``), then run again in ``workdir`` to the end;
    returns the second call's report. Fails if the SIGTERM was not sent exactly once."""
    import signal

    from maskdp_jax import train

    load = train.load_logical_batch
    sent = []

    def preempted(*args, step: int, **kw):
        if step == preempt_at and not sent:
            sent.append(step)
            os.kill(os.getpid(), signal.SIGTERM)
        return load(*args, step=step, **kw)

    preempt_at = step
    monkeypatch.setattr(train, "load_logical_batch", preempted)
    with pytest.raises(train.Preempted):
        train.train_and_evaluate(config, workdir)
    monkeypatch.setattr(train, "load_logical_batch", load)
    assert sent == [step]
    return train.train_and_evaluate(config, workdir)


def train_rows(config, workdir: str, monkeypatch, *, preempted: bool) -> tuple[list, dict]:
    """One run of ``config`` in ``workdir``, uninterrupted or (``preempted``)
    :func:`train_preempted_then_resumed`: its ``metrics.jsonl`` rows without the timing fields,
    and its report."""
    import json

    from maskdp_jax import train

    out = (train_preempted_then_resumed(config, workdir, monkeypatch) if preempted
           else train.train_and_evaluate(config, workdir))
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        rows = [{k: v for k, v in json.loads(line).items() if "second" not in k} for line in f]
    return rows, out
