"""The run's privacy randomness (maskdp_jax.core.randomness): secret by default, restored on resume,
never in what the run publishes; seeded mode reproducible and labelled as such in the report.

Nothing here compiles a model: the keys and the samplers are built as the privacy guard builds
them (``randomness.for_run``) and the reports and journal are written by the functions it calls.
"""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from maskdp_jax import accounting
from maskdp_jax.configs import default
from maskdp_jax.core import randomness, sampling
from maskdp_jax.core.plan import PrivacyPlan
from maskdp_jax.reporting import privacy as privacy_lib
from maskdp_jax.reporting import run_report as report
from maskdp_jax.run import checkpoint, guard, identity, journal

N, B = 64, 16


def _config(mode: str, seed: int = 0):
    config = default.get_config()
    config.seed = seed
    config.privacy.randomness = mode
    return config


def _for_run(config, restored=None) -> randomness.Randomness:
    """The randomness a run of ``config`` gets (restored from a checkpoint's ``meta``)."""
    return randomness.for_run(mode=config.privacy.randomness, seed=config.seed,
                              restored=(restored or {}).get("randomness"))


def _key_words(rand: randomness.Randomness) -> list[int]:
    return np.asarray(jax.random.key_data(rand.noise_key())).tolist()


def _private_batches(rand: randomness.Randomness, steps: int = 3) -> list[list[int]]:
    s = rand.sampler(num_examples=N, expected_batch_size=B)
    return [s.logical_batch(t, mode="maskdp").private.tolist() for t in range(steps)]


def test_secret_runs_with_the_same_seed_draw_different_noise_and_batches():
    """The published config.seed no longer determines the noise or the private batches."""
    a = _for_run(_config("secret"))
    b = _for_run(_config("secret"))
    assert a.mode == b.mode == "secret" and a.seed == b.seed == 0
    assert _key_words(a) != _key_words(b)
    assert _private_batches(a) != _private_batches(b)
    assert a.public_id() != b.public_id()
    # Not the seeded key / batches either (what anyone with report.json could recompute).
    seeded = _for_run(_config("seeded"))
    assert _key_words(a) != _key_words(seeded)
    assert _private_batches(a) != _private_batches(seeded)


def test_secret_streams_are_derived_separately():
    """A public batch (revealed by the noise-free public gradient) is drawn from a seed of its
    own, so recovering it says nothing about the private stream's seed."""
    s = _for_run(_config("secret")).sampler(
        num_examples=N, expected_batch_size=B)
    assert s.private_seed is not None and s.private_seed != s.seed
    assert s.seed >= 2**32 or s.private_seed >= 2**32  # 128-bit, not a 32-bit seed


def test_seeded_mode_reproduces_the_earlier_seeded_runs():
    """Seeded runs draw exactly what earlier versions drew (committed results stay reproducible)."""
    rand = _for_run(_config("seeded", seed=5))
    assert rand == _for_run(_config("seeded", seed=5))
    assert _key_words(rand) == np.asarray(jax.random.key_data(
        jax.random.key(5 + 1_000_003))).tolist()
    old = sampling.PoissonSampler(num_examples=N, expected_batch_size=B, seed=5)
    assert _private_batches(rand) == [old.logical_batch(t, mode="maskdp").private.tolist()
                                      for t in range(3)]
    assert rand.public_id() == "seeded:5" and rand.to_meta() == {"mode": "seeded", "secret": None}


def test_secret_is_restored_from_the_checkpoint(tmp_path):
    """Resume in secret mode: the checkpoint's secret gives the same noise key and batches, so
    re-executed steps are identical; validate_meta accepts it."""
    config = _config("secret")
    rand = _for_run(config)
    ledger = accounting.Ledger()
    ledger.record(q=B / N, noise_multiplier=1.0, steps=2)
    sampler = {"num_examples": N, "expected_batch_size": config.batch_size,
               "seed": config.seed, "sampling": config.sampling}
    ckpt = checkpoint.Checkpointer(str(tmp_path), keep=1)
    try:
        ckpt.save({"step": np.int32(2)}, step=2, meta={
            "step": 2, "ledger": ledger.to_dict(), "config": config.to_dict(),
            "noise_key": np.asarray(jax.random.key_data(rand.noise_key())).tolist(),
            "sampler": sampler, "randomness": rand.to_meta(),
            "topology": identity.current_topology(), "state_format": guard.STATE_FORMAT})
    finally:
        ckpt.close()
    meta = checkpoint.read_latest_meta(str(tmp_path))
    resumed = _for_run(config, meta)
    assert resumed == rand
    assert _key_words(resumed) == _key_words(rand)
    assert _private_batches(resumed) == _private_batches(rand)
    restored_ledger = guard.validate_meta(
        meta, config=config.to_dict(), noise_key_data=jax.random.key_data(resumed.noise_key()),
        sampler=sampler, randomness=resumed.to_meta(), topology=identity.current_topology(),
        where="ckpt")
    assert restored_ledger.steps == 2
    # A fresh draw (e.g. a secret lost with its checkpoint) is refused.
    other = _for_run(config)
    with pytest.raises(ValueError, match=r"its randomness \(mode 'secret'\) cannot be restored"):
        guard.validate_meta(
            meta, config=config.to_dict(), noise_key_data=jax.random.key_data(other.noise_key()),
            sampler=sampler, randomness=other.to_meta(), topology=identity.current_topology(),
            where="ckpt")


