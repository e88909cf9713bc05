"""The package installs (``pip install -e .`` into a fresh virtual environment) and every script
in ``examples/`` runs from another directory at a tiny size, as a user would copy it; the first
example of the API guide (docs/api.md), which README.md shows too, runs as printed."""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


def first_python_block(path: str) -> str:
    """The first fenced ``python`` block of a Markdown file."""
    with open(path, encoding="utf-8") as f:
        match = re.search(r"```python\n(.*?)```", f.read(), re.S)
    assert match, f"{path} has no ```python block"
    return match.group(1)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> str:
    """The python of a fresh venv with this checkout installed editable (``--no-deps``: the
    pinned dependencies come from the test environment through a ``.pth`` file, so the test
    needs no network)."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = os.path.join(venv, "bin", "python")
    packages = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"],
                              check=True, capture_output=True, text=True).stdout.strip()
    with open(os.path.join(packages, "test-environment.pth"), "w") as f:
        f.write("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q",
                    "--no-deps", "--no-build-isolation", "-e", ROOT], check=True,
                   capture_output=True)
    return python


def run(python: str, cwd, *args: str) -> str:
    proc = subprocess.run([python, *args], cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.slow
def test_package_imports_from_another_directory(installed, tmp_path):
    out = run(installed, tmp_path, "-c", "import maskdp_jax as mdp, maskdp_jax.accounting, "
              "maskdp_jax.audit, maskdp_jax.configs; print(mdp.__file__, len(mdp.__all__))")
    assert out.startswith(os.path.join(ROOT, "maskdp_jax")), out


USER_PROJECT = {
    "models/__init__.py": "NAME = 'the user models'\n",
    "data/__init__.py": "def images(n):\n    import numpy as np\n"
                        "    return np.random.default_rng(0).normal(size=(n, 8, 8, 3))\n",
    "configs/__init__.py": "STEPS = 2\n",
    "train_mine.py": '''
import jax, jax.numpy as jnp, numpy as np, optax
import configs, data, models                       # the user's own packages
import maskdp_jax as mdp
from maskdp_jax.configs import default              # ours, beside theirs
from maskdp_jax.core import gradient
from maskdp_jax.run import model as run_model

assert models.NAME == "the user models"
images = data.images(64).astype(np.float32)
labels, masks = np.arange(64) % 2, np.zeros((64, 8, 8), np.uint8)
masks[:, :, :4] = 1
def loss(w, image, label):
    return optax.sigmoid_binary_cross_entropy(jnp.sum(w * image), label)
plan = mdp.PrivacyPlan.calibrate(mode="maskdp", num_examples=64, batch_size=16,
                                 steps=configs.STEPS, l2_clip_norm=1.0, delta=1e-4,
                                 target_epsilon=2.0)
rng = mdp.Randomness(mode="seeded", seed=0)
sampler, ledger = rng.sampler(num_examples=64, expected_batch_size=16), mdp.Ledger()
w = jnp.zeros((8, 8, 3))
for step in range(plan.steps):
    drawn = sampler.logical_batch(step, mode=plan.mode)
    def rows(i):
        i, weight = mdp.padded_indices(i, multiple_of=16)
        return mdp.Examples(inputs=images[i], targets=labels[i], masks=masks[i], weights=weight)
    grad, _ = gradient.masked_gradient(loss, w, plan=plan,
                                       key=jax.random.fold_in(rng.noise_key(), step),
                                       public=rows(drawn.public), private=rows(drawn.private),
                                       tokens=mdp.Tokenizer(patch_stride=(4, 4)))
    w = w - 0.1 * grad
    plan.record_step(ledger)
config = default.get_config()
config.model.name = "mvit_test"
config.model.init_from = ""
built = run_model.build(config.model, num_classes=3, seed=0)
print(f"steps {ledger.steps} eps {plan.epsilon(ledger):.3f} model {built.counts()['total']}")
''',
}


@pytest.mark.slow
def test_a_user_project_with_its_own_models_data_and_configs_trains(installed, tmp_path):
    """A project whose own ``models``, ``data`` and ``configs`` packages would shadow generic
    top-level names trains through the public API and builds our model beside its own."""
    for name, text in USER_PROJECT.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    out = run(installed, tmp_path, "train_mine.py")
    assert re.search(r"steps 2 eps [0-9.]+ model [0-9]+", out), out


@pytest.mark.slow
def test_own_model_example_trains_and_reports_epsilon(installed, tmp_path):
    out = run(installed, tmp_path, os.path.join(EXAMPLES, "own_model.py"), "--steps", "3")
    epsilons = [float(e) for e in re.findall(r"ε = ([0-9.]+)", out)]
    assert epsilons and 0 < epsilons[-1] <= 4.0 + 1e-6, out
    assert re.search(r"test accuracy: [0-9.]+", out), out


@pytest.mark.slow
@pytest.mark.heavy  # the digits example's three modes (17 s): in .ci/run only
def test_digits_example_compares_the_modes_at_one_epsilon(installed, tmp_path):
    """The library guide's example on data a package ships, at a reduced budget (one seed, two
    epochs): every mode trains, the private ones at the ε asked for, and each is tested on whole
    images with the public view beside it."""
    out = run(installed, tmp_path, os.path.join(EXAMPLES, "digits.py"), "--seeds", "1",
              "--epochs", "2", "--pretrain_epochs", "2")
    epsilons = [float(e) for e in re.findall(r" (?:dp|maskdp) +ε = ([0-9.]+)", out)]
    assert len(epsilons) == 2 and all(0.9 < e <= 1.0 + 1e-6 for e in epsilons), out
    assert re.search(r"public_only +ε = 0\.00", out), out  # reads no private pixel
    means = {}
    for mode in ("nonprivate", "public_only", "dp", "maskdp"):
        means[mode] = float(re.search(rf"{mode} +mean ([0-9.]+) over 1 seed", out).group(1))
    assert out.count("on whole images (public view") == 4, out
    gap = float(re.search(r"maskdp − max\(public_only, dp\) = ([-+0-9.]+) points", out).group(1))
    assert abs(gap - 100 * (means["maskdp"] - max(means["public_only"], means["dp"]))) < 0.11


#: What examples/own_videos.py prints, step by step (its output, committed at its default size
#: in docs/results/own_videos_example/output.txt, is what docs/guides/own_videos.md quotes).
OWN_VIDEOS_LINES = (
    r"1\. cut (\d+) clips of 15 frames into 2 classes: in_car, street",
    r"2\. anonymised in_car: mean public fraction 0\.\d{3}, (\d+)/(\d+) videos with a person",
    r"2\. anonymised street: mean public fraction 0\.\d{3}, (\d+)/(\d+) videos with a person",
    r"(?:3\. train\.py warned: folder/train: \d+/\d+ videos have no public token cell "
    r"\(after conservative erosion to the patch grid\)\.\n)?"
    r"3\. trained MaskDP on N = (\d+) videos with B = 1: ε = 1\.00 at δ = 1e-05",
    r"4\. test top-1 on (\d+) videos: \d+\.\d % on full videos, \d+\.\d % on the public view "
    r"alone \(chance 50 %\)",
)


def own_videos_steps(out: str) -> list[tuple[str, ...]]:
    """Each step's figures of examples/own_videos.py's output, in order; fails on a missing or
    reordered step."""
    found, rest = [], out
    for pattern in OWN_VIDEOS_LINES:
        match = re.search(pattern, rest)
        assert match, f"{pattern!r} is not in the output, after the steps before it:\n{out}"
        found.append(match.groups())
        rest = rest[match.end():]
    return found


@pytest.mark.slow
@pytest.mark.heavy  # anonymises four real clips and trains a model (a minute): in .ci/run only
def test_own_videos_example_goes_from_raw_clips_to_a_report(installed, tmp_path):
    """The own-videos guide's worked example on real footage, at its smallest size: cut, anonymise
    (the command), train (the command) and report, each step printing its figures."""
    out = run(installed, tmp_path, os.path.join(EXAMPLES, "own_videos.py"),
              f"--workdir={tmp_path / 'work'}", "--clips_per_class=2", "--epochs=1")
    cut, in_car, street, trained, tested = own_videos_steps(out)
    assert cut == ("4",) and in_car[1] == street[1] == "2"
    assert int(in_car[0]) == 2  # the man in the car is found in every cut
    assert trained == ("2",) and tested == ("2",)
    assert sorted(os.listdir(tmp_path / "work" / "anon" / "street")) == [
        "bikes_000.mkv", "bikes_120.mkv"]


def test_the_own_videos_guide_quotes_the_examples_output():
    """docs/guides/own_videos.md quotes examples/own_videos.py's committed output verbatim, and
    that output has every step at the example's default size (16 clips, 12 training videos)."""
    with open(os.path.join(ROOT, "docs", "results", "own_videos_example", "output.txt")) as f:
        output = f.read()
    with open(os.path.join(ROOT, "docs", "guides", "own_videos.md")) as f:
        assert output.strip() in f.read()
    cut, _, _, trained, tested = own_videos_steps(output)
    assert cut == ("16",) and trained == ("12",) and tested == ("4",)


