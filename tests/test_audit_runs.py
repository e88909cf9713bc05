"""``python -m maskdp_jax.audit`` end to end on the coupled-sampling audit, at a tiny size."""

import json
import os
import subprocess
import sys

import pytest

from maskdp_jax.configs import audit_coupled

pytestmark = pytest.mark.slow  # every test here trains, audits or compiles a model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_coupled_audit_command_writes_its_report(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "maskdp_jax.audit", "--config=configs/audit_coupled.py",
         f"--workdir={tmp_path}", "--config.input.num_train=16", "--config.batch_size=4",
         "--config.physical_batch_size=8", "--config.attack_steps=4"],
        cwd=ROOT, capture_output=True, text=True, env=os.environ | {"JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.load(open(tmp_path / "report.json"))
    rows = {r["sampling"]: r for r in report["rows"]}
    assert rows["coupled"]["recall"] == 1.0 and rows["coupled"]["precision"] == 1.0
    assert rows["decoupled"]["public_batch_recovered_exactly"] == 4
    assert rows["coupled"]["epsilon"] > rows["decoupled"]["epsilon"]
    assert "| coupled | 4/4 steps | 1.00 | 1.00 |" in (tmp_path / "report.md").read_text()


def test_unknown_audit_is_refused(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "maskdp_jax.audit", "--config=configs/audit_coupled.py",
         f"--workdir={tmp_path}", "--config.audit=nope"],
        cwd=ROOT, capture_output=True, text=True, env=os.environ | {"JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 2 and "config.audit must be one of" in proc.stderr
    assert audit_coupled.get_config().audit == "coupled"


def test_lira_audit_writes_its_table_and_plot(tmp_path):
    """configs/audit_synthetic.py at a tiny size: one row per (mode, ε, seed), the table's mean ±
    std over seeds, the report and the ASR^M plot."""
    from maskdp_jax.audit import membership, runs
    from maskdp_jax.configs import audit_synthetic

    config = audit_synthetic.get_config()
    config.modes, config.epsilons, config.seeds = ("nonprivate", "maskdp"), (4.0,), (0, 1)
    config.input.num_train, config.num_shadows, config.chunk = 16, 6, 6  # LOO: 2 per side
    config.batch_size = config.physical_batch_size = 4
    config.num_epochs = 1.0
    report = runs.run(config, str(tmp_path))
    assert [(r["mode"], r["epsilon"], r["seed"]) for r in report["rows"]] == [
        ("nonprivate", float("inf"), 0), ("nonprivate", float("inf"), 1),
        ("maskdp", 4.0, 0), ("maskdp", 4.0, 1)]
    row = report["rows"][2]
    assert row["noise_multiplier"] > 0 and 0.5 <= row["attacks"]["online"]["asr_max"] <= 1
    table = membership.table(report)
    attacks = ("offline_seed004", "online_seed004", "offline", "online", "offline_aug",
               "online_aug")  # four queries configured: the augmented attacks too
    assert [e["attack"] for e in table[:6]] == list(attacks)
    assert len(table) == 12 and all(e["seeds"] == 2 for e in table)
    assert table[3]["fit"] == "global σ, mean" and table[5]["queries"] == 4
    text = (tmp_path / "report.md").read_text()
    assert "| maskdp | 4 | online | global σ, mean, 1 |" in text
    assert "| nonprivate | ∞ | offline, Gu & Chen 2024 | per-example σ, mean, 1 |" in text
    for plot in ("asr_vs_epsilon.png", "roc_loglog.png"):
        assert (tmp_path / plot).stat().st_size > 0


def test_bad_lira_options_are_refused_before_training(tmp_path):
    from maskdp_jax.audit import runs
    from maskdp_jax.configs import audit_synthetic

    for key, value, match in (("variance", "fixed", "variance must be one of"),
                              ("estimator", "mode", "estimator must be one of"),
                              ("augmentations", ("none", "rotate"), "unknown"),
                              ("augmentations", ("hflip",), "must start with 'none'"),
                              ("augmentations", ("none", "hflip", "hflip"), "each one once")):
        config = audit_synthetic.get_config()
        config.lira[key] = value
        with pytest.raises(ValueError, match=match):
            runs.run(config, str(tmp_path))
    assert not any(tmp_path.iterdir())
