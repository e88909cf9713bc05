r"""Every mode tuned with one budget on the validation split, in two stages, from the earlier
default's settings (``default.untuned``: 16 epochs, C = 0.1, Adam with 1 warm-up epoch, ε = 1);
what won is the default now (configs/default.py).

    python -m maskdp_jax.sweep --config=configs/sweep_tuning.py --workdir=docs/results/tuning
    python -m maskdp_jax.sweep --config=configs/sweep_tuning.py:maskdp \
        --workdir=docs/results/tuning_maskdp          # and :dp, :public_only, :nonprivate
    python -m maskdp_jax.sweep --config=configs/sweep_tuning.py:per_pass \
        --workdir=docs/results/tuning_per_pass        # MaskDP with an optimiser per pass
    python -m maskdp_jax.sweep --config=configs/sweep_tuning.py:context_lr \
        --workdir=docs/results/tuning_context_lr      # and :context_per_pass: the context data

Stage one (``:person``, the default): ``nonprivate``, ``public_only``, ``dp`` and ``maskdp`` run
the same 12 variants (4 fine-tuning strategies × 3 learning rates) on the same 2 seeds at ε = 1.
Stage two (``:<mode>``): from that mode's best variant (:data:`STAGE_ONE`), the clip norm C (the
private modes: it sets how loud the clipped private sum and its noise are next to the public
gradient) × the epochs; the modes without a private pass have no C and run the epochs alone.

Evaluated on ``input.eval_split = "validation"`` (a fifth of the training split, class-stratified,
held out from training), never on the test split; results.md names each mode's best variant. A
best is chosen by its mean validation top-1 over two seeds, so the winner's figure is biased
upwards (the largest of noisy means); the test split, read once by the headline, is not.
"""

import ml_collections

from maskdp_jax.configs import sweep_headline

FINETUNES = ("linear", "selective", "norms", "full")
LEARNING_RATES = (1e-3, 3e-3, 1e-2)
MODES = ("nonprivate", "public_only", "dp", "maskdp")
#: Each mode's best (fine-tuning strategy, learning rate) of stage one
#: (docs/results/tuning/results.md; tests/test_reporting_committed_results.py checks this
#: against its reports).
STAGE_ONE: dict[str, tuple[str, float]] = {
    "nonprivate": ("full", 1e-2), "public_only": ("full", 1e-3), "dp": ("selective", 1e-2),
    "maskdp": ("selective", 3e-3)}
#: Each mode's best of stage two from its stage-one best (docs/results/tuning_<mode>/results.md;
#: checked against the reports as STAGE_ONE is): its clip norm C (the private modes) and epochs.
#: DP ties at 16 epochs over C ∈ {0.03, 0.1, 0.3} (Adam normalises the update's scale); the tie
#: goes to the first in CLIP_NORMS.
STAGE_TWO: dict[str, dict[str, float]] = {
    "nonprivate": {"num_epochs": 32.0}, "public_only": {"num_epochs": 16.0},
    "dp": {"privacy.l2_clip_norm": 0.03, "num_epochs": 16.0},
    "maskdp": {"privacy.l2_clip_norm": 0.03, "num_epochs": 16.0}}
CLIP_NORMS = (0.03, 0.1, 0.3, 1.0)
EPOCHS = (16.0, 32.0)


def get_config(arg: str = "person") -> ml_collections.ConfigDict:
    if arg in MODES:
        return _stage_two(arg)
    if arg == "private_part":
        return _private_part()
    if arg == "per_pass":
        return _per_pass()
    if arg in ("context_lr", "context_per_pass"):
        return _context(per_pass=arg == "context_per_pass")
    config = sweep_headline.get_config(arg)
    config.title = f"Every mode's strategy and learning rate on the validation split ({arg})"
    config.base.input.eval_split = "validation"
    config.sweep.modes = MODES
    config.sweep.epsilons = (1.0,)
    config.sweep.seeds = (0, 1)
    config.sweep.variants = tuple(
        (f"{finetune}_lr{lr:g}", (("model.finetune", finetune),
                                  ("optimizer.learning_rate", lr)))
        for finetune in FINETUNES for lr in LEARNING_RATES)
    config.config_path = f"configs/sweep_tuning.py:{arg}"
    return config


