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


@pytest.mark.heavy  # LiRA's shadow models end to end (45 s): in .ci/run only
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
    attacks = ("offline_seed004", "online_seed004", "offline", "online", "offline_carlini",
               "online_carlini", "offline_aug", "online_aug")  # four queries: augmented too
    assert [e["attack"] for e in table[:8]] == list(attacks)
    assert len(table) == 16 and all(e["seeds"] == 2 for e in table)
    assert table[3]["fit"] == "pooled σ, mean" and table[7]["queries"] == 4
    assert table[5]["fit"] == "Carlini's total σ, median"
    text = (tmp_path / "report.md").read_text()
    assert "| maskdp | 4 | online | pooled σ, mean, 1 |" in text
    assert "| maskdp | 4 | online, Carlini et al. fixed σ | Carlini's total σ, median, 1 |" in text
    assert "| nonprivate | ∞ | offline, Gu & Chen 2024 | per-example σ, mean, 1 |" in text
    # 6 models x 16 videos: 48 OUT trials per seed resolve no TPR; the bound is indicative,
    # the best of 8 attacks x 2 seeds Bonferroni over 16, each row with its cap.
    assert "| not resolved at n = 48 | not resolved at n = 48 |" in text
    assert "| maskdp | 4 | 8 attacks × 2 seeds = 16 |" in text
    assert "95 %)" not in text.split("**The ε lower bound is indicative.**")[1]
    assert "is not in this report" not in text
    for plot in ("asr_vs_epsilon.png", "roc_loglog.png"):
        assert (tmp_path / plot).stat().st_size > 0


def test_only_report_rewrites_the_report_from_report_json(tmp_path, capsys):
    """``--only_report`` trains nothing: report.md and the plots come from the workdir's
    report.json and the config it records (here the committed LiRA audit's); a report of another
    audit than the config's, or none, is refused with exit status 2."""
    import shutil

    import ml_collections

    from maskdp_jax.audit import __main__ as audit_main
    from maskdp_jax.audit import membership

    committed = os.path.join(ROOT, "docs", "results", "audit_synthetic", "report.json")
    shutil.copy(committed, tmp_path / "report.json")
    argv = ["prog", "--config=configs/audit_synthetic.py", f"--workdir={tmp_path}",
            "--only_report"]
    assert audit_main.cli(argv) == 0
    report = json.load(open(committed))
    expected = membership.markdown(ml_collections.ConfigDict(report["config"]), report)
    assert (tmp_path / "report.md").read_text() == expected
    assert json.load(open(tmp_path / "report.json")) == report  # the data are not rewritten
    for plot in ("asr_vs_epsilon.png", "roc_loglog.png"):
        assert (tmp_path / plot).stat().st_size > 0
    capsys.readouterr()
    argv[1] = "--config=configs/audit_canaries.py"
    assert audit_main.cli(argv) == 2
    assert "is a 'lira' audit, the config names 'canaries'" in capsys.readouterr().err
    assert audit_main.cli(["prog", "--config=configs/audit_synthetic.py",
                           f"--workdir={tmp_path / 'none'}", "--only_report"]) == 2
    assert "no " in capsys.readouterr().err


def test_bad_lira_options_are_refused_before_training(tmp_path):
    from maskdp_jax.audit import runs
    from maskdp_jax.configs import audit_synthetic

    for key, value, match in (("variance", "fixed", "variance must be one of"),
                              ("variance", "global", "'global' is now 'pooled'"),
                              ("estimator", "mode", "estimator must be one of"),
                              ("augmentations", ("none", "rotate"), "unknown"),
                              ("augmentations", ("hflip",), "must start with 'none'"),
                              ("augmentations", ("none", "hflip", "hflip"), "each one once")):
        config = audit_synthetic.get_config()
        config.lira[key] = value
        with pytest.raises(ValueError, match=match):
            runs.run(config, str(tmp_path))
    assert not any(tmp_path.iterdir())
