"""The privacy-ledger journal: ``<workdir>/privacy_ledger.json``, the record of what left the run.

A step's result is *released* when anything computed from it can leave the training process: a
checkpoint written to disk, a metrics/log line (metrics.jsonl, TensorBoard, the progress bar), the
final parameters and report. Parameters after step ``t`` depend on every step ``<= t``, so each
release covers every step executed so far. Before every release the run's
:class:`maskdp_jax.run.guard.PrivacyGuard` calls :func:`write_ledger_journal`, which atomically
replaces the journal with the ledger of *all steps executed so far*; the ε in the journal therefore
never under-counts, even after ``kill -9``.

The journal keeps the larger of two histories (a resumed run re-executes steps that the journal
already counts; they are identical, see :mod:`maskdp_jax.run.guard`), which is right only for the
same run: :func:`check_journal` refuses a journal written by another one. The journal holds nothing
secret (the run's identity is a config fingerprint, the randomness' public id and the topology).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from maskdp_jax import accounting
from maskdp_jax.data import atomic

JOURNAL = "privacy_ledger.json"


def write_ledger_journal(workdir: str, ledger: accounting.Ledger, *, privacy: Mapping,
                         run: Mapping) -> str:
    """Atomically replace ``<workdir>/privacy_ledger.json`` (call BEFORE every release).

    Keeps the larger history if the journal already counts more steps (steps re-executed after a
    resume are identical and counted once; see the module docstring).

    Args:
      workdir: the run's output directory.
      ledger: every logical step executed so far.
      privacy: how to account it (``delta``, ``adjacency``, ``sampling``; stored for readers).
      run: what identifies the run (:func:`maskdp_jax.run.identity.run_identity`; nothing secret),
        checked by :func:`check_journal` before a run adopts this journal.

    Returns:
      The journal's path.
    """
    path = os.path.join(workdir, JOURNAL)
    previous = read_ledger_journal(workdir)
    if previous is not None and previous.steps > ledger.steps:
        ledger = previous
    payload = {"ledger": ledger.to_dict(), "steps": ledger.steps, "privacy": dict(privacy),
               "run": dict(run)}
    atomic.write(path, json.dumps(payload, indent=2))
    return path


def read_ledger_journal(workdir: str) -> accounting.Ledger | None:
    """The journal's ledger, or None if the run has not released anything yet.

    Raises:
      ValueError: a journal that cannot be read as a ledger (it must never be silently ignored:
        it is the record of the privacy already spent by what this workdir released).
    """
    return _read_journal(workdir)[0]


def _read_journal(workdir: str) -> tuple[accounting.Ledger | None, dict, dict]:
    path = os.path.join(workdir, JOURNAL)
    if not os.path.exists(path):
        return None, {}, {}
    try:
        with open(path) as f:
            payload = json.load(f)
        ledger = accounting.Ledger.from_dict(payload["ledger"])
        privacy = dict(payload["privacy"])
        run = dict(payload.get("run") or {})
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"{path}: the privacy-ledger journal is corrupt ({type(e).__name__}: {e}). It records "
            "the privacy spent by everything this workdir released, so training cannot continue "
            "here without under-counting: restore the file from a backup, or start over in a "
            "fresh --workdir."
        ) from e
    return ledger, privacy, run


def check_journal(workdir: str, *, privacy: Mapping[str, Any], run: Mapping[str, Any], q: float,
                  noise_multiplier: float) -> None:
    """Refuse a workdir whose journal was written by another run (before any step of this one).

    The journal keeps the larger history (see :func:`write_ledger_journal`), which is right only
    if both histories are the same mechanism with the same randomness, so that the steps this run
    re-executes are identical to the journal's: the same ``privacy`` meta (δ, adjacency,
    sampling, mode), every step at this run's ``q`` and σ, and the same ``run``
    (:func:`maskdp_jax.run.identity.run_identity`: config fingerprint; randomness and topology when
    the journal counts steps). A run killed before its first checkpoint and rerun with another
    seed, learning rate or model, or (secret mode) with a freshly drawn secret, is refused here.

    Raises:
      ValueError: a corrupt journal, or one of another run, naming what differs.
    """
    ledger, saved, saved_run = _read_journal(workdir)
    if ledger is None:
        return
    diff = [f"{k}: journal {saved.get(k, '<absent>')!r} != now {v!r}"
            for k, v in privacy.items() if saved.get(k, "<absent>") != v]
    if saved_run.get("config_fingerprint") != run["config_fingerprint"]:
        diff.append(f"config fingerprint: journal {saved_run.get('config_fingerprint', '<absent>')}"
                    f" != now {run['config_fingerprint']} (another config: seed, model, data, "
                    "optimiser, ...)")
    if ledger.steps:  # only executed steps must be re-executed identically
        if saved_run.get("randomness") != run["randomness"]:
            diff.append(f"randomness: journal {saved_run.get('randomness', '<absent>')} != now "
                        f"{run['randomness']} (the journal's steps used noise and batches this "
                        "run cannot reproduce, e.g. a secret drawn by a run without checkpoint)")
        if saved_run.get("topology") != dict(run["topology"]):
            diff.append(f"topology: journal {saved_run.get('topology', '<absent>')} != now "
                        f"{dict(run['topology'])}")
    diff += [f"a segment of {s.steps} step(s) at q={s.q:g}, sigma={s.noise_multiplier:g} "
             f"!= now q={q:g}, sigma={noise_multiplier:g}" for s in ledger.segments
             if (s.q, s.noise_multiplier) != (float(q), float(noise_multiplier))]
    if diff:
        raise ValueError(
            f"{os.path.join(workdir, JOURNAL)} holds the privacy ledger of another run; this run "
            "would merge two mechanisms into one record. Differences:\n  " + "\n  ".join(diff)
            + "\nUse a fresh --workdir (or restore the original config)."
        )
