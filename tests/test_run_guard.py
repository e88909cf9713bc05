"""Malformed checkpoints, privacy ledgers and journals, and budgets (the catalogue of malformed
inputs, issue 6; helpers in tests/malformed.py): ``run.guard`` and ``run.journal`` refuse to
resume from them, or to train past the plan.

The rules of every row are in ``tests/malformed.py``.
"""

from __future__ import annotations

import json
import os
import types

import jax
import numpy as np
import pytest
from malformed import BATCH, N_TRAIN, STEPS, Q, tiny_config

from maskdp_jax import accounting, train
from maskdp_jax.core import randomness
from maskdp_jax.core.mechanism import Mechanism, MechanismState, PlanExhausted
from maskdp_jax.core.plan import PrivacyPlan
from maskdp_jax.run import checkpoint, guard, identity, journal
from maskdp_jax.run import config as run_config


def write_checkpoint(workdir, config, ledger: accounting.Ledger, *, topology=None) -> None:
    meta = checkpoint_meta(config, ledger.to_dict(), step=ledger.steps, topology=topology)
    ckpt = checkpoint.Checkpointer(str(workdir), keep=2)
    try:
        ckpt.save({"step": np.int32(ledger.steps)}, step=ledger.steps, meta=meta)
    finally:
        ckpt.close()


def for_run(config, restored=None) -> randomness.Randomness:
    """The randomness a run of ``config`` gets (restored from a checkpoint's ``meta``)."""
    return randomness.for_run(mode=config.privacy.randomness, seed=config.seed,
                              restored=(restored or {}).get("randomness"))


def sampler_meta(config) -> dict:
    return guard.sampler_meta(run_config.privacy_plan(config, num_examples=N_TRAIN),
                              seed=config.seed)


def _at(steps: int):
    """A state as the guard reads it (``state.privacy``): ``steps`` steps taken."""
    return types.SimpleNamespace(privacy=MechanismState(step=np.int32(steps), key=None))


def ledger_of(steps: int, sigma: float = 1.0) -> accounting.Ledger:
    ledger = accounting.Ledger()
    ledger.record(q=Q, noise_multiplier=sigma, steps=steps)
    return ledger


def _snapshot(workdir) -> dict[str, bytes]:
    out = {}
    for root, _, files in os.walk(workdir):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, workdir)] = f.read()
    return out


def test_resume_with_another_config_names_the_differing_keys(tmp_path, no_model):
    workdir = tmp_path / "run"
    base = tiny_config()
    write_checkpoint(workdir, base, ledger_of(3))
    before = _snapshot(workdir)
    other = tiny_config({"optimizer.learning_rate": 0.1, "privacy.l2_clip_norm": 1.0,
                         "log_every_steps": 5})  # log_every_steps may change on resume
    with pytest.raises(ValueError, match=r"written with a different config") as info:
        train.train_and_evaluate(other, str(workdir))
    message = str(info.value)
    lr, c = base.optimizer.learning_rate, base.privacy.l2_clip_norm
    assert f"optimizer.learning_rate: checkpoint {lr} != now 0.1" in message
    assert f"privacy.l2_clip_norm: checkpoint {c} != now 1.0" in message
    assert "log_every_steps" not in message
    assert "Use a fresh --workdir, or restore the original config values." in message
    assert _snapshot(workdir) == before  # loses nothing


@pytest.mark.parametrize("ledger,match", [
    ({"version": 7, "segments": []}, r"its privacy ledger is corrupt .*Not a ledger dict of "
                                     r"version 1.*Restore the checkpoint from a backup or start "
                                     r"over in a fresh --workdir"),
    ({"version": 1, "segments": [{"q": 0.25, "sigma": 1.0}]},
     r"its privacy ledger is corrupt .*Bad ledger segment"),
    ({"version": 1, "segments": [{"q": 2.0, "noise_multiplier": 1.0, "steps": 3}]},
     r"its privacy ledger is corrupt .*q \(sampling rate B/N\) must be < 1"),
    (ledger_of(2).to_dict(), r"its ledger counts 2 steps but the checkpoint is at step 3; "
                             r"refusing to resume with an inconsistent privacy ledger"),
], ids=["unknown-version", "segment-keys", "segment-values", "fewer-steps-than-checkpoint"])
def test_resume_with_a_corrupt_checkpoint_ledger_is_refused(ledger, match):
    config = tiny_config()
    meta = checkpoint_meta(config, ledger)
    with pytest.raises(ValueError, match=match):
        validate(meta, config)