@pytest.mark.slow
def test_accounting_example_agrees_with_the_command_line(installed, tmp_path):
    out = run(installed, tmp_path, os.path.join(EXAMPLES, "privacy_accounting.py"))
    assert out.count("the same ε") == 2, out
    assert "ε[pld, special] after 200 steps" in out, out


@pytest.mark.slow
@pytest.mark.heavy  # trains the example's shadow models (25 s): in .ci/run, out of the suite
def test_audit_example_runs_lira_on_the_users_model(installed, tmp_path):
    out = run(installed, tmp_path, os.path.join(EXAMPLES, "audit_own_model.py"),
              "--models", "6", "--steps", "3", "--examples", "24")
    assert "offline LiRA" in out and "online LiRA" in out, out
    assert "largest ε lower bound" in out, out


@pytest.mark.slow
def test_audit_example_without_the_extra_fails_before_training(installed, tmp_path):
    shadow = tmp_path / "shadow" / "jax_privacy"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('the audit extra is not installed')\n")
    proc = subprocess.run([installed, os.path.join(EXAMPLES, "audit_own_model.py"),
                           "--models", "6", "--steps", "3", "--examples", "24"], cwd=tmp_path,
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path / "shadow")})
    assert proc.returncode != 0
    assert "pip install -e '.[audit]'" in proc.stderr, proc.stderr
    # Raised by the check at the start of main, not by a metric after the shadow models trained.
    assert "metrics.require_extra()" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_the_guides_first_example_is_the_readmes_and_runs(installed, tmp_path):
    guide = first_python_block(os.path.join(ROOT, "docs", "api.md"))
    assert guide in open(os.path.join(ROOT, "README.md"), encoding="utf-8").read(), \
        "README.md must show the API guide's first example verbatim"
    script = tmp_path / "example.py"
    script.write_text(guide)
    out = run(installed, tmp_path, str(script))
    assert re.search(r"ε = [0-9.]+", out), out
