"""Checkpoints (orbax) and the privacy-ledger journal: resume exactly, never under-count ε.

What a checkpoint holds (everything needed to continue bit-exactly):

* the :class:`~maskdp_jax.train_step.TrainState` (trainable and frozen parameters, optimiser
  state, step) as host arrays;
* ``meta`` (JSON): the step, the accountant's :class:`~accounting.Ledger`, the run's config, the
  base noise key, the sampler's parameters, the run's randomness (:mod:`maskdp_jax.randomness`)
  and the topology it ran on. The sampler and the per-step noise have no other state: batches are
  ``default_rng([seed, step, stream])`` and noise keys ``fold_in(key, step)``.

**Checkpoints are private.** With the default ``privacy.randomness = "secret"`` the meta holds the
secret from which the noise key and the Poisson seeds derive: whoever holds a checkpoint can
recompute every noise vector and every private batch of the run, i.e. the guarantee is void for
them (the parameters in a checkpoint are covered by the guarantee like any released parameters;
the secret next to them is not). Keep ``<workdir>/checkpoints`` as private as the training data.
The artefacts meant for release are the final parameters, report.json / report.md and the
metrics; none of them holds the secret.

orbax writes each checkpoint into a temporary directory and renames it when complete (atomic), and
keeps the last ``keep``. :meth:`Checkpointer.restore_latest` restores the newest complete one.

**Released**, for the ledger. A step's result is *released* when anything computed from it can
leave the training process: a checkpoint written to disk, a metrics/log line (metrics.jsonl,
TensorBoard, the progress bar), the final parameters and report. Parameters after step ``t``
depend on every step ``<= t``, so each release covers every step executed so far. Before every
release the trainer calls :func:`write_ledger_journal`, which atomically replaces
``<workdir>/privacy_ledger.json`` with the ledger of *all steps executed so far*; the ε in the
journal therefore never under-counts, even after ``kill -9``.

**Re-executed steps count once.** After a crash, a resumed run restarts from the last checkpoint
and re-executes the steps between it and the crash. Those steps use the same Poisson draws (a pure
function of seed and step), the same noise key (``fold_in(key, step)``, the secret restored from
the checkpoint) and the same parameters, so they compute the *identical* output as before:
re-running a deterministic function on the same inputs releases nothing new, and the composition
counts each distinct step once. The resumed ledger continues from the checkpoint's ledger; the
journal keeps the larger of the two histories. Bit-identical re-execution is only guaranteed on
the same topology (number of processes and devices, backend and device kind, JAX version:
reduction orders, kernels and the clip offsets of multi-process runs depend on it), so a resume
on another topology is refused (:func:`validate_meta`), and so is a journal of another run
(:func:`check_journal`: another config, other randomness, another topology). In secret mode a
fresh run writes a checkpoint at step 0, before any step, so that the secret is on disk before
anything is released.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import jax
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
from flax import serialization

import accounting

PyTree = Any

JOURNAL = "privacy_ledger.json"

# Config keys that may change between a run and its resume: they affect neither the privacy
# accounting nor the data, model or update (only logging, caching and checkpoint cadence).
# ``log_private_metrics`` is not one of them: non-DP rows once logged stay in metrics.jsonl, and
# the report must say so.
RESUMABLE_KEYS = frozenset({
    "log_every_steps", "tensorboard", "compilation_cache_dir",
    "input.prefetch", "checkpoint.every_steps", "checkpoint.keep",
})


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Keys (dotted) whose values differ between two config dicts, ignoring RESUMABLE_KEYS."""
    a, b = _flatten(saved), _flatten(current)
    keys = sorted((set(a) | set(b)) - RESUMABLE_KEYS)
    return [k for k in keys if a.get(k, "<absent>") != b.get(k, "<absent>")]


def config_fingerprint(config: ml_collections.ConfigDict | Mapping) -> str:
    """SHA-256 of the config without RESUMABLE_KEYS: equal iff :func:`config_differences` is
    empty. Holds nothing secret (the config is published in the report)."""
    flat = {k: v for k, v in _flatten(_to_json_config(config)).items() if k not in RESUMABLE_KEYS}
    return hashlib.sha256(json.dumps(flat, sort_keys=True).encode()).hexdigest()