def checkpoint_meta(config, ledger: dict, *, step: int = 3, topology=None) -> dict:
    """A checkpoint's meta as it comes back from disk (JSON)."""
    rand = for_run(config)
    meta = {"step": step, "ledger": ledger, "config": config.to_dict(),
            "noise_key": np.asarray(jax.random.key_data(rand.noise_key())).tolist(),
            "sampler": sampler_meta(config),
            "randomness": rand.to_meta(), "topology": topology or identity.current_topology(),
            "state_format": guard.STATE_FORMAT}
    return json.loads(json.dumps(meta))


def validate(meta: dict, config) -> accounting.Ledger:
    """validate_meta as the privacy guard calls it on resume (randomness restored from ``meta``)."""
    rand = for_run(config, meta)
    return guard.validate_meta(
        meta, config=config.to_dict(), where="ckpt",
        noise_key_data=jax.random.key_data(rand.noise_key()), sampler=sampler_meta(config),
        randomness=rand.to_meta(), topology=identity.current_topology())


@pytest.mark.parametrize("saved,match", [
    ({"process_count": 2}, r"another topology \(process_count 2 then, 1 now\)"),
    ({"device_count": 8}, r"another topology \(device_count 8 then, 1 now\)"),
    ({"platform": "gpu"}, r"another topology \(platform 'gpu' then, 'cpu' now\)"),
    ({"device_kind": "NVIDIA H100"}, r"another topology \(device_kind 'NVIDIA H100' then, "),
    ({"jax_version": "0.4.30"}, r"another topology \(jax_version '0\.4\.30' then, "),
], ids=["processes", "devices", "platform", "device-kind", "jax-version"])
@pytest.mark.parametrize("mode", ["secret", "seeded"])
def test_resume_on_another_topology_is_refused(saved, match, mode):
    """Re-executed steps are bit-identical (counted once) only on the same topology."""
    config = tiny_config({"privacy.randomness": mode})
    meta = checkpoint_meta(config, ledger_of(3).to_dict())
    validate(meta, config)  # the same topology resumes
    meta["topology"] = {**meta["topology"], **saved}
    with pytest.raises(ValueError, match=match + r".*Resume on the same topology, or start a new "
                                                 r"run in a fresh --workdir"):
        validate(meta, config)


def test_resume_of_a_checkpoint_without_topology_is_refused():
    config = tiny_config()
    meta = checkpoint_meta(config, ledger_of(3).to_dict())
    del meta["topology"]
    with pytest.raises(ValueError, match=r"another topology \(process_count '<absent>' then"):
        validate(meta, config)


@pytest.mark.parametrize("saved,now", [(False, True), (True, False)], ids=["on", "off"])
def test_log_private_metrics_cannot_change_on_resume(saved, now, tmp_path, no_model):
    """Non-DP rows once in metrics.jsonl stay there: the report must not say none were logged."""
    workdir = tmp_path / "run"
    write_checkpoint(workdir, tiny_config({"log_private_metrics": saved}), ledger_of(3))
    with pytest.raises(ValueError, match=rf"log_private_metrics: checkpoint {saved} != now {now}"):
        train.train_and_evaluate(tiny_config({"log_private_metrics": now}), str(workdir))


@pytest.mark.parametrize("content,match", [
    ('{"ledger": {"version": 1, "segm', r"privacy-ledger journal is corrupt \(JSONDecodeError"),
    ('{"steps": 3}', r"privacy-ledger journal is corrupt \(KeyError"),
    ('{"ledger": {"version": 1, "segments": [{"q": 0.25, "noise_multiplier": -1.0, "steps": 3}]}'
     ', "privacy": {}}', r"journal is corrupt .*noise_multiplier must be >= 0"),
], ids=["truncated-json", "no-ledger", "negative-sigma"])
def test_corrupt_journal_is_refused(content, match, tmp_path, no_model):
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / journal.JOURNAL).write_text(content)
    full = match + r".*training cannot continue here without under-counting: restore the file " \
                   r"from a backup, or start over in a fresh --workdir"
    with pytest.raises(ValueError, match=full):
        train.train_and_evaluate(tiny_config(), str(workdir))
    with pytest.raises(ValueError, match=match):
        journal.read_ledger_journal(str(workdir))
    assert (workdir / journal.JOURNAL).read_text() == content  # loses nothing


