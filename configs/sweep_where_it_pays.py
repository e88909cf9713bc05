r"""Where MaskDP pays: the share of the label that only private pixels show × ε, with public-only,
DP and MaskDP in every cell, each mode at its tuned settings, and non-private training as the
control of what the full video allows this model at all.

    python -m maskdp_jax.sweep --config=configs/sweep_where_it_pays.py \
        --workdir=docs/results/where_it_pays --workers=2

The data are the embedded dataset's ``share`` setting (data/synthetic.py, "Settings"): in a
fraction ``input.private_share`` of the videos the label is shown by the private room alone (its
stripes' orientation; the avatar stands still), in the others by the public avatar alone (its
direction). So public-only can reach at best ``1 - share + share / 4``, the full video 100 %:
MaskDP's public pass learns the public share without noise, its private pass must learn the
rest under DP; DP learns both under DP.

Each mode runs at the settings that won its tuning on the default setting's validation split
(configs/sweep_tuning.py, ``tuned``): this study measures where the method pays at the settings a
user would take from the product, not a per-cell optimum (a per-cell tuning would multiply the
grid by the tuning budget). Every run is evaluated on its validation split
(``input.eval_split = "validation"``), never on a test split: the study guides a choice (whether
to use MaskDP), so it is read where choices are made.

Settings (``--config=configs/sweep_where_it_pays.py:<grid>``):

* ``slice`` (default): shares {0, ¼, ½, ¾, 1} × ε {1, 8}, N = 1,024, seeds 0–2 on data draw 0;
* ``full``: the same shares × ε {1, 8} × N {1,024, 4,096}, seeds 0–4 on data draws 0–2;
* ``size``: the slice's question at four times the videos, N = 4,096, where the label is split
  (share ½) or all private (share 1), public-only, DP and MaskDP at ε {1, 8}, seeds 0–1 on data
  draw 0 (a part of ``full`` this CPU affords: 30 minutes here, the runs four times longer);
* ``size_weights``: MaskDP alone on the size grid's cells with its public sum weighted by
  λ = 0.01, the weight at which its private pass learned the room on N = 1,024 (``weights``);
* ``weights``: MaskDP alone where the private part holds most of the label (shares ½, ¾, 1),
  its public sum weighted by λ ∈ {0.1, 0.01} (``privacy.public_weight``; the slice's MaskDP is
  λ = 1): the public gradient is unclipped while each private one is clipped to C = 0.03, so at
  λ = 1 the public pass may drown the private one. Same seeds, draw and ε as the slice;
* ``per_pass``: MaskDP alone with an optimiser per pass (``optimizer.private_learning_rate``,
  core/per_pass.py: the private pass's Adam no longer scaled by the public gradient), its
  private pass at the learning rate that won its tuning on the default setting
  (``sweep_tuning.PER_PASS_LEARNING_RATE``) and at DP-SGD's tuned one, at every share of the
  slice; same seeds, draw and ε;
* ``size_per_pass``: MaskDP alone on the size grid's cells with an optimiser per pass, its
  private pass at :data:`PER_PASS_LEARNING_RATE`;
* ``draws``: where MaskDP per pass was above both baselines on draw 0 (shares ¾ and 1), the same
  cells on two new data draws (``input.data_seed`` 1 and 2), public-only, DP and MaskDP per pass,
  seeds 0–2: with draw 0's runs (the slice and ``per_pass``) the gap's interval holds the data
  draw's variance.
"""

import ml_collections

from maskdp_jax.configs import sweep_headline, sweep_tuning

SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)
MODES = ("nonprivate", "public_only", "dp", "maskdp")
GRIDS = ("slice", "full", "weights", "size", "size_weights", "per_pass", "size_per_pass",
         "draws")
#: The shares of the ``draws`` grid.
DRAWS_SHARES = (0.75, 1.0)
SIZE_SHARES = (0.5, 1.0)
PUBLIC_WEIGHTS = (0.1, 0.01)
#: The private pass's learning rate of the ``size_per_pass`` and ``draws`` grids: the ``per_pass``
#: grid's better one (DP-SGD's tuned rate), above the other in 9 of its 10 (share, ε) cells on
#: validation.
PER_PASS_LEARNING_RATE = 0.01


