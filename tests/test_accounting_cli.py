"""`python -m maskdp_jax.accounting` and the papers' settings."""

import re

import pytest

from maskdp_jax import accounting
from maskdp_jax.accounting import __main__ as cli
from maskdp_jax.accounting import paper_settings


def _numbers(text, key):
    return {m: float(v) for m, v in re.findall(rf"{key}\[(\w+)\] = ([0-9.e+-]+)", text)}


def test_epsilon_command_matches_library(capsys):
    rc = cli.cli(["prog", "epsilon", "--sigma", "1.3", "--q", "0.01", "--steps", "500",
                  "--delta", "1e-5"])
    assert rc == 0
    values = _numbers(capsys.readouterr().out, "epsilon")
    for method in ("rdp", "pld"):
        expected = accounting.epsilon(
            q=0.01, noise_multiplier=1.3, steps=500, delta=1e-5, method=method
        )
        assert values[method] == pytest.approx(expected, rel=1e-5)


def test_epsilon_command_from_dataset_size(capsys):
    args = ["epsilon", "--sigma", "2", "--num-examples", "1000", "--batch-size", "50"]
    rc = cli.cli(["prog", *args, "--epochs", "3", "--delta", "1e-5", "--method", "rdp"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "steps=60" in out  # 3 epochs of ceil(1000 / 50) steps
    value = _numbers(out, "epsilon")["rdp"]
    expected = accounting.epsilon(q=0.05, noise_multiplier=2.0, steps=60, delta=1e-5, method="rdp")
    assert value == pytest.approx(expected, rel=1e-5)


def test_sigma_command_meets_target(capsys):
    args = ["sigma", "--epsilon", "2", "--q", "0.003", "--steps", "3000", "--delta", "1e-5"]
    assert cli.cli(["prog", *args]) == 0
    values = _numbers(capsys.readouterr().out, "sigma")
    assert set(values) == {"rdp", "pld"} and values["pld"] < values["rdp"]
    for method, sigma in values.items():
        eps = accounting.epsilon(
            q=0.003, noise_multiplier=sigma, steps=3000, delta=1e-5, method=method
        )
        assert eps <= 2.0 * (1 + 1e-5)


def test_replace_rdp_reported_as_unavailable(capsys):
    args = ["epsilon", "--sigma", "1", "--q", "0.01", "--steps", "10", "--delta", "1e-5"]
    assert cli.cli(["prog", *args, "--adjacency", "replace"]) == 0
    out = capsys.readouterr().out
    assert "epsilon[rdp] = n/a" in out and "epsilon[pld] =" in out


@pytest.mark.parametrize(
    "args,match",
    [
        (
            ["--num-examples", "400", "--batch-size", "128", "--epochs", "1", "--delta", "1e-2"],
            "1/N",
        ),
        (["--q", "0.01", "--delta", "1e-5"], "--q and --steps"),
        (["--q", "1.5", "--steps", "3", "--delta", "1e-5"], "q"),
        (["--q", "0.01", "--steps", "3", "--num-examples", "9", "--delta", "1e-5"], "either"),
    ],
)
def test_bad_arguments_exit_with_message(capsys, args, match):
    assert cli.cli(["prog", "epsilon", "--sigma", "1", "--method", "pld"] + args) == 2
    assert match in capsys.readouterr().err


def test_table_command(capsys, monkeypatch):
    small = (paper_settings.PaperSetting("small", num_examples=40000, epochs=10, delta=1e-6),)
    monkeypatch.setattr(paper_settings, "PAPER_SETTINGS", small)
    assert cli.cli(["prog", "table", "--epsilons", "2"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| 2 |")]
    assert len(rows) == 1
    sigma_rdp, sigma_pld = (float(x) for x in rows[0].strip("|").split("|")[1:])
    assert sigma_pld <= sigma_rdp
    kw = dict(q=small[0].q, steps=small[0].steps, delta=1e-6)
    assert accounting.epsilon(noise_multiplier=sigma_pld + 5e-5, **kw) <= 2.0
    assert accounting.epsilon(noise_multiplier=sigma_rdp + 5e-5, method="rdp", **kw) <= 2.0


def test_paper_settings():
    ntu, toyota, ucf, hmdb = paper_settings.PAPER_SETTINGS
    assert (ntu.q, ntu.steps, ntu.delta) == (128 / 40320, 47250, 1e-6)
    assert (ucf.num_examples, ucf.epochs, ucf.steps) == (9537, 300, 300 * 75)
    assert hmdb.num_examples == 3570 and toyota.num_examples == 10682
    for s in paper_settings.PAPER_SETTINGS:
        accounting.check_delta(delta=s.delta, num_examples=s.num_examples)


@pytest.mark.parametrize("args,message", [
    (["epsilon", "--sigma", "1", "--q", "1.5", "--steps", "10"], r"q \(sampling rate B/N\) must "
                                                                 r"be < 1, got 1\.5"),
    (["epsilon", "--sigma", "-1", "--q", "0.1", "--steps", "10"], r"noise_multiplier must be >= 0"),
    (["epsilon", "--sigma", "1", "--q", "0.1", "--steps", "10", "--delta", "0"],
     r"delta must satisfy 0 < delta < 1"),
    (["sigma", "--epsilon", "1e-9", "--q", "0.1", "--steps", "10"], r"no accountant could answer"),
], ids=["q-above-1", "negative-sigma", "delta-zero", "unreachable-target"])
def test_invalid_input_exits_2_with_the_message(args, message, capsys):
    argv = args if "--delta" in args else [*args, "--delta", "1e-5"]
    assert cli.cli(["prog", *argv]) == 2
    assert re.search(message, capsys.readouterr().err)