def journal_run(config, *, randomness_id: str | None = None, topology=None) -> dict:
    """The run identity train.py writes into the journal for ``config`` (a fresh run)."""
    randomness_id = randomness_id or for_run(config).public_id()
    return identity.run_identity(config.to_dict(), randomness_id=randomness_id,
                                 topology=topology or identity.current_topology())


SEEDED = {"privacy.randomness": "seeded"}


@pytest.mark.parametrize("privacy,sigma,run,match", [
    ({"delta": 1e-5}, 1.0, {}, r"delta: journal 1e-05 != now 0\.001"),
    ({}, 2.0, {}, r"a segment of 4 step\(s\) at q=0\.25, sigma=2 != now q=0\.25, sigma=1"),
    ({}, 1.0, {"seed": 1}, r"config fingerprint: journal [0-9a-f]{64} != now [0-9a-f]{64} "
                           r"\(another config: seed, model"),
    ({}, 1.0, {"optimizer.learning_rate": 0.1}, r"config fingerprint: journal"),
    ({}, 1.0, {"model.name": "mvit_cpu"}, r"config fingerprint: journal"),
    ({}, 1.0, {"id": "secret:sha256:00"}, r"randomness: journal secret:sha256:00 != now "
                                          r"seeded:0 \(the journal's steps used noise and batches"),
    ({}, 1.0, {"topology": {**identity.current_topology(), "process_count": 2}},
     r"topology: journal \{'process_count': 2, 'device_count': 1, .*\} != now \{'process_"),
], ids=["other-delta", "other-sigma", "other-seed", "other-lr", "other-model",
        "other-randomness", "other-topology"])
def test_journal_of_another_run_is_refused(privacy, sigma, run, match, tmp_path, no_model):
    """A workdir whose journal (no checkpoint yet: the run was killed before its first one) was
    written by a run with other settings, randomness or topology."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    meta = {"delta": 1e-3, "adjacency": "special", "sampling": "decoupled", "mode": "maskdp"}
    run = dict(run)
    journal_config = tiny_config({**SEEDED, **{k: v for k, v in run.items()
                                               if k not in ("id", "topology")}})
    journal.write_ledger_journal(
        str(workdir), ledger_of(4, sigma), privacy={**meta, **privacy},
        run=journal_run(journal_config, randomness_id=run.get("id"), topology=run.get("topology")))
    before = _snapshot(workdir)
    with pytest.raises(ValueError, match=r"(?s)holds the privacy ledger of another run.*" + match
                       + r".*Use a fresh --workdir"):
        train.train_and_evaluate(tiny_config(SEEDED), str(workdir))
    assert _snapshot(workdir) == before


def test_journal_of_a_secret_run_without_checkpoint_is_refused(tmp_path, no_model):
    """Secret mode, same config: a rerun would draw a new secret, so the journal's steps cannot
    be re-executed identically (they would have to be counted again): refused."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    config = tiny_config()
    meta = {"delta": 1e-3, "adjacency": "special", "sampling": "decoupled", "mode": "maskdp"}
    journal.write_ledger_journal(str(workdir), ledger_of(4), privacy=meta,
                                    run=journal_run(config))
    with pytest.raises(ValueError, match=r"randomness: journal secret:sha256:[0-9a-f]{32} != now "
                                         r"secret:sha256:[0-9a-f]{32}"):
        train.train_and_evaluate(config, str(workdir))