def current_topology() -> dict[str, Any]:
    """What bit-identical re-execution of a step depends on besides its inputs: the number of
    processes and devices (reduction order, clip offsets per host), the backend and device kind
    (kernels) and the JAX version (the compiler)."""
    return {"process_count": jax.process_count(), "device_count": jax.device_count(),
            "platform": jax.default_backend(), "device_kind": jax.devices()[0].device_kind,
            "jax_version": jax.__version__}


def check_same_run(saved: Mapping[str, Any], current: Mapping[str, Any], *, where: str) -> None:
    """Refuse to resume a checkpoint written with a different config.

    Anything that changes the privacy accounting (q, σ, δ, steps, adjacency, sampling), the data,
    the model or the update would make the resumed run a different mechanism than the one the
    ledger accounts for.

    Raises:
      ValueError: listing the differing keys and their saved / current values.
    """
    diff = config_differences(saved, current)
    if diff:
        a, b = _flatten(saved), _flatten(current)
        lines = "\n".join(f"  {k}: checkpoint {a.get(k, '<absent>')!r} != now "
                          f"{b.get(k, '<absent>')!r}" for k in diff)
        raise ValueError(
            f"The checkpoint in {where} was written with a different config; resuming would mix "
            f"two runs under one privacy ledger. Differing keys:\n{lines}\n"
            "Use a fresh --workdir, or restore the original config values."
        )


def _to_json_config(config: ml_collections.ConfigDict | Mapping) -> dict:
    d = config.to_dict() if isinstance(config, ml_collections.ConfigDict) else dict(config)
    return json.loads(json.dumps(d))  # tuples -> lists, as they come back from JSON


class Checkpointer:
    """orbax-backed checkpoints of one run in ``<workdir>/checkpoints``.

    Args:
      workdir: the run's output directory.
      keep: number of most recent checkpoints kept (>= 1).
    """

    def __init__(self, workdir: str, *, keep: int):
        if keep < 1:
            raise ValueError(f"checkpoint.keep must be >= 1; got {keep}.")
        self.directory = os.path.abspath(os.path.join(workdir, "checkpoints"))
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True),
        )

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def save(self, state: PyTree, *, step: int, ledger: accounting.Ledger, config, noise_key_data,
             sampler: Mapping[str, Any], randomness: Mapping[str, Any],
             topology: Mapping[str, Any]) -> None:
        """Write a checkpoint for ``step`` (blocking, so a kill afterwards cannot lose it).

        Args:
          state: the TrainState after ``step`` steps (host or replicated device arrays).
          step: number of logical steps executed.
          ledger: accountant ledger covering those steps.
          config: the run's config (checked on resume).
          noise_key_data: ``jax.random.key_data`` of the run's base noise key (secret).
          sampler: the sampler's parameters (it has no other state).
          randomness: :meth:`maskdp_jax.randomness.Randomness.to_meta` (holds the secret).
          topology: :func:`current_topology` of the run.
        """
        meta = {
            "step": int(step), "ledger": ledger.to_dict(), "config": _to_json_config(config),
            "noise_key": np.asarray(noise_key_data).tolist(), "sampler": dict(sampler),
            "randomness": dict(randomness), "topology": dict(topology),
        }
        self._manager.save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(serialization.to_state_dict(state)),
            meta=ocp.args.JsonSave(meta),
        ), force=True)
        self._manager.wait_until_finished()

    def restore_latest(self, like: PyTree) -> tuple[PyTree, dict] | None:
        """``(state, meta)`` of the newest complete checkpoint, or None if there is none.

        Args:
          like: a state with the run's structure (host arrays), used as the restore target.
        """
        step = self._manager.latest_step()
        if step is None:
            return None
        template = serialization.to_state_dict(like)
        restored = self._manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(template), meta=ocp.args.JsonRestore(),
        ))
        state = serialization.from_state_dict(like, restored["state"])
        return state, dict(restored["meta"])

    def read_latest(self) -> tuple[int, dict, dict] | None:
        """``(step, state as nested dict of numpy arrays, meta)`` of the newest checkpoint,
        without a template (for inspection and tests), or None."""
        step = self._manager.latest_step()
        if step is None:
            return None
        restored = self._manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore(),
        ))
        return step, restored["state"], dict(restored["meta"])

    def close(self) -> None:
        self._manager.close()


