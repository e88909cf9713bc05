"""Helpers for the catalogue of malformed inputs (issue 6): every one gets a clear error, before
any compile.

The catalogue is one file per layer whose input it checks: ``test_run_config_inputs.py`` (the
config, the dataset size, the entry point), ``test_data_inputs.py`` (masks, labels, videos and
datasets on disk), ``test_accounting_inputs.py`` (privacy numbers) and ``test_run_guard.py``
(checkpoints, the privacy ledger and its journal, the budget). Each table row is a :class:`Case`:
the input, the call that must refuse it, the exception type and a fragment of the message: the
key or file at fault and what to do about it. Every row fails if its check is removed (the call
would return, or fail later with another error).

Rows that go through ``train.train_and_evaluate`` take the ``no_model`` fixture
(``tests/conftest.py``), which replaces ``train.build_model`` by a function that fails the test:
their input must be refused before the model is built (no compile), and what is already in the
workdir must be left as it was ("bad input loses nothing").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import ml_collections
import pytest

from maskdp_jax.configs import default


class Case(NamedTuple):
    id: str
    call: Callable[..., object]  # call(tmp_path)
    error: type[Exception]
    match: str  # regular expression searched in the message


def table(*cases: Case):
    return pytest.mark.parametrize("case", cases, ids=[c.id for c in cases])


def assert_refused(case: Case, tmp_path) -> None:
    with pytest.raises(case.error, match=case.match):
        case.call(tmp_path)


def set_keys(config: ml_collections.ConfigDict, overrides: dict) -> ml_collections.ConfigDict:
    """Sets ``{"dotted.key": value}`` in ``config`` (in place) and returns it."""
    for key, value in overrides.items():
        *path, last = key.split(".")
        node = config
        for name in path:
            node = node[name]
        node[last] = value
    return config


# A tiny run: N_TRAIN synthetic videos, batches of BATCH, STEPS steps at sampling rate Q.
N_TRAIN, BATCH, STEPS = 32, 8, 6
Q = BATCH / N_TRAIN


def tiny_config(overrides: dict | None = None) -> ml_collections.ConfigDict:
    config = set_keys(default.untuned(), {
        "model.name": "mvit_test", "model.init_from": "", "input.num_train": N_TRAIN,
        "input.num_test": 8,
        "batch_size": BATCH, "physical_batch_size": BATCH,
        "num_epochs": STEPS * BATCH / N_TRAIN, "privacy.delta": 1e-3,
        "privacy.noise_multiplier": 1.0, "tensorboard": False,
    })
    return set_keys(config, overrides or {})