def _stage_two(mode: str) -> ml_collections.ConfigDict:
    if mode not in STAGE_ONE:
        raise ValueError(f"stage two of {mode!r} starts from its stage-one best, which "
                         "STAGE_ONE does not hold yet: run stage one first "
                         "(configs/sweep_tuning.py's docstring).")
    finetune, lr = STAGE_ONE[mode]
    config = get_config("person")
    config.title = (f"{mode}: clip norm and epochs from its best strategy and learning rate "
                    f"({finetune}, {lr:g}) on the validation split")
    config.base.model.finetune, config.base.optimizer.learning_rate = finetune, lr
    config.sweep.modes = (mode,)
    if mode in ("dp", "maskdp"):
        config.sweep.variants = tuple(
            (f"C{c:g}_ep{e:g}", (("privacy.l2_clip_norm", c), ("num_epochs", e)))
            for c in CLIP_NORMS for e in EPOCHS)
    else:
        config.sweep.variants = tuple((f"ep{e:g}", (("num_epochs", e),)) for e in EPOCHS)
    config.config_path = f"configs/sweep_tuning.py:{mode}"
    return config


def tuned(mode: str) -> tuple[tuple[str, object], ...]:
    """``mode``'s tuned settings (both stages) as the sweep's ``(dotted key, value)`` pairs."""
    finetune, lr = STAGE_ONE[mode]
    return (("model.finetune", finetune), ("optimizer.learning_rate", lr),
            *STAGE_TWO[mode].items())


#: The private pass's peak learning rates tried with an optimiser per pass (stage one's).
PRIVATE_LEARNING_RATES = LEARNING_RATES
#: The best of them (docs/results/tuning_per_pass/results.md, checked against its reports): its
#: mean validation top-1 (48.1 %) is below MaskDP's one-optimiser best (48.3 %), so the default
#: keeps one optimiser and an optimiser per pass stays an option.
PER_PASS_LEARNING_RATE = 1e-3


def _per_pass() -> ml_collections.ConfigDict:
    """MaskDP at its tuned settings with an Adam per pass (``optimizer.private_learning_rate``,
    core/per_pass.py) × the private pass's learning rate: does the private pass add to the
    public one once the unclipped public gradient no longer sets its update's scale?"""
    config = get_config("person")
    config.title = ("maskdp: an optimiser per pass × the private pass's learning rate, from its "
                    "tuned settings, on the validation split")
    config.sweep.modes = ("maskdp",)
    config.sweep.mode_overrides = (("maskdp", tuned("maskdp")),)
    config.sweep.variants = tuple(
        (f"private_lr{lr:g}", (("optimizer.private_learning_rate", lr),))
        for lr in PRIVATE_LEARNING_RATES)
    config.config_path = "configs/sweep_tuning.py:per_pass"
    return config


def _context(*, per_pass: bool) -> ml_collections.ConfigDict:
    """The ``context`` data (half of the label, the room, only in the private part), each mode
    at its tuned settings but its learning rate, which is tried again here on this setting's
    validation split, the same budget for every mode: public-only, DP and MaskDP with one
    optimiser × the learning rate (``:context_lr``); MaskDP with an optimiser per pass × its
    private pass's learning rate (``:context_per_pass``)."""
    config = get_config("person")
    config.base.input.setting = "context"
    if per_pass:
        config.title = ("maskdp on the context data: an optimiser per pass × the private pass's "
                        "learning rate, on the validation split")
        config.sweep.modes = ("maskdp",)
        key = "optimizer.private_learning_rate"
        name = "private_lr"
    else:
        config.title = ("public-only, DP and MaskDP on the context data × the learning rate, "
                        "on the validation split")
        config.sweep.modes = ("public_only", "dp", "maskdp")
        key, name = "optimizer.learning_rate", "lr"
    config.sweep.mode_overrides = tuple((mode, tuned(mode)) for mode in config.sweep.modes)
    config.sweep.variants = tuple((f"{name}{lr:g}", ((key, lr),)) for lr in LEARNING_RATES)
    config.config_path = ("configs/sweep_tuning.py:"
                          + ("context_per_pass" if per_pass else "context_lr"))
    return config


#: The parts of the parameters the private pass may train, from the head up.
PRIVATE_PARTS = ("linear", "selective")


def _private_part() -> ml_collections.ConfigDict:
    """MaskDP with its public pass at public-only's best (full fine-tuning, its learning rate
    and epochs) and its private pass over a part of the parameters
    (``privacy.private_finetune``: the head, or the last blocks' norms and the head) × C: does
    a private pass on few parameters add to what the public views learn alone?"""
    config = get_config("person")
    finetune, lr = STAGE_ONE["public_only"]
    config.title = (f"maskdp: the private pass over part of the parameters, the public pass at "
                    f"public-only's best ({finetune}, {lr:g}), on the validation split")
    config.base.model.finetune, config.base.optimizer.learning_rate = finetune, lr
    config.base.num_epochs = STAGE_TWO["public_only"]["num_epochs"]
    config.sweep.modes = ("maskdp",)
    config.sweep.variants = tuple(
        (f"{part}_C{c:g}", (("privacy.private_finetune", part), ("privacy.l2_clip_norm", c)))
        for part in PRIVATE_PARTS for c in (0.03, 0.3))
    config.config_path = "configs/sweep_tuning.py:private_part"
    return config

