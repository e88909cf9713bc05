"""The privacy guard (run.guard.PrivacyGuard) owns the order: journal first, then anything leaves.

No model here: the state is a small pytree, the plan a fixed-σ maskdp plan.
"""

import json
from typing import Any

import numpy as np
import pytest
from flax import struct

from maskdp_jax.core.mechanism import MechanismState, PlanExhausted
from maskdp_jax.core.plan import PrivacyPlan
from maskdp_jax.core.randomness import Randomness
from maskdp_jax.run import guard as guard_lib
from maskdp_jax.run import journal
from maskdp_jax.run.guard import PrivacyGuard

PLAN = PrivacyPlan.calibrate(mode="maskdp", num_examples=64, batch_size=16, epochs=1,
                             l2_clip_norm=1.0, delta=1e-3, noise_multiplier=1.0)
CONFIG = {"mode": "maskdp", "seed": 0, "note": "a published config"}


def _guard(workdir, randomness="seeded"):
    return PrivacyGuard(str(workdir), plan=PLAN, config=CONFIG, randomness=randomness, seed=0,
                        keep=2)


class _State(struct.PyTreeNode):
    """A training state's shape as the guard sees it: parameters and the mechanism's state."""

    w: Any
    privacy: MechanismState


def _state(step=0):
    """The state after ``step`` steps of the seeded run (its noise key is the run's)."""
    return _State(w=np.arange(3, dtype=np.float32) + step,
                  privacy=MechanismState(step=np.asarray(step, np.int32),
                                         key=Randomness(mode="seeded", seed=0).noise_key()))


def _journal_steps(workdir):
    ledger = journal.read_ledger_journal(str(workdir))
    return None if ledger is None else ledger.steps


def test_release_journals_every_executed_step_before_it_emits(tmp_path):
    with _guard(tmp_path) as guard:
        seen = []
        for step in range(1, 4):
            guard.release(_state(step), lambda: seen.append(_journal_steps(tmp_path)))
        assert seen == [1, 2, 3]
        assert guard.release(_state(3), lambda: "emitted") == "emitted"


def test_save_journals_before_the_checkpoint_is_written(tmp_path, monkeypatch):
    seen = []
    original = guard_lib.checkpoint.Checkpointer.save

    def save(self, state, *, step, meta):
        seen.append((step, _journal_steps(tmp_path)))
        return original(self, state, step=step, meta=meta)

    monkeypatch.setattr(guard_lib.checkpoint.Checkpointer, "save", save)
    with _guard(tmp_path) as guard:
        guard.save(_state(2))
    assert seen == [(2, 2)]


def test_a_fresh_secret_run_checkpoints_its_secret_before_any_step(tmp_path):
    with _guard(tmp_path / "secret", randomness="secret") as guard:
        _, resumed = guard.resume(_state())
        assert not resumed and _journal_steps(tmp_path / "secret") == 0
    with _guard(tmp_path / "seeded") as guard:
        guard.resume(_state())
    ckpt = guard_lib.checkpoint.Checkpointer(str(tmp_path / "secret"), keep=1)
    step, _, meta = ckpt.read_latest()
    ckpt.close()
    assert step == 0 and meta["randomness"]["mode"] == "secret" and meta["randomness"]["secret"]
    assert guard_lib.checkpoint.read_latest_meta(str(tmp_path / "seeded")) is None
    journal_text = (tmp_path / "secret" / journal.JOURNAL).read_text()
    assert meta["randomness"]["secret"] not in journal_text


def test_resume_validates_the_checkpoint_once_and_restores_its_state(tmp_path, monkeypatch):
    with _guard(tmp_path) as guard:
        guard.save(_state(1))
    calls = []
    original = guard_lib.validate_meta
    monkeypatch.setattr(guard_lib, "validate_meta",
                        lambda meta, **kw: calls.append(meta["step"]) or original(meta, **kw))
    with _guard(tmp_path) as guard:
        state, resumed = guard.resume(_state())
        assert resumed and guard.ledger(state).steps == 1
        np.testing.assert_array_equal(state.w, _state(1).w)
    assert calls == [1]


def test_the_guards_mechanism_refuses_steps_past_the_plan(tmp_path):
    """The trainer draws every step's batches from the guard's mechanism: the step after the
    plan's last is refused there, before anything is computed, and its ledger stops at the plan."""
    with _guard(tmp_path) as guard:
        for step in range(PLAN.steps):
            guard.mechanism.batch_at(step)
        with pytest.raises(PlanExhausted, match=rf"step {PLAN.steps} is past the plan"):
            guard.mechanism.batch_at(PLAN.steps)
        guard.release(_state(PLAN.steps))
    payload = json.loads((tmp_path / journal.JOURNAL).read_text())
    assert payload["steps"] == PLAN.steps and payload["privacy"] == PLAN.accounting_meta()
