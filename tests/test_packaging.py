"""One installed import root: pyproject's package list names every package folder of the
repository, the wheel holds ``maskdp_jax`` alone with its licences, and the wheel runs a command
with no checkout in sight."""

from __future__ import annotations

import os
import pathlib
import site
import subprocess
import sys
import tomllib
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _setuptools() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def _package_folders() -> dict[str, pathlib.Path]:
    """``{installed package name: its folder in the repository}``, read from the folders."""
    roots = {"maskdp_jax": ROOT / "maskdp_jax"}
    roots |= {name: ROOT / folder for name, folder in _setuptools()["package-dir"].items()}
    out = {}
    for name, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            relative = init.parent.relative_to(folder).parts
            out[".".join((name, *relative))] = init.parent
    return out


def test_every_package_folder_is_listed_and_mapped():
    listed = set(_setuptools()["packages"]) - {"maskdp_jax.anonymize.weights"}
    assert listed == set(_package_folders())
    assert set(_setuptools()["package-dir"]) == {
        "maskdp_jax.models", "maskdp_jax.accounting", "maskdp_jax.data", "maskdp_jax.configs"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(ROOT)], check=True,
                   capture_output=True)
    (path,) = out.glob("maskdp_jax-*.whl")
    return path


@pytest.mark.slow
def test_the_wheel_installs_one_root_and_carries_its_licences(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = z.read(info).decode()
        top_level = z.read(info.replace("METADATA", "top_level.txt")).decode().split()
    assert top_level == ["maskdp_jax"]
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {
        "maskdp_jax"}
    assert "License-Expression: Apache-2.0 AND MIT" in metadata
    licences = {n.rsplit("licenses/", 1)[1] for n in names if "/licenses/" in n}
    assert {"LICENSE", "NOTICE"} <= licences
    for folder in ("models", "accounting", "data", "configs"):  # mapped from the repository top
        assert f"maskdp_jax/{folder}/__init__.py" in names
    assert "maskdp_jax/configs/default.py" in names
    from maskdp_jax.anonymize import model_files

    for name in os.listdir(model_files.WEIGHTS_DIR):
        assert f"maskdp_jax/anonymize/weights/{name}" in names
    # The default run's shipped backbone: init_from="shipped:..." resolves inside the wheel.
    from maskdp_jax import weights

    for backbone in weights.NAMES:
        for name in ("params.safetensors", "model.json"):
            assert f"maskdp_jax/weights/{backbone}/{name}" in names


@pytest.mark.slow
def test_the_wheel_runs_a_command_without_the_checkout(wheel, tmp_path):
    """Installed from the wheel into a fresh venv (dependencies from the test environment), run
    from a directory that holds packages named like ours: the command is the wheel's."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    packages = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"],
                              check=True, capture_output=True, text=True).stdout.strip()
    # The test environment's site-packages as a plain path entry: its .pth files (the editable
    # install of this checkout among them) are not run, so maskdp_jax can only be the wheel's.
    with open(os.path.join(packages, "test-environment.pth"), "w") as f:
        f.write("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q",
                    "--no-deps", str(wheel)], check=True, capture_output=True)
    project = tmp_path / "project"
    for name in ("models", "data", "configs"):
        (project / name).mkdir(parents=True)
        (project / name / "__init__.py").write_text("raise ImportError('the user project')\n")
    proc = subprocess.run(
        [python, "-c", "import maskdp_jax.models, maskdp_jax.configs, os; "
         "print(os.path.dirname(maskdp_jax.models.__file__))"],
        cwd=project, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == os.path.join(packages, "maskdp_jax", "models")
    proc = subprocess.run([python, "-m", "maskdp_jax.accounting", "epsilon", "--sigma", "1",
                           "--q", "0.01", "--steps", "100", "--delta", "1e-5"],
                          cwd=project, capture_output=True, text=True)
    assert proc.returncode == 0 and "epsilon[pld] = " in proc.stdout, proc.stdout + proc.stderr