def test_multi_host_secret_is_process_0s(monkeypatch):
    """On several hosts every process uses the secret broadcast from process 0."""
    from jax.experimental import multihost_utils

    sent = []

    def broadcast_one_to_all(x):
        sent.append(np.asarray(x))
        return np.array([1, 2, 3, 4], np.uint32)  # what process 0 drew

    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "broadcast_one_to_all", broadcast_one_to_all)
    a = _for_run(_config("secret"))
    b = _for_run(_config("secret"))
    assert len(sent) == 2 and sent[0].dtype == np.uint32 and sent[0].shape == (4,)
    assert a == b and a.secret == 1 + (2 << 32) + (3 << 64) + (4 << 96)


def _secret_forms(rand: randomness.Randomness) -> list[str]:
    """Ways the secret (or what derives from it) could appear in a text file."""
    s = rand.sampler(num_examples=N, expected_batch_size=B)
    forms = [str(rand.secret), format(rand.secret, "x"), format(rand.secret, "X"),
             str(s.seed), str(s.private_seed)]
    words = _key_words(rand)
    forms += [json.dumps(words), ", ".join(map(str, words))]
    return forms


def _plan(mode: str) -> PrivacyPlan:
    """The plan of the three recorded steps at q = B/N, σ = 1."""
    return PrivacyPlan(mode=mode, num_examples=N, batch_size=B, steps=3, l2_clip_norm=1.0,
                       noise_multiplier=1.0, delta=1e-3)


def test_published_artefacts_hold_no_secret(tmp_path):
    """What a secret-mode run writes outside its checkpoints (privacy report, run report,
    journal) and prints (the Randomness repr) holds neither the secret nor its derived keys."""
    config = _config("secret")
    rand = _for_run(config)
    ledger = accounting.Ledger()
    ledger.record(q=B / N, noise_multiplier=1.0, steps=3)
    privacy = privacy_lib.privacy_report(plan=_plan("maskdp"), ledger=ledger,
                                         randomness="secret")
    run = report.RunReport(
        config=config.to_dict(), privacy=privacy.to_dict(),
        privacy_markdown=privacy.to_markdown(), history=[],
        metrics={"top1": 0.5, "top5": 1.0, "mean_class_accuracy": 0.5, "num_examples": 2,
                 "per_class_accuracy": [0.5], "confusion": [[2]]},
        class_names=["a"], train_class_counts=[2], parameters={"trainable": 1, "total": 1},
        timing={"train_seconds": 1.0, "total_seconds": 1.0, "steps": 3})
    report.write(run, str(tmp_path))
    journal.write_ledger_journal(
        str(tmp_path), ledger, privacy={"mode": "maskdp"},
        run=identity.run_identity(config.to_dict(), randomness_id=rand.public_id(),
                                  topology=identity.current_topology()))
    texts = {name: (tmp_path / name).read_text()
             for name in ("report.json", "report.md", journal.JOURNAL)}
    texts["repr"] = repr(rand) + str(rand)
    for name, text in texts.items():
        for form in _secret_forms(rand):
            assert form not in text, (name, form)
    assert "secret kept in the checkpoints" in texts["report.md"]
    assert "WARNING" not in texts["report.md"]
    assert json.loads(texts["report.json"])["privacy"]["randomness"] == "secret"


@pytest.mark.parametrize("mode", ["maskdp", "dp"])
def test_seeded_report_carries_the_warning(mode):
    ledger = accounting.Ledger()
    ledger.record(q=B / N, noise_multiplier=1.0, steps=3)
    seeded = privacy_lib.privacy_report(plan=_plan(mode), ledger=ledger, randomness="seeded")
    warning = ("randomness seeded from config.seed (published in this report): noise and batches "
               "can be recomputed — the ε holds only if the seed is kept secret; for "
               "reproducibility experiments, not for releasing models")
    assert warning in seeded.statement and warning in seeded.to_markdown()
    assert seeded.to_dict()["randomness"] == "seeded"
    assert "| randomness | seeded |" in seeded.to_markdown()
    secret = privacy_lib.privacy_report(plan=_plan(mode), ledger=ledger, randomness="secret")
    assert warning not in secret.statement
    assert "seed 0 (also the noise and the batches" in report.RunReport(
        config=_config("seeded").to_dict(), privacy={}, privacy_markdown="", history=[],
        metrics={"top1": 0.5, "top5": 1.0, "mean_class_accuracy": 0.5, "num_examples": 2,
                 "per_class_accuracy": [0.5], "confusion": [[2]]},
        class_names=["a"], train_class_counts=[2],
        parameters={"trainable": 1, "total": 1},
        timing={"train_seconds": 1.0, "total_seconds": 1.0, "steps": 3}).to_markdown()


def test_shipped_configs_are_secret_but_the_research_sweep():
    from maskdp_jax.configs import (
        hmdb51_maskdp,
        ntu60_xsub_maskdp,
        sweep_synthetic,
        tsh_cs_maskdp,
        ucf101_maskdp,
    )

    for module in (default, hmdb51_maskdp, ntu60_xsub_maskdp, tsh_cs_maskdp, ucf101_maskdp):
        assert module.get_config().privacy.randomness == "secret", module.__name__
    assert sweep_synthetic.get_config().base.privacy.randomness == "seeded"