def get_config(grid: str = "slice") -> ml_collections.ConfigDict:
    if grid not in GRIDS:
        raise ValueError(f"unknown grid {grid!r}; choose one of {GRIDS} "
                         "(--config=configs/sweep_where_it_pays.py:<grid>).")
    config = sweep_headline.get_config("person")
    config.title = f"Where MaskDP pays: the label's private share × ε ({grid})"
    config.base.input.setting = "share"
    config.base.input.private_share = SHARES[0]
    config.base.input.eval_split = "validation"
    config.sweep.modes = MODES
    config.sweep.mode_overrides = tuple((mode, sweep_tuning.tuned(mode)) for mode in MODES)
    config.sweep.epsilons = (1.0, 8.0)
    sizes = (1024, 4096) if grid == "full" else (1024,)
    config.sweep.variants = tuple(
        (f"share{share:g}" + ("" if len(sizes) == 1 else f"_n{n}"),
         (("input.private_share", share), ("input.num_train", n)))
        for n in sizes for share in SHARES)
    if grid != "full":
        config.sweep.seeds = (0, 1, 2)
        config.sweep.data_seeds = (0,)
    else:
        config.sweep.seeds = (0, 1, 2, 3, 4)
        config.sweep.data_seeds = (0, 1, 2)
    if grid in ("size", "size_weights", "size_per_pass"):
        modes = MODES[1:] if grid == "size" else ("maskdp",)
        weights = (PUBLIC_WEIGHTS[-1],) if grid == "size_weights" else (1.0,)
        config.sweep.modes = modes
        config.sweep.mode_overrides = tuple((mode, sweep_tuning.tuned(mode)) for mode in modes)
        config.sweep.seeds = (0, 1)
        per_pass = ((("optimizer.private_learning_rate", PER_PASS_LEARNING_RATE),)
                    if grid == "size_per_pass" else ())
        config.sweep.variants = tuple(
            (f"share{share:g}_n4096" + ("" if weight == 1.0 else f"_w{weight:g}")
             + (f"_pp{PER_PASS_LEARNING_RATE:g}" if per_pass else ""),
             (("input.private_share", share), ("input.num_train", 4096),
              ("privacy.public_weight", weight), *per_pass))
            for share in SIZE_SHARES for weight in weights)
    if grid == "weights":
        config.sweep.modes = ("maskdp",)
        config.sweep.mode_overrides = (("maskdp", sweep_tuning.tuned("maskdp")),)
        config.sweep.variants = tuple(
            (f"share{share:g}_w{weight:g}", (("input.private_share", share),
                                             ("privacy.public_weight", weight)))
            for share in SHARES[2:] for weight in PUBLIC_WEIGHTS)
    if grid == "per_pass":
        config.sweep.modes = ("maskdp",)
        config.sweep.mode_overrides = (("maskdp", sweep_tuning.tuned("maskdp")),)
        rates = (sweep_tuning.PER_PASS_LEARNING_RATE, sweep_tuning.STAGE_ONE["dp"][1])
        config.sweep.variants = tuple(
            (f"share{share:g}_pp{lr:g}", (("input.private_share", share),
                                          ("optimizer.private_learning_rate", lr)))
            for share in SHARES for lr in rates)
    if grid == "draws":
        modes = MODES[1:]
        config.sweep.modes = modes
        config.sweep.mode_overrides = tuple(
            (mode, sweep_tuning.tuned(mode) + ((("optimizer.private_learning_rate",
                                                 PER_PASS_LEARNING_RATE),)
                                               if mode == "maskdp" else ()))
            for mode in modes)
        config.sweep.data_seeds = (1, 2)
        config.sweep.variants = tuple(
            (f"share{share:g}", (("input.private_share", share),)) for share in DRAWS_SHARES)
    config.config_path = f"configs/sweep_where_it_pays.py:{grid}"
    return config