def test_resume_past_the_planned_steps_is_refused(tmp_path, no_model):
    workdir = tmp_path / "run"
    write_checkpoint(workdir, tiny_config(), ledger_of(STEPS + 1))
    with pytest.raises(PlanExhausted, match=rf"step {STEPS + 1} is past the plan \(steps 0 to "
                                            rf"{STEPS - 1} of {STEPS}\)"):
        train.train_and_evaluate(tiny_config(), str(workdir))


def test_a_checkpoint_of_the_earlier_state_format_is_refused_in_one_line():
    """A checkpoint whose training state predates the mechanism's state (a step counter and no
    noise key in the state) cannot be restored into today's: refused, saying what to do."""
    meta = checkpoint_meta(tiny_config(), ledger_of(3).to_dict())
    del meta["state_format"]
    with pytest.raises(ValueError, match=r"written by an earlier maskdp_jax .* fresh --workdir"):
        validate(meta, tiny_config())


def test_resume_past_the_target_epsilon_is_refused(tmp_path, no_model):
    """σ calibrated to ε = 2; the checkpoint's ledger holds 3 steps at σ = 0.5 (e.g. written
    with another accounting library version): the plan would end above the target."""
    config = tiny_config({"privacy.noise_multiplier": None, "privacy.accountant": "rdp",
                          "privacy.target_epsilon": 2.0})
    workdir = tmp_path / "run"
    write_checkpoint(workdir, config, ledger_of(3, sigma=0.5))
    with pytest.raises(RuntimeError, match=r"Refusing to train: the privacy ledger \(3 steps, "
                                           r"ε = .*\) plus the 3 remaining planned steps would "
                                           r"spend ε = .* > target ε = 2 at δ = 0\.001 \(rdp"):
        train.train_and_evaluate(config, str(workdir))


def test_budget_checks_pass_within_the_plan_and_refuse_beyond():
    plan = PrivacyPlan.calibrate(mode="maskdp", num_examples=N_TRAIN, batch_size=BATCH,
                                 epochs=STEPS * BATCH / N_TRAIN, l2_clip_norm=0.1, delta=1e-3,
                                 accountant="rdp", target_epsilon=2.0)
    mech = Mechanism(plan=plan, randomness=randomness.Randomness(mode="seeded", seed=0))
    mech.check_step(STEPS - 1)
    mech.check_step(STEPS, taken=True)  # a finished run
    with pytest.raises(PlanExhausted, match=r"step 6 is past the plan \(steps 0 to 5 of 6\).*"
                                            r"new budget"):
        mech.check_step(STEPS)
    with pytest.raises(PlanExhausted, match="step 7 is past the plan"):
        mech.check_step(STEPS + 1, taken=True)

    sigma = plan.noise_multiplier
    assert (plan.q, plan.steps) == (Q, STEPS)
    for done in (0, 3, STEPS):  # a ledger on the plan: every prefix is within the target
        eps = guard.check_epsilon_budget(
            ledger_of(done, sigma) if done else accounting.Ledger(), plan)
        assert eps <= 2.0
    with pytest.raises(RuntimeError, match=r"would spend ε = .* > target ε = 2"):
        # 3 steps more than planned (the old call: a 3-step ledger plus STEPS remaining steps)
        guard.check_epsilon_budget(ledger_of(3 + STEPS, sigma), plan)


# ---------------------------------------------------------------------------------------------
# One run per workdir (issue 19, item 6)
# ---------------------------------------------------------------------------------------------
def _guard(config, workdir):
    plan = run_config.privacy_plan(config, num_examples=N_TRAIN)
    return guard.PrivacyGuard(str(workdir), plan=plan, config=config.to_dict(),
                              randomness=config.privacy.randomness, seed=config.seed, keep=2)


def test_a_second_run_in_the_same_workdir_is_refused(tmp_path, no_model):
    from maskdp_jax.run import workdir_lock

    config = tiny_config({"privacy.randomness": "seeded"})
    first = _guard(config, tmp_path / "run")
    try:
        before = _snapshot(tmp_path / "run")
        with pytest.raises(workdir_lock.WorkdirBusyError,
                           match=rf"--workdir .*run is in use by another run \(pid {os.getpid()} "
                                 r"on .*, started .*\)\. Two runs in one workdir would mix"):
            train.train_and_evaluate(config, str(tmp_path / "run"))
        assert _snapshot(tmp_path / "run") == before  # the second run wrote nothing
    finally:
        first.close()
    _guard(config, tmp_path / "run").close()  # free again once the first one closed


