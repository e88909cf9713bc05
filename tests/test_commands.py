"""Every command answers ``--help`` and ``-h`` (exit 0, one line per flag, where the config keys
are documented), and a missing required flag is one ``error:`` line and exit status 2.

In-process (each command is ``cli(argv) -> int``), so the table costs milliseconds; two
subprocesses check the README's form (``python train.py --help``) and a ``python -m`` one.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class Command:
    module: str
    flags: tuple[str, ...]  # flags --help must list
    keys: str = ""  # where --help says the config keys are documented
    missing: tuple[str, ...] = ()  # a command line that lacks a required flag
    error: str = ""  # what its error line names


COMMANDS = {
    "train": Command("maskdp_jax.train", ("--config=", "--workdir=", "--[no]distributed"),
                     "docs/guides/training.md"),
    "sweep": Command("maskdp_jax.sweep", ("--config=", "--workdir=", "--workers="),
                     "docs/guides/sweeps.md", (), "--config is required"),
    "prepare": Command("maskdp_jax.prepare", ("--config=", "--workers=", "--[no]dry_run"),
                       "docs/guides/own_videos.md", (), "--config is required"),
    "audit": Command("maskdp_jax.audit.__main__",
                     ("--config=", "--workdir=", "--[no]only_report"),
                     "docs/guides/auditing.md", (), "--config is required"),
    "release": Command("maskdp_jax.release.__main__", ("--config=", "--workdir="),
                       "docs/guides/dpcda.md", (), "--config is required"),
    "anonymize": Command("maskdp_jax.anonymize.__main__", ("--src=", "--dst=", "--mask_dir="),
                         "docs/guides/anonymize.md", ("--src=a", "--dst=b"), "--mask_dir"),
    "accounting": Command("maskdp_jax.accounting.__main__", ("epsilon", "sigma", "table"),
                          "", ("epsilon", "--delta=1e-5"), "--sigma"),
    "convert": Command("maskdp_jax.convert", ("--src", "--dst", "--num_classes", "--preset"),
                       "", ("--dst=x",), "--src"),
    "export": Command("maskdp_jax.export", ("--workdir", "--dst", "--drop_head"), "",
                      ("--dst=x",), "--workdir"),
    "paper_tables": Command("maskdp_jax.paper_tables", ("--table",), "", (), "--table"),
    "pretrain": Command("maskdp_jax.pretrain", ("--config=", "--dst=", "--workdir="),
                        "docs/guides/pretraining.md", (), "--dst"),
}


@pytest.mark.parametrize("help_flag", ["--help", "-h"])
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_lists_every_flag_on_one_line_and_exits_0(name, help_flag, capsys):
    command = COMMANDS[name]
    cli = importlib.import_module(command.module).cli
    assert cli(["prog", help_flag]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: "), out
    for flag in command.flags:
        line = next((row for row in out.splitlines() if row.strip().startswith(flag)), None)
        assert line, f"{name} --help does not list {flag}:\n{out}"
        assert len(line.split()) > 1, f"{flag} has no help on its line: {line!r}"
    if command.keys:
        assert "--config.<key>=<value>" in out and command.keys in out, out


@pytest.mark.parametrize("name", sorted(n for n, c in COMMANDS.items() if c.error))
def test_a_missing_required_flag_is_one_error_line_and_status_2(name, capsys):
    command = COMMANDS[name]
    cli = importlib.import_module(command.module).cli
    assert cli(["prog", *command.missing]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and command.error in err[0], err
    assert not captured.out


def test_the_help_of_a_sub_command_lists_its_flags(capsys):
    from maskdp_jax.accounting import __main__ as accounting

    assert accounting.cli(["prog", "epsilon", "--help"]) == 0
    out = capsys.readouterr().out
    assert all(f in out for f in ("--sigma", "--delta", "--q", "--adjacency"))


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["train.py", "--help"],
                                  ["-m", "maskdp_jax.anonymize", "-h"]])
def test_help_from_the_shell(argv):
    proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: ") and "--config=" in proc.stdout, proc.stdout


@pytest.mark.parametrize("argv,new", [
    (["train.py", "--config.privacy.microbatch_size=4"], "compute.microbatch_size"),
    (["train.py", "--config.model.compute_dtype=float32"], "compute.dtype"),
    (["sweep.py", "--config=configs/sweep_synthetic.py", "--workdir=w",
      "--config.base.privacy.per_example=ghost"], "base.compute.per_example"),
])
def test_a_moved_key_names_its_new_place(argv, new, capsys):
    from maskdp_jax import sweep, train

    cli = train.cli if argv[0] == "train.py" else sweep.cli
    assert cli(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --config.") and f"is now {new}" in err, err


def test_the_progress_estimate_leaves_out_the_first_steps_compilation():
    import io

    from tqdm import tqdm

    from maskdp_jax import train

    bar = tqdm(total=100, file=io.StringIO())
    bar.start_t -= 60.0  # the first step took a minute: it compiled
    bar.update(1)
    assert bar.format_dict["elapsed"] >= 60.0
    train.restart_clock(bar, done=1)
    d = bar.format_dict
    assert d["n"] == 1 and d["initial"] == 1 and d["elapsed"] < 60.0
    bar.close()


def test_the_console_names_chance_and_the_public_view_beside_full_videos():
    from maskdp_jax import train

    line = train.accuracy_line({"top1": 0.6}, {"public": {"top1": 0.7}}, num_classes=8,
                               split="Validation")
    assert line.startswith("Validation top-1 60.0 % on full videos (chance 12.5 %)")
    assert "public view 70.0 % (diagnostic)" in line
    assert "public view" not in train.accuracy_line({"top1": 0.6}, {}, num_classes=4)