def read_latest_meta(workdir: str) -> dict | None:
    """``meta`` of the newest checkpoint in ``workdir``, or None. Reads no arrays, so a resume
    can be checked (:func:`validate_meta`) before the model is built."""
    ckpt = Checkpointer(workdir, keep=1)  # max_to_keep applies on save only; nothing is saved
    try:
        step = ckpt._manager.latest_step()
        if step is None:
            return None
        restored = ckpt._manager.restore(step, args=ocp.args.Composite(
            meta=ocp.args.JsonRestore(),
        ))
        return dict(restored["meta"])
    finally:
        ckpt.close()


def validate_meta(meta: Mapping[str, Any], *, config, noise_key_data, sampler,
                  randomness: Mapping[str, Any], topology: Mapping[str, Any], where: str):
    """Check a restored checkpoint's meta against the current run; return its Ledger.

    Args:
      meta: the checkpoint's meta.
      config / noise_key_data / sampler / randomness: of the current run. In secret mode the
        randomness (and so the noise key) was restored from this meta
        (:func:`maskdp_jax.randomness.for_run`); a checkpoint without a secret is refused.
      topology: :func:`current_topology` now.
      where: the checkpoint directory, for messages.

    Raises:
      ValueError: different config, topology, randomness, noise key or sampler, or a ledger that
        does not cover the checkpoint's step (a corrupt ledger must never under-count).
    """
    check_same_run(meta["config"], _to_json_config(config), where=where)
    saved_topology = meta.get("topology")
    if saved_topology != dict(topology):
        diff = ", ".join(
            f"{k} {(saved_topology or {}).get(k, '<absent>')!r} then, {v!r} now"
            for k, v in topology.items() if (saved_topology or {}).get(k, "<absent>") != v)
        raise ValueError(
            f"Checkpoint in {where} was written on another topology ({diff}). Steps re-executed "
            "after the checkpoint are bit-identical (and counted once by the privacy ledger) only "
            "on the same number of processes and devices, the same backend and device kind and "
            "the same JAX version. Resume on the same topology, or start a new run in a fresh "
            "--workdir."
        )
    if dict(meta.get("randomness") or {}) != dict(randomness):
        raise ValueError(
            f"Checkpoint in {where}: its randomness (mode "
            f"{(meta.get('randomness') or {}).get('mode', '<absent>')!r}) cannot be restored for "
            f"this run (mode {randomness['mode']!r}); without it, re-executed steps would draw "
            "new noise and batches. Use a fresh --workdir."
        )
    if meta["noise_key"] != np.asarray(noise_key_data).tolist():
        raise ValueError(f"Checkpoint in {where}: its noise key differs from this run's.")
    if dict(meta["sampler"]) != dict(sampler):
        raise ValueError(
            f"Checkpoint in {where}: sampler {meta['sampler']} differs from this run's {sampler}."
        )
    try:
        ledger = accounting.Ledger.from_dict(meta["ledger"])
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(
            f"Checkpoint in {where}: its privacy ledger is corrupt ({e}); refusing to resume "
            "without knowing the privacy already spent. Restore the checkpoint from a backup or "
            "start over in a fresh --workdir."
        ) from e
    if ledger.steps != meta["step"]:
        raise ValueError(
            f"Checkpoint in {where}: its ledger counts {ledger.steps} steps but the checkpoint is "
            f"at step {meta['step']}; refusing to resume with an inconsistent privacy ledger."
        )
    return ledger


