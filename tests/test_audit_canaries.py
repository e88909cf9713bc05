"""audit.canaries: canaries sit in the region they claim (down to the model's token views), the
one-run bound behaves on known answers, and ``python -m maskdp_jax.audit`` runs the canary
config."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from maskdp_jax.audit import canaries
from maskdp_jax.core.tokenizer import Tokenizer
from maskdp_jax.data import synthetic

STRIDE = (2, 4, 4)


@pytest.fixture(scope="module")
def source():
    train, _ = synthetic.make_splits(num_train=8, num_test=8, frames=8, clip_frames=8, size=32)
    return train.get_batch(np.arange(8)), train.num_classes


@pytest.mark.parametrize("region", canaries.REGIONS)
def test_a_canary_changes_only_its_region_and_flips_its_label(source, region):
    batch, classes = source
    c = canaries.make_canaries(batch, region=region, num_classes=classes, amplitude=1.5,
                               rng=np.random.default_rng(0))
    changed = np.any(c.patterned != c.plain, axis=-1)  # [m, K, T, H, W]
    inside = batch["mask"] == (1 if region == "public" else 0)
    assert not np.any(changed & ~inside), "the pattern leaked outside its region"
    assert all(changed[i].any() for i in range(len(changed))), "a canary without a pattern"
    np.testing.assert_array_equal(c.plain, batch["video"])
    assert np.all(c.label != batch["label"]) and np.all((0 <= c.label) & (c.label < classes))


def test_private_canaries_are_invisible_to_the_public_view_and_public_ones_are_not(source):
    """What the audit's claim rests on: MaskDP's noise-free public pass sees the tokens of the
    public view, and a private-region canary leaves those bit for bit unchanged."""
    batch, classes = source
    tokens = Tokenizer(patch_stride=STRIDE)
    for region, visible in (("private", False), ("public", True)):
        c = canaries.make_canaries(batch, region=region, num_classes=classes, amplitude=1.5,
                                   rng=np.random.default_rng(1))
        mask = jnp.asarray(c.mask)
        plain = np.asarray(tokens.views(jnp.asarray(c.plain), mask).public)
        patterned = np.asarray(tokens.views(jnp.asarray(c.patterned), mask).public)
        assert np.any(plain != patterned) == visible, region


def test_bad_canary_input_is_refused(source):
    batch, classes = source
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="region must be one of"):
        canaries.make_canaries(batch, region="both", num_classes=classes, amplitude=1.0, rng=rng)
    with pytest.raises(ValueError, match="amplitude must be > 0"):
        canaries.make_canaries(batch, region="private", num_classes=classes, amplitude=0.0,
                               rng=rng)
    no_avatar = dict(batch, mask=np.zeros_like(batch["mask"]))
    with pytest.raises(ValueError, match="no public pixel"):
        canaries.make_canaries(no_avatar, region="public", num_classes=classes, amplitude=1.0,
                               rng=rng)


def test_one_run_bound_on_known_answers():
    """A perfect attack reaches close to (never above) the largest certifiable ε; scores that
    ignore the coins certify nothing; one-sided coins are refused."""
    m = 128
    rng = np.random.default_rng(0)
    coin = rng.random(m) < 0.5
    perfect = canaries.one_run_metrics(coin.astype(float), coin, delta=1e-5)
    cap = canaries.largest_certifiable_epsilon(m)
    assert 0.8 * cap < perfect["epsilon_lower_bound"] <= cap + 1e-6
    assert perfect["auc"] == 1.0
    loose = canaries.one_run_metrics(coin.astype(float), coin, delta=1e-3)  # 2mδ = 0.26
    assert loose["epsilon_lower_bound"] < 0.7 * perfect["epsilon_lower_bound"]
    blind = canaries.one_run_metrics(rng.standard_normal(m), coin, delta=1e-5)
    assert blind["epsilon_lower_bound"] < 0.5 and 0.3 < blind["auc"] < 0.7
    with pytest.raises(ValueError, match="every canary on one side"):
        canaries.one_run_metrics(np.ones(4), np.ones(4, bool), delta=1e-5)
    assert 0 < canaries.largest_certifiable_epsilon(16) < cap  # more canaries, more reach
    assert canaries.largest_certifiable_epsilon(8) == 0.0  # too few to certify anything


def test_the_cap_is_a_perfect_attacks_bound_at_the_studys_delta():
    """The report's cap counts the bound's 2mδ term: at the default operating point's design
    (512 canaries, δ = 1e-5) it is above 4, the ε the private-region audit must be able to
    refute, and below the δ = 0 formula; a larger δ lowers it; 128 canaries stay below 4."""
    from maskdp_jax.configs import audit_canaries_default

    config = audit_canaries_default.get_config()
    cap = canaries.perfect_attack_bound(config.num_canaries, delta=config.delta)
    assert 4.0 <= cap < canaries.largest_certifiable_epsilon(config.num_canaries)
    assert canaries.perfect_attack_bound(512, delta=1e-4) < cap
    assert canaries.perfect_attack_bound(128, delta=config.delta) < 4.0
    assert config.regions == ("private",) and config.delta == 1e-5
    assert config.num_canaries + config.input.num_train == 1024


def test_what_each_mode_promises_each_region():
    assert canaries.upper_bound("maskdp", "private", 4.0) == 4.0
    assert math.isinf(canaries.upper_bound("maskdp", "public", 4.0))
    assert canaries.upper_bound("dp", "public", 4.0) == 4.0
    assert math.isinf(canaries.upper_bound("nonprivate", "private", math.inf))
    assert math.isinf(canaries.upper_bound("nonprivate", "public", math.inf))
    assert canaries.upper_bound("public_only", "private", 4.0) == 0.0  # never read
    assert math.isinf(canaries.upper_bound("public_only", "public", 4.0))


def _tiny_run(config, workdir, *, batch: int, delta: float) -> dict:
    """``config`` at a tiny size (maskdp at ε = 4, one seed, 8 + 8 videos, one epoch), run."""
    from maskdp_jax.audit import runs

    config.modes, config.epsilons, config.seeds = ("maskdp",), (4.0,), (0,)
    config.input.num_train, config.num_canaries = 8, 8
    config.batch_size = config.physical_batch_size = batch
    config.num_epochs, config.delta = 1.0, delta
    return runs.run(config, str(workdir))


@pytest.mark.slow
@pytest.mark.heavy  # the canary audit end to end (24 s): in .ci/run only
def test_canary_audit_writes_its_table_and_plot(tmp_path):
    """configs/audit_canaries.py at a tiny size: one row per (mode, ε, region, seed), σ
    calibrated under replace adjacency, the report and the plot."""
    from maskdp_jax.configs import audit_canaries

    report = _tiny_run(audit_canaries.get_config(), tmp_path, batch=4, delta=1e-2)
    rows = report["rows"]
    assert [(r["mode"], r["region"]) for r in rows] == [("maskdp", "private"),
                                                        ("maskdp", "public")]
    assert all(r["noise_multiplier"] > 0 and r["steps"] == 4 for r in rows)
    assert rows[0]["upper_bound"] == 4.0 and math.isinf(rows[1]["upper_bound"])
    assert all(0 <= r["auc"] <= 1 and 0 <= r["epsilon_lower_bound"] <= report["cap"] + 1e-6
               for r in rows)
    text = (tmp_path / "report.md").read_text()
    assert "| maskdp | 4 | private region | 4 |" in text
    assert "| maskdp | 4 | public region | ∞ |" in text
    # 8 canaries certify nothing at 95 % (cap 0): neither promise can be refuted.
    assert report["cap"] == 0.0 and text.count("| 0.00: cannot fail at this ε |") == 2
    assert (tmp_path / "canary_bounds.png").stat().st_size > 0


@pytest.mark.slow
@pytest.mark.heavy  # the default operating point's audit end to end (25 s): in .ci/run only
def test_the_default_operating_point_audit_runs_small(tmp_path):
    """configs/audit_canaries_default.py (the shipped pretrained mvit_cpu on the person videos,
    private region only) at a tiny size: one row per seed, the report says what the model was
    fine-tuned from and on which videos, and the plot has the one region."""
    from maskdp_jax.configs import audit_canaries_default

    report = _tiny_run(audit_canaries_default.get_config(), tmp_path, batch=8, delta=1e-3)
    assert [(r["mode"], r["region"]) for r in report["rows"]] == [("maskdp", "private")]
    text = (tmp_path / "report.md").read_text()
    assert "`mvit_cpu` (selective) fine-tuned from `shipped:mvit_cpu_pretrained`" in text
    assert "(setting `person`)" in text and "public region" not in text
    assert (tmp_path / "canary_bounds.png").stat().st_size > 0