def test_a_killed_runs_lock_does_not_block_the_next(tmp_path):
    """The kernel drops the flock of a process killed with SIGKILL: no stale lock."""
    import signal
    import subprocess
    import sys

    # The holder sleeps far longer than a loaded machine needs to reach the kill below.
    code = ("import sys, time; from maskdp_jax.run.workdir_lock import WorkdirLock; "
            f"lock = WorkdirLock({str(tmp_path)!r}); print('locked', flush=True); "
            "time.sleep(3600)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        assert proc.stdout.readline().strip() == "locked"
        from maskdp_jax.run import workdir_lock

        with pytest.raises(workdir_lock.WorkdirBusyError, match=rf"pid {proc.pid} on"):
            workdir_lock.WorkdirLock(str(tmp_path))
        # Named for the workdir, not for one command: train.py and the release hold it.
        assert os.listdir(tmp_path) == ["workdir.lock"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        workdir_lock.WorkdirLock(str(tmp_path)).release()  # the lock is free again
    finally:
        proc.kill()
        proc.stdout.close()


def test_checkpoints_beside_the_report_from_an_earlier_version_are_not_ignored(tmp_path, no_model):
    """Issue 19, item 13: checkpoints now live in <workdir>/private; an old workdir's
    <workdir>/checkpoints is neither resumed silently from the wrong place nor started over."""
    legacy = tmp_path / "run" / "checkpoints" / "3"
    legacy.mkdir(parents=True)
    (legacy / "_CHECKPOINT_METADATA").write_text("{}")
    with pytest.raises(ValueError, match=r"run/checkpoints holds checkpoints of an earlier "
                                         r"version.*mv .*run/checkpoints "
                                         r".*run/private/checkpoints"):
        train.train_and_evaluate(tiny_config(), str(tmp_path / "run"))
    assert not (tmp_path / "run" / "private").exists()


# ---------------------------------------------------------------------------------------------
# Corrupt checkpoints and a full disk (issue 19, items 4 and 5)
# ---------------------------------------------------------------------------------------------
def _two_checkpoints(workdir, config):
    """Checkpoints at steps 2 and 3, and the journal of the 3 steps they released."""
    for steps in (2, 3):
        write_checkpoint(workdir, config, ledger_of(steps))
    plan = run_config.privacy_plan(config, num_examples=N_TRAIN)
    rand = for_run(config)
    journal.write_ledger_journal(
        str(workdir), ledger_of(3), privacy=plan.accounting_meta(),
        run=identity.run_identity(identity.to_json_config(config.to_dict()),
                                  randomness_id=rand.public_id(),
                                  topology=identity.current_topology()))
    return os.path.join(checkpoint.checkpoint_directory(str(workdir)), "3")


def _corrupt_meta(step_dir):
    (meta,) = [p for p in os.listdir(os.path.join(step_dir, "meta")) if p == "metadata"]
    with open(os.path.join(step_dir, "meta", meta), "w") as f:
        f.write("garbage{")


def _truncate_arrays(step_dir):
    for root, _, files in os.walk(os.path.join(step_dir, "state")):
        for name in files:
            if "/d" in root.replace(os.sep, "/"):
                path = os.path.join(root, name)
                with open(path, "r+b") as f:
                    f.truncate(os.path.getsize(path) // 2)


@pytest.mark.parametrize("damage", [_corrupt_meta, _truncate_arrays], ids=["meta", "arrays"])
def test_a_corrupt_newest_checkpoint_falls_back_to_the_newest_intact_one(damage, tmp_path):
    config = tiny_config({"privacy.randomness": "seeded"})
    newest = _two_checkpoints(tmp_path, config)
    damage(newest)
    with pytest.warns(UserWarning, match=r"checkpoint step 3 in .*private/checkpoints is "
                                         r"unreadable \(.+\); moved to .*private/corrupt/3-"):
        g = _guard(config, tmp_path)
    try:
        assert g.resume_step == 2  # resumes at step 2; steps 3.. are re-executed, counted once
        assert journal.read_ledger_journal(str(tmp_path)).steps == 3  # the journal keeps 3
        assert os.listdir(tmp_path / "private" / "corrupt")[0].startswith("3-")
        assert g._checkpoints.latest_step() == 2
    finally:
        g.close()


def test_a_fall_back_resume_keeps_the_longer_journal_history(tmp_path):
    """The newest checkpoint (step 3) is unreadable, so the run falls back to step 2 while the
    journal already counts the 3 steps it released: every release of the resumed run keeps the
    longer history (the journal's), never the checkpoint's shorter one, so the reported ε never
    under-counts. Re-executing step 3 adds nothing (identical, counted once); step 4 is new."""
    config = tiny_config(SEEDED)
    _corrupt_meta(_two_checkpoints(tmp_path, config))
    with pytest.warns(UserWarning) as caught:
        g = _guard(config, tmp_path)
    said = " ".join(str(w.message) for w in caught)
    try:
        assert "checkpoint step 3" in said and "newest intact checkpoint, step 2" in said
        assert g.resume_step == 2
        for done, steps in ((2, 3), (3, 3), (4, 4)):
            g.release(_at(done))  # what a metric row or a checkpoint goes through
            assert journal.read_ledger_journal(str(tmp_path)).to_dict() == \
                ledger_of(steps).to_dict()
    finally:
        g.close()


def test_every_step_after_a_resume_is_charged_to_the_ledger_the_first_one_too(tmp_path):
    """``train.train_loop`` with the real guard and a stand-in step (no model): a run stops at
    step 2 (SIGTERM: checkpointed), the next resumes there and runs to the planned end. When each
    step runs, the ledger counts exactly the steps before it, so the first step after the resume
    is charged once it has run, like any other; the end counts every planned step in the ledger,
    the journal and the last checkpoint."""
    import optax

    from maskdp_jax.core.train_step import TrainState

    config = tiny_config({**SEEDED, "privacy.accountant": "rdp", "log_every_steps": STEPS,
                          "checkpoint.every_steps": 1})
    tx = optax.sgd(1.0)
    charged = []  # (step about to run, steps the ledger counts then)

    def run(stop_after=None):
        g, stop = _guard(config, tmp_path), []
        try:
            fresh = TrainState.create(trainable={"w": np.zeros(2, np.float32)}, frozen={}, tx=tx,
                                      mechanism=g.mechanism)
            state, resumed = g.resume(fresh)

            def step(state, batch):
                charged.append((int(state.step), g.ledger(state).steps))
                if stop_after is not None and len(charged) == stop_after:
                    stop.append(True)  # what SIGTERM does
                privacy = state.privacy._replace(step=state.privacy.step + 1)
                return state.replace(privacy=privacy), {"public/loss": np.float32(0.0)}

            state, _, preempted = train.train_loop(
                config, guard=g, state=state, train_step=step, batch_at=lambda s: None,
                workdir=str(tmp_path), stop=stop)
            return resumed, int(state.step), preempted, g.ledger(state).steps
        finally:
            g.close()

    assert run(stop_after=2) == (False, 2, True, 2)
    assert run() == (True, STEPS, False, STEPS)
    assert charged == [(s, s) for s in range(STEPS)]
    assert journal.read_ledger_journal(str(tmp_path)).to_dict() == ledger_of(STEPS).to_dict()
    ckpt = checkpoint.Checkpointer(str(tmp_path), keep=2)
    try:
        meta, _ = ckpt.newest_intact_meta()
    finally:
        ckpt.close()
    assert meta["step"] == STEPS and meta["ledger"] == ledger_of(STEPS).to_dict()


def test_no_readable_checkpoint_is_refused_naming_each(tmp_path, no_model):
    config = tiny_config({"privacy.randomness": "seeded"})
    newest = _two_checkpoints(tmp_path, config)
    _corrupt_meta(newest)
    _truncate_arrays(newest.replace("/3", "/2"))
    with pytest.raises(ValueError, match=r"No checkpoint in .*private/checkpoints can be read: "
                                         r"step 3: .+; step 2: .+\. Restore them from a backup"):
        train.train_and_evaluate(config, str(tmp_path))


def test_disk_full_at_a_checkpoint_fails_clearly_and_keeps_the_last_good_one(tmp_path,
                                                                           monkeypatch):
    """A save that runs out of space (orbax/tensorstore report RESOURCE_EXHAUSTED after writing
    part of the temporary directory): a clear error, the partial files gone, the previous
    checkpoint readable; a temporary directory left by a killed save goes at the next start."""
    import orbax.checkpoint as ocp

    ckpt = checkpoint.Checkpointer(str(tmp_path), keep=3)
    ckpt.save({"w": np.ones(4, np.float32)}, step=1, meta={"step": 1})

    def full_disk(self, step, *args, **kwargs):
        os.makedirs(os.path.join(self.directory, f"{step}.orbax-checkpoint-tmp-1/state"))
        raise ValueError("RESOURCE_EXHAUSTED: Error writing local file: No space left on device")

    monkeypatch.setattr(ocp.CheckpointManager, "save", full_disk)
    with pytest.raises(OSError, match=r"No space left to write checkpoint step 2 in .*RESOURCE_"
                                      r"EXHAUSTED.*last good checkpoint \(step 1\) and the privacy "
                                      r"journal are intact.*free space, then run the same"):
        ckpt.save({"w": np.ones(4, np.float32)}, step=2, meta={"step": 2})
    monkeypatch.undo()
    directory = checkpoint.checkpoint_directory(str(tmp_path))
    assert sorted(os.listdir(directory)) == ["1"]
    assert ckpt.newest_intact_meta() == ({"step": 1}, [])
    ckpt.close()
    os.makedirs(os.path.join(directory, "2.orbax-checkpoint-tmp-7/state"))  # a save killed midway
    reopened = checkpoint.Checkpointer(str(tmp_path), keep=3)
    assert sorted(os.listdir(directory)) == ["1"]  # removed at start, before any save or close
    reopened.close()


def test_a_deleted_journal_is_rebuilt_from_the_checkpoint_ledger(tmp_path, no_model):
    """Issue 19: the journal is gone but a checkpoint holds 3 steps: the resumed run counts them
    (never fewer) and the journal is rewritten from them before anything is released."""
    config = tiny_config({"privacy.randomness": "seeded"})
    write_checkpoint(tmp_path, config, ledger_of(3))
    assert journal.read_ledger_journal(str(tmp_path)) is None
    g = _guard(config, tmp_path)
    try:
        assert g.resume_step == 3
        g.release(_at(3))
        assert journal.read_ledger_journal(str(tmp_path)).steps == 3
    finally:
        g.close()


def test_export_params_writes_the_final_parameters_and_nothing_else(tmp_path):
    """python -m maskdp_jax.export --workdir --dst: the newest checkpoint's parameters
    (trainable and frozen merged) become an init_from checkpoint that models.convert.restore_params
    reads back equal; the meta (the noise secret) and the optimiser state do not leave."""
    from maskdp_jax.models import convert

    trainable = {"head": {"kernel": np.arange(6, dtype=np.float32).reshape(2, 3)}}
    frozen = {"embed": {"kernel": np.full((3, 2), 7.0, np.float32)}}
    ckpt = checkpoint.Checkpointer(str(tmp_path / "run"), keep=2)
    for step in (1, 2):  # the newest is exported
        state = {"trainable": jax.tree.map(lambda x, s=step: x + s, trainable), "frozen": frozen,
                 "opt_state": {"mu": np.ones(3, np.float32)}, "step": np.int32(step)}
        ckpt.save(state, step=step, meta={"step": step, "config": {"model": {"name": "tiny"}},
                                          "noise_key": "SECRET"})
    ckpt.close()
    assert checkpoint.export_params(str(tmp_path / "run"), str(tmp_path / "init")) == 12
    like = {"head": {"kernel": np.zeros((2, 3), np.float32)},
            "embed": {"kernel": np.zeros((3, 2), np.float32)}}
    restored = convert.restore_params(str(tmp_path / "init"), like=like)
    np.testing.assert_array_equal(restored["head"]["kernel"], trainable["head"]["kernel"] + 2)
    np.testing.assert_array_equal(restored["embed"]["kernel"], frozen["embed"]["kernel"])
    def text(path):  # the JSON files (metadata, info, the tree's keys); arrays are binary,
        try:           # where any two letters turn up by chance
            with open(path, encoding="utf-8") as f:
                return f.read()
        except UnicodeDecodeError:
            return ""

    exported = "".join(text(os.path.join(d, f))
                       for d, _, fs in os.walk(tmp_path / "init") for f in fs)
    assert '"head"' in exported  # the tree's keys are in the text searched
    assert "SECRET" not in exported and '"mu"' not in exported and "opt_state" not in exported
    with pytest.raises(FileExistsError):
        checkpoint.export_params(str(tmp_path / "run"), str(tmp_path / "init"))
    with pytest.raises(FileNotFoundError, match="has no checkpoint"):
        checkpoint.export_params(str(tmp_path / "empty"), str(tmp_path / "init2"))
    # Without the head: a model restored from it keeps its own fresh head.
    checkpoint.export_params(str(tmp_path / "run"), str(tmp_path / "nohead"), drop_head=True)
    fresh = {"head": {"kernel": np.full((2, 3), -1.0, np.float32)}, "embed": like["embed"]}
    restored = convert.restore_params(str(tmp_path / "nohead"), like=fresh)
    np.testing.assert_array_equal(restored["head"]["kernel"], fresh["head"]["kernel"])
    np.testing.assert_array_equal(restored["embed"]["kernel"], frozen["embed"]["kernel"])
    with pytest.raises(convert.ConversionError, match="missing from the checkpoint"):
        convert.restore_params(str(tmp_path / "nohead"),
                               like={**fresh, "extra": {"kernel": np.zeros(1, np.float32)}})


def test_a_banded_resume_with_another_strategy_is_refused():
    """The checkpoint holds the banded strategy its noise state was built with; a resume that
    would optimise another one (another jax_privacy, a non-deterministic optimiser) is refused:
    its re-executed steps would differ, and the columns straddling the resume lose their unit
    norm."""
    config = tiny_config({"privacy.noise": "banded", "privacy.bands": 2})
    meta = checkpoint_meta(config, ledger_of(3).to_dict())
    assert len(meta["sampler"]["strategy"]) == 2
    validate(meta, config)
    meta["sampler"]["strategy"] = [c * 1.001 for c in meta["sampler"]["strategy"]]
    with pytest.raises(ValueError, match="sampler .* differs"):
        validate(meta, config)


def test_a_banded_runs_guard_samples_cyclically_and_journals_its_noise(tmp_path, no_model):
    """The trainer's route for a banded plan (the guard's sampler and journal): the private
    stream draws each video only at the steps of its cyclic group (the b-min-separation the
    amplified BandMF ε assumes), and the journal records the noise and its bands, so that ε
    recomputed from the journal alone is the banded one, not an independent-noise reading."""
    import dataclasses

    config = tiny_config({"privacy.noise": "banded", "privacy.bands": 2,
                          "privacy.randomness": "seeded"})
    g = _guard(config, tmp_path)
    try:
        plan = g.plan
        groups: dict[int, set[int]] = {}
        for step in range(plan.steps):
            for i in g.mechanism.batch_at(step).private:
                groups.setdefault(int(i), set()).add(step % plan.bands)
        assert len(groups) > plan.bands and all(len(g) == 1 for g in groups.values()), groups
        done = _at(plan.steps)
        g.release(done)
        with open(tmp_path / journal.JOURNAL) as f:
            recorded = json.load(f)["privacy"]
        assert (recorded["noise"], recorded["bands"]) == ("banded", 2)
        from_journal = dataclasses.replace(plan, noise=recorded.get("noise", "independent"),
                                           bands=recorded.get("bands", 1))
        ledger = journal.read_ledger_journal(str(tmp_path))
        assert from_journal.epsilon(ledger) == g.epsilon_spent(done)
        independent = dataclasses.replace(plan, noise="independent", bands=1)
        assert independent.epsilon(ledger) != pytest.approx(g.epsilon_spent(done), rel=1e-3)
    finally:
        g.close()
