"""One error convention for every command (run/command.py): bad input gives exit status 2, one
line ``error: <reason>`` on stderr naming what to change, and no new file in the workdir.

Table-driven, in-process (each command is ``cli(argv) -> int``), so a row costs milliseconds:
train.py, sweep.py, ``python -m maskdp_jax.prepare``, ``-m audit`` and ``-m release``. The
accounting and anonymisation commands sit below the run layer and keep their own tables
(tests/test_accounting_cli.py, tests/test_anonymize.py); a user's bad data file for the release is
in tests/test_release_datasets.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import NamedTuple

import numpy as np
import pytest

from maskdp_jax import prepare, sweep, train
from maskdp_jax.audit import __main__ as audit_main
from maskdp_jax.data import testing
from maskdp_jax.release import __main__ as release_main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = os.path.join(ROOT, "configs", "default.py")
SWEEP = os.path.join(ROOT, "configs", "sweep_synthetic.py")
FOLDER = os.path.join(ROOT, "configs", "folder_maskdp.py")
AUDIT = os.path.join(ROOT, "configs", "audit_synthetic.py")
RELEASE = os.path.join(ROOT, "configs", "dpcda_digits.py")
# A tiny, valid training run (the rows add one bad input to it); no persistent XLA cache of the
# user's is switched on by the in-process command.
TINY = ["--config.model.name=mvit_test", "--config.model.init_from=", "--config.input.num_train=32",
        "--config.input.num_test=8", "--config.batch_size=8", "--config.physical_batch_size=8",
        "--config.privacy.delta=1e-3", "--config.compilation_cache_dir="]


class Row(NamedTuple):
    id: str
    cli: object
    args: list[str]  # after the program name; {folder}, {masks}: the bad folder dataset
    match: str  # fragment of the one-line reason
    workdir: bool = True  # takes --workdir (maskdp_jax.prepare writes into input.store_dir)


ROWS = [
    # train.py: the config file and its keys
    Row("train-unknown-key", train.cli, ["--config.epsilon=1"],
        "has no key 'epsilon' (closest: privacy.target_epsilon)"),
    Row("train-unknown-nested-key", train.cli, ["--config.privacy.eps=1"],
        "no key 'eps'"),
    Row("train-unknown-section", train.cli, ["--config.optimiser.name=sgd"],
        "no key 'optimiser' (closest: optimizer"),
    Row("train-missing-config", train.cli, ["--config=configs/nope.py"], "no such config file"),
    Row("train-sweep-config", train.cli, [f"--config={SWEEP}"],
        "is not a training config (configs/*.py with get_config()): it has no 'mode'"),
    Row("train-sweep-config-named", train.cli, [f"--config={SWEEP}"],
        "It is a sweep config: run it with python -m maskdp_jax.sweep"),
    Row("train-bad-type", train.cli, ["--config.batch_size=abc"], "batch_size"),
    Row("train-unknown-flag", train.cli, ["--epochs=3"], "epochs"),
    # train.py: values the config alone decides
    Row("train-mode", train.cli, [*TINY, "--config.mode=dpsgd"], "--config.mode must be one of"),
    Row("train-negative-epsilon", train.cli, [*TINY, "--config.privacy.target_epsilon=-1"],
        "--config.privacy.target_epsilon must be a finite number > 0"),
    Row("train-clip-norm", train.cli, [*TINY, "--config.privacy.l2_clip_norm=0"],
        "--config.privacy.l2_clip_norm"),
    Row("train-batch-over-physical-devices", train.cli, [*TINY, "--config.batch_size=0"],
        "--config.batch_size must be an integer >= 1"),
    Row("train-model", train.cli, [*TINY, "--config.model.name=resnet"], "--config.model.name"),
    # A frozen backbone of a pretrained preset needs its converted weights or an explicit opt-in
    # (with the opt-in the next check, the paper model's clip size, is what stops this run).
    *[Row(f"train-frozen-{strategy}-random-{name}", train.cli,
          [*TINY, f"--config.model.name={name}", f"--config.model.finetune={strategy}"],
          f"--config.model.init_from is empty, so model.finetune='{strategy}' would freeze a "
          f"randomly initialised '{name}'")
      for name, strategy in (("mvit_v2_s", "selective"), ("mvit_v2_s", "norms"),
                             ("mvit_v1_b", "norms"), ("mvit_v1_b", "linear"),
                             ("mvit_cpu", "selective"))],
    Row("train-frozen-random-allowed", train.cli,
        [*TINY, "--config.model.name=mvit_v2_s", "--config.model.finetune=norms",
         "--config.model.allow_random_init=True"], "'mvit_v2_s' is built for clips"),
    Row("sweep-frozen-random", sweep.cli,
        [f"--config={SWEEP}", "--config.base.model.name=mvit_v1_b",
         "--config.base.model.finetune=selective"],
        "--config.model.init_from is empty, so model.finetune='selective'"),
    Row("train-view-in-dp", train.cli, [*TINY, "--config.mode=dp", "--config.view=public"],
        "--config.view must be 'full' in mode 'dp'"),
    # train.py: values that need the data
    Row("train-delta-vs-n", train.cli, [*TINY, "--config.privacy.delta=0.1"], "1/N"),
    Row("train-batch-vs-n", train.cli, [*TINY, "--config.batch_size=32"],
        "must be smaller than the number of training videos"),
    Row("train-unreachable-epsilon", train.cli, [*TINY, "--config.privacy.delta=1e-9",
                                                 "--config.privacy.target_epsilon=1e-3"],
        "target_epsilon=0.001 is unreachable"),
    Row("train-non-binary-mask", train.cli,
        [f"--config={FOLDER}", "--config.model.name=mvit_test", "--config.model.init_from=",
         "--config.input.data_dir={folder}",
         "--config.input.mask_dir={masks}", "--config.batch_size=2",
         "--config.physical_batch_size=2", "--config.privacy.delta=1e-3",
         "--config.compilation_cache_dir="],
        "must be binary"),
    # sweep.py
    Row("sweep-no-config", sweep.cli, [], "--config is required: a sweep config"),
    Row("sweep-training-config", sweep.cli, [f"--config={DEFAULT}"], "is not a sweep config"),
    Row("sweep-unknown-key", sweep.cli, [f"--config={SWEEP}", "--config.sweep.epsilon=(1.0,)"],
        "no key 'epsilon' (closest: sweep.epsilons"),
    Row("sweep-negative-epsilon", sweep.cli, [f"--config={SWEEP}",
                                              "--config.sweep.epsilons=(-1.0,)"],
        "run dp_eps-1_k1_seed0: --config.privacy.target_epsilon"),
    Row("sweep-bad-base", sweep.cli, [f"--config={SWEEP}", "--config.base.batch_size=0"],
        "--config.batch_size must be an integer >= 1"),
    # python -m maskdp_jax.prepare
    Row("prepare-no-config", prepare.cli, [], "--config is required", workdir=False),
    Row("prepare-synthetic", prepare.cli, [f"--config={DEFAULT}"], "folder datasets",
        workdir=False),
    Row("prepare-no-store-dir", prepare.cli, [f"--config={FOLDER}"],
        "set --config.input.store_dir", workdir=False),
    Row("prepare-unknown-key", prepare.cli, [f"--config={FOLDER}", "--config.input.store=x"],
        "no key 'store'", workdir=False),
    Row("prepare-non-binary-mask", prepare.cli,
        [f"--config={FOLDER}", "--config.input.data_dir={folder}",
         "--config.input.mask_dir={masks}", "--config.input.store_dir={work}/store",
         "--workers=1"],
        "must be binary", workdir=False),
    # python -m maskdp_jax.audit
    Row("audit-training-config", audit_main.cli, [f"--config={DEFAULT}"],
        "is not an audit config"),
    Row("audit-unknown-key", audit_main.cli, [f"--config={AUDIT}", "--config.num_shadow=8"],
        "no key 'num_shadow' (closest: num_shadows"),
    Row("audit-unknown-audit", audit_main.cli, [f"--config={AUDIT}", "--config.audit=lira2"],
        "lira2"),
    # python -m maskdp_jax.release
    Row("release-training-config", release_main.cli, [f"--config={DEFAULT}"],
        "is not a release config"),
    Row("release-unknown-key", release_main.cli, [f"--config={RELEASE}", "--config.epsilon=1"],
        "no key 'epsilon'"),
    *(Row(f"release-{name}", release_main.cli,
          [f"--config={RELEASE}", flag, "--config.sweep.orders=(1,)",
           "--config.sweep.epsilons=(5.0,)", "--config.sweep.seeds=(0,)"], match)
      for name, flag, match in [
          ("order", "--config.release.order=200", "smaller than the smallest class"),
          ("min-class-size", "--config.min_class_size=140", "fewer than min_class_size=140"),
          ("clip-norm", "--config.clip_norm=0", "clip norm"),
          ("delta", "--config.delta=0.01", "1/N"),
          ("epsilon", "--config.release.epsilon=-5", "release.epsilon must be > 0, got -5.0")]),
]


@pytest.fixture(scope="module")
def bad_folder(tmp_path_factory):
    """A folder dataset (class folders, no split files) whose masks are not binary."""
    paths = testing.make_ucf101_folder(str(tmp_path_factory.mktemp("folder")), num_frames=8)
    for d, _, files in os.walk(paths["mask_dir"]):
        for name in files:
            np.savez_compressed(os.path.join(d, name), mask=np.full((8, 32, 40), 7, np.uint8))
    return paths


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(row, tmp_path, capsys, bad_folder):
    work = tmp_path / "work"
    work.mkdir()
    (work / "kept.txt").write_text("a user's file")
    argv = ["prog", *(a.format(folder=bad_folder["video_dir"], masks=bad_folder["mask_dir"],
                               work=work) for a in row.args)]
    argv += [f"--workdir={work}"] if row.workdir else []
    status = row.cli(argv)
    *warned, err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    # One line of error, after any warning the checks gave on the way (one line each).
    assert err.startswith("error: ") and all(w.startswith("warning: ") for w in warned), warned
    assert row.match in err, err
    assert sorted(os.listdir(work)) == ["kept.txt"]


def test_an_unexpected_error_keeps_its_traceback(monkeypatch):
    """A bug is not bad input: it propagates (exit status 1 with the traceback)."""
    def broken(config, workdir):
        raise KeyError("a bug")

    monkeypatch.setattr(train, "train_and_evaluate", broken)
    with pytest.raises(KeyError, match="a bug"):
        train.cli(["train.py", *TINY])


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    ["train.py", "--config.epsilon=1"],
    ["-m", "maskdp_jax.sweep", f"--config={DEFAULT}", "--workdir=w"],
    ["-m", "maskdp_jax.prepare", f"--config={DEFAULT}"],
], ids=["train", "sweep", "prepare"])
def test_the_scripts_exit_2_with_one_line(argv, tmp_path):
    """The same convention through ``python <script>`` (the ``__main__`` paths)."""
    proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines


@pytest.mark.parametrize("name", ["train", "sweep", "audit", "release"])
def test_a_workdir_that_is_a_file_is_refused_in_one_line(name, tmp_path, capsys):
    cli, config = {"train": (train.cli, DEFAULT), "sweep": (sweep.cli, SWEEP),
                   "audit": (audit_main.cli, AUDIT), "release": (release_main.cli, RELEASE)}[name]
    path = tmp_path / "notes.txt"
    path.write_text("mine")
    assert cli([name, f"--config={config}", f"--workdir={path}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--workdir={path} is a file: the workdir must be a " \
        "directory" in err
    assert path.read_text() == "mine" and os.listdir(tmp_path) == ["notes.txt"]


def test_a_commands_warnings_are_one_line_without_a_source_path(capsys):
    """A warning raised while a command works reads ``warning: <message>``: one line, no
    installed file's path or line number (Python's default), whitespace collapsed."""
    from absl import flags as absl_flags

    from maskdp_jax.run import command

    def work(fv):
        import warnings

        warnings.warn("7 of 14 videos have no public token cell:\n    MaskDP is DP-SGD for them.",
                      UserWarning, stacklevel=1)

    def define(fv, argv):
        absl_flags.DEFINE_string("workdir", None, "", flag_values=fv)

    about = command.About(usage="x", summary="x", keys="")
    assert command.run(["x"], define=define, work=work, about=about) == 0
    err = capsys.readouterr().err
    assert err == ("warning: 7 of 14 videos have no public token cell: MaskDP is DP-SGD for "
                   "them.\n")
