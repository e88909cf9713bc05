r"""Public pretraining: train a model without DP on a public corpus and write it as a backbone::

    python -m maskdp_jax.pretrain --config=configs/pretrain.py --dst=/tmp/backbone
    python train.py --config.model.init_from=/tmp/backbone

The papers fine-tune a backbone pretrained on public data (Kinetics-400) whose classes are not
the target task's; this command makes that backbone for the embedded dataset, or for any training
config whose data are public. It trains ``--config`` in ``nonprivate`` mode into ``--workdir``
(:func:`maskdp_jax.train.train_and_evaluate`: its report and full model are there), then writes
the trained network *without its classifier* to ``--dst``
(:func:`maskdp_jax.run.model.save_backbone`), so a fine-tuning run learns a fresh head for its own
classes and cannot inherit the pretraining's answer to them. ``configs/pretrain.py`` made the
default model's shipped backbone (``init_from = "shipped:mvit_cpu_pretrained"``,
``maskdp_jax.weights``); tests/test_pretrain.py reruns it and compares.

Privacy: none is spent and none is claimed. The corpus must be public (the config's data are the
user's statement of that); ``mode`` must be ``nonprivate`` and the privacy randomness ``seeded``,
so the backbone is a function of the config alone and anyone can rebuild it.
"""

from __future__ import annotations

import os
import sys

from absl import flags, logging

from maskdp_jax import configs, train
from maskdp_jax.reporting import results
from maskdp_jax.run import command
from maskdp_jax.run import model as run_model

DEFAULT_CONFIG = os.path.join(os.path.dirname(configs.__file__), "pretrain.py")


def check(config) -> None:
    """Refuse a config that is not a public, reproducible pretraining run.

    Raises:
      ValueError: ``mode`` is not ``nonprivate`` or ``privacy.randomness`` is not ``seeded``.
    """
    if config.mode != "nonprivate":
        raise ValueError(f"pretraining trains on public data without DP: --config.mode must be "
                         f"'nonprivate', got {config.mode!r} (DP fine-tuning is train.py's).")
    if config.privacy.randomness != "seeded":
        raise ValueError("pretraining publishes its backbone and the command that rebuilds it: "
                         "--config.privacy.randomness must be 'seeded'.")


def pretrain(config, *, workdir: str, dst: str) -> int:
    """Train ``config`` into ``workdir`` and write its backbone to ``dst``; the number of
    parameters written."""
    check(config)
    report = train.train_and_evaluate(config, workdir)
    about = {"pretraining": {
        "input": report["config"]["input"], "num_epochs": report["config"]["num_epochs"],
        "seed": report["config"]["seed"], "classes": report["class_names"],
        "test_top1": report["metrics"]["top1"],
        # The logged training loss: its first steps reproduce within rounding on any CPU
        # (later ones drift apart as 512 steps of SGD amplify the last bits), so they are
        # what a rebuild elsewhere is checked against (tests/test_pretrain.py).
        "loss_history": [[h["step"], h["loss"]] for h in report["history"]]},
        "built_with": results.build_environment()}
    return run_model.save_backbone(os.path.join(workdir, train.MODEL_DIR), dst, about=about)


def run_command(f: flags.FlagValues) -> int:
    """Pretrain as the parsed flags ``f`` say."""
    logging.set_verbosity(logging.WARNING)
    config = f.config
    train.enable_compilation_cache(config.compilation_cache_dir)
    workdir = f.workdir or f"{f.dst.rstrip(os.sep)}.run"
    n = pretrain(config, workdir=workdir, dst=f.dst)
    print(f"Wrote a backbone of {n:,} parameters (no classifier) to {f.dst}: "
          f"--config.model.init_from={os.path.abspath(f.dst)}")
    return 0


def define_flags(fv: flags.FlagValues, argv) -> None:
    """The command's flags (on ``fv``); ``--config`` and its keys are checked first."""
    command.config_flag(fv, argv, default=DEFAULT_CONFIG,
                        help="Pretraining configuration (a training config on public data).",
                        sections=("mode", "input", "model", "privacy"),
                        kind="a training config (configs/pretrain.py)")
    flags.DEFINE_string("dst", None, "Directory to write the backbone to.", required=True,
                        flag_values=fv)
    flags.DEFINE_string("workdir", None, "The pretraining run's directory (default: <dst>.run).",
                        flag_values=fv)


def cli(argv) -> int:
    """``python -m maskdp_jax.pretrain ...`` as a function of the command line: its exit status
    (0 done, 2 bad input with ``error: <reason>`` on stderr)."""
    return command.run(argv, define=define_flags, work=run_command, about=ABOUT)


ABOUT = command.About(
    usage="python -m maskdp_jax.pretrain --config=configs/pretrain.py --dst=DIR",
    summary="Train a model without DP on a public corpus and write it without its classifier, "
            "a backbone for --config.model.init_from.",
    keys="docs/guides/pretraining.md; the config is a training config, configs/default.py")


if __name__ == "__main__":
    sys.exit(cli(sys.argv))