def write_ledger_journal(workdir: str, ledger: accounting.Ledger, *, privacy: Mapping,
                         run: Mapping) -> str:
    """Atomically replace ``<workdir>/privacy_ledger.json`` (call BEFORE every release).

    Keeps the larger history if the journal already counts more steps (steps re-executed after a
    resume are identical and counted once; see the module docstring).

    Args:
      workdir: the run's output directory.
      ledger: every logical step executed so far.
      privacy: how to account it (``delta``, ``adjacency``, ``sampling``; stored for readers).
      run: what identifies the run (:func:`run_identity`; nothing secret), checked by
        :func:`check_journal` before a run adopts this journal.

    Returns:
      The journal's path.
    """
    path = os.path.join(workdir, JOURNAL)
    previous = read_ledger_journal(workdir)
    if previous is not None and previous.steps > ledger.steps:
        ledger = previous
    payload = {"ledger": ledger.to_dict(), "steps": ledger.steps, "privacy": dict(privacy),
               "run": dict(run)}
    fd, tmp = tempfile.mkstemp(dir=workdir, prefix=".privacy_ledger.")
    with os.fdopen(fd, "w") as f:
        json.dump(payload, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
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


def run_identity(config, *, randomness_id: str, topology: Mapping[str, Any]) -> dict[str, Any]:
    """What the journal records to recognise its run: the config's fingerprint
    (:func:`config_fingerprint`), the randomness' public id
    (:meth:`maskdp_jax.randomness.Randomness.public_id`, not the secret) and the topology."""
    return {"config_fingerprint": config_fingerprint(config), "randomness": randomness_id,
            "topology": dict(topology)}


def check_journal(workdir: str, *, privacy: Mapping[str, Any], run: Mapping[str, Any], q: float,
                  noise_multiplier: float) -> None:
    """Refuse a workdir whose journal was written by another run (before any step of this one).

    The journal keeps the larger history (see :func:`write_ledger_journal`), which is right only
    if both histories are the same mechanism with the same randomness, so that the steps this run
    re-executes are identical to the journal's: the same ``privacy`` meta (δ, adjacency,
    sampling, mode), every step at this run's ``q`` and σ, and the same ``run``
    (:func:`run_identity`: config fingerprint; randomness and topology when the journal counts
    steps). A run killed before its first checkpoint and rerun with another seed, learning rate
    or model, or (secret mode) with a freshly drawn secret, is refused here.

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


def check_budget(*, steps_done: int, planned_steps: int, next_steps: int = 1) -> None:
    """Refuse to run steps beyond the planned number (the privacy budget was set for it).

    Args:
      steps_done: logical steps the ledger counts.
      planned_steps: steps the noise was calibrated for (``train.plan_privacy``).
      next_steps: steps about to run (0: only check that the ledger is within the plan, e.g. on
        resume).

    Raises:
      RuntimeError: if ``steps_done + next_steps > planned_steps``.
    """
    if steps_done + next_steps > planned_steps:
        raise RuntimeError(
            f"Refusing to train past the planned {planned_steps} steps ({steps_done} done, "
            f"{next_steps} more requested): the noise was calibrated for that many, so more "
            "steps would exceed the privacy budget. Start a new run (new --workdir) with a new "
            "budget instead."
        )


def check_epsilon_budget(
    ledger: accounting.Ledger, *, remaining_steps: int, q: float, noise_multiplier: float,
    target_epsilon: float, delta: float, method: str, adjacency: str, sampling: str,
) -> float:
    """Refuse to continue if the ledger plus the remaining planned steps would exceed the target ε.

    Called once before the first step of a (resumed) run. ε only grows with steps, so if the
    whole plan stays within the target, so does every step of it. On a fresh run this holds by
    calibration; it fails when the ledger holds steps the plan did not foresee (e.g. steps with a
    smaller σ from a resumed checkpoint).

    Args:
      ledger: the steps already executed.
      remaining_steps: planned steps still to run.
      q / noise_multiplier: of each remaining step.
      target_epsilon: the budget (the calibration target).
      delta / method / adjacency / sampling: how to account it (as for the calibration).

    Returns:
      The ε the run will have spent after its remaining planned steps.

    Raises:
      RuntimeError: if that ε exceeds ``target_epsilon`` (beyond 1e-6 relative float noise).
    """
    planned = accounting.Ledger(ledger.segments)
    if remaining_steps > 0:
        planned.record(q=q, noise_multiplier=noise_multiplier, steps=remaining_steps)
    eps = planned.epsilon(delta=delta, method=method, adjacency=adjacency, sampling=sampling)
    if eps > target_epsilon * (1 + 1e-6):
        spent = ledger.epsilon(delta=delta, method=method, adjacency=adjacency, sampling=sampling)
        raise RuntimeError(
            f"Refusing to train: the privacy ledger ({ledger.steps} steps, ε = {spent:.4g}) plus "
            f"the {remaining_steps} remaining planned steps would spend ε = {eps:.4g} > target "
            f"ε = {target_epsilon:g} at δ = {delta:g} ({method}, {adjacency}, {sampling}). "
            "Start a new run (new --workdir) with a new budget instead."
        )
    return eps
