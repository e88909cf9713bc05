"""The privacy guard (run.guard.PrivacyGuard) owns the order: journal first, then anything leaves.

No model here: the state is a small pytree, the plan a fixed-σ maskdp plan.
"""

import json

import numpy as np
import pytest

from maskdp_jax.plan import PrivacyPlan
from maskdp_jax.run import guard as guard_lib
from maskdp_jax.run import journal
from maskdp_jax.run.guard import PrivacyGuard

PLAN = PrivacyPlan.calibrate(mode="maskdp", num_examples=64, batch_size=16, epochs=1,
                             l2_clip_norm=1.0, delta=1e-3, noise_multiplier=1.0)
CONFIG = {"mode": "maskdp", "seed": 0, "note": "a published config"}


def _guard(workdir, randomness="seeded"):
    return PrivacyGuard(str(workdir), plan=PLAN, config=CONFIG, randomness=randomness, seed=0,
                        keep=2)


def _state(step=0):
    return {"step": np.asarray(step, np.int32), "w": np.arange(3, dtype=np.float32) + step}


def _journal_steps(workdir):
    ledger = journal.read_ledger_journal(str(workdir))
    return None if ledger is None else ledger.steps


def test_release_journals_every_executed_step_before_it_emits(tmp_path):
    with _guard(tmp_path) as guard:
        seen = []
        for _ in range(3):
            guard.before_step()
            guard.record()
            guard.release(lambda: seen.append(_journal_steps(tmp_path)))
        assert seen == [1, 2, 3]
        assert guard.release(lambda: "emitted") == "emitted"


def test_save_journals_before_the_checkpoint_is_written(tmp_path, monkeypatch):
    seen = []
    original = guard_lib.checkpoint.Checkpointer.save

    def save(self, state, *, step, meta):
        seen.append((step, _journal_steps(tmp_path)))
        return original(self, state, step=step, meta=meta)

    monkeypatch.setattr(guard_lib.checkpoint.Checkpointer, "save", save)
    with _guard(tmp_path) as guard:
        guard.record()
        guard.record()
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
        guard.record()
        guard.save(_state(1))
    calls = []
    original = guard_lib.validate_meta
    monkeypatch.setattr(guard_lib, "validate_meta",
                        lambda meta, **kw: calls.append(meta["step"]) or original(meta, **kw))
    with _guard(tmp_path) as guard:
        state, resumed = guard.resume(_state())
        assert resumed and guard.ledger.steps == 1
        np.testing.assert_array_equal(state["w"], _state(1)["w"])
    assert calls == [1]


def test_the_guard_refuses_steps_past_the_plan(tmp_path):
    with _guard(tmp_path) as guard:
        for _ in range(PLAN.steps):
            guard.before_step()
            guard.record()
        with pytest.raises(RuntimeError, match=rf"past the planned {PLAN.steps} steps"):
            guard.before_step()
        guard.release()
    payload = json.loads((tmp_path / journal.JOURNAL).read_text())
    assert payload["steps"] == PLAN.steps and payload["privacy"] == PLAN.accounting_meta()
