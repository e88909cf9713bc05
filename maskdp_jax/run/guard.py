"""The privacy guard of a run: resume refusal, the budget, and "nothing leaves before the journal".

One :class:`PrivacyGuard` per training run owns everything whose *order* decides whether the
reported ε is true: the ledger of executed steps, the journal (:mod:`maskdp_jax.run.journal`), the
checkpoints (:mod:`maskdp_jax.run.checkpoint`) and the run's identity
(:mod:`maskdp_jax.run.identity`). Its methods are the only way the trainer touches them, so no
caller can get the order wrong:

* ``PrivacyGuard(...)`` (before the model is built, so bad input fails in seconds): restores or
  draws the run's randomness, validates the newest checkpoint's meta once (config, topology,
  randomness, noise key, sampler, ledger), refuses a journal of another run, refuses a ledger
  past the planned steps or one that would end above the target ε;
* :meth:`PrivacyGuard.resume`: restores the validated checkpoint's arrays, or (fresh run, secret
  randomness) writes a step-0 checkpoint so the secret is on disk before anything is released;
* :meth:`PrivacyGuard.release` (journal, then emit a log line, the report, ...) and
  :meth:`PrivacyGuard.save` (journal, then checkpoint).

The private step itself, its sampler, its budget rule, its noise key and its step counter, is
the run's :class:`~maskdp_jax.core.mechanism.Mechanism` (``PrivacyGuard.mechanism``), the same
object a library user trains with: the guard makes it from the plan and the restored
randomness, and reads the ledger from the state the mechanism charges (``state.privacy``).

What a checkpoint holds (everything needed to continue bit-exactly): the
:class:`~maskdp_jax.core.train_step.TrainState` as host arrays (its ``privacy`` the mechanism's
state: counter, base noise key, banded noise), and a JSON ``meta``: the step, the
:class:`~maskdp_jax.accounting.Ledger`, the run's config, the base noise key, the sampler's
parameters, the run's randomness (:mod:`maskdp_jax.core.randomness`) and the topology. The sampler
and the per-step noise have no other state: batches are ``default_rng([seed, step, stream])`` and
noise keys ``fold_in(key, step)``.

**Checkpoints are private.** With the default ``privacy.randomness = "secret"`` the meta holds the
secret from which the noise key and the Poisson seeds derive: whoever holds a checkpoint can
recompute every noise vector and every private batch of the run, i.e. the guarantee is void for
them (the parameters in a checkpoint are covered by the guarantee like any released parameters;
the secret next to them is not). Keep ``<workdir>/private`` (the checkpoints) as private as the
training data. The artefacts meant for release are the final parameters, report.json /
report.md and the metrics; none of them holds the secret.

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
(:func:`maskdp_jax.run.journal.check_journal`: another config, other randomness, another topology).
The assumption is checked, not trusted: every re-executed step that was logged is compared with
its first execution's row (:meth:`maskdp_jax.run.metrics.MetricWriter.check_reproduced`), and a
difference stops the run before anything of the second execution is released.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import jax
import numpy as np

from maskdp_jax import accounting
from maskdp_jax.core import randomness as randomness_lib
from maskdp_jax.core.mechanism import Mechanism
from maskdp_jax.core.plan import PrivacyPlan
from maskdp_jax.run import checkpoint, identity, journal
from maskdp_jax.run.workdir_lock import WorkdirLock

PyTree = Any
T = TypeVar("T")


#: The layout of a checkpoint's state: 2 holds the mechanism's state (``TrainState.privacy``).
STATE_FORMAT = 2


def validate_meta(meta: Mapping[str, Any], *, config: Mapping[str, Any], noise_key_data, sampler,
                  randomness: Mapping[str, Any], topology: Mapping[str, Any], where: str):
    """Check a restored checkpoint's meta against the current run; return its Ledger.

    Args:
      meta: the checkpoint's meta.
      config / noise_key_data / sampler / randomness: of the current run (``config`` as a plain
        dict). In secret mode the randomness (and so the noise key) was restored from this meta
        (:func:`maskdp_jax.core.randomness.for_run`); a checkpoint without a secret is refused.
      topology: :func:`maskdp_jax.run.identity.current_topology` now.
      where: the checkpoint directory, for messages.

    Raises:
      ValueError: different config, topology, randomness, noise key or sampler, or a ledger that
        does not cover the checkpoint's step (a corrupt ledger must never under-count).
    """
    if meta.get("state_format") != STATE_FORMAT:
        raise ValueError(
            f"Checkpoint in {where} was written by an earlier maskdp_jax (its training state has "
            "no mechanism state): finish that run with the version that wrote it, or start again "
            "in a fresh --workdir.")
    identity.check_same_run(meta["config"], identity.to_json_config(config), where=where)
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


def check_epsilon_budget(ledger: accounting.Ledger, plan: PrivacyPlan) -> float:
    """Refuse to continue if the ledger plus the plan's remaining steps would exceed its target ε.

    Called once before the first step of a (resumed) run whose σ was calibrated. ε only grows
    with steps, so if the whole plan stays within the target, so does every step of it. On a
    fresh run this holds by calibration; it fails when the ledger holds steps the plan did not
    foresee (e.g. steps with a smaller σ from a resumed checkpoint).

    Args:
      ledger: the steps already executed.
      plan: the run's plan (``target_epsilon`` set); the remaining ``plan.steps - ledger.steps``
        steps run at its q and σ, accounted with its accountant, δ, adjacency and sampling.

    Returns:
      The ε the run will have spent after its remaining planned steps.

    Raises:
      RuntimeError: if that ε exceeds ``plan.target_epsilon`` (beyond 1e-6 relative float noise).
    """
    target = plan.target_epsilon
    eps = plan.epsilon_after_plan(ledger)
    if eps > target * (1 + 1e-6):
        spent = plan.epsilon(ledger)
        remaining = max(plan.steps - ledger.steps, 0)
        raise RuntimeError(
            f"Refusing to train: the privacy ledger ({ledger.steps} steps, ε = {spent:.4g}) plus "
            f"the {remaining} remaining planned steps would spend ε = {eps:.4g} > target "
            f"ε = {target:g} at δ = {plan.delta:g} ({plan.accountant}, {plan.adjacency}, "
            f"{plan.sampling}). Start a new run (new --workdir) with a new budget instead."
        )
    return eps


def sampler_meta(plan: PrivacyPlan, *, seed: int) -> dict[str, Any]:
    """Everything the Poisson sampler depends on (it has no other state); stored in checkpoints
    and compared on resume. The seed is public; in secret mode the sampler's seeds derive from
    the secret, which the checkpoint's ``randomness`` entry holds."""
    meta = {"num_examples": plan.num_examples, "expected_batch_size": plan.batch_size,
            "seed": seed, "sampling": plan.sampling}
    if plan.banded:  # the private stream samples cyclically (independent-noise metas unchanged)
        from maskdp_jax.core import bandmf

        meta["cycle_length"] = plan.bands
        # The strategy the noise state was built with: a resume that would optimise another
        # (another jax_privacy, a non-deterministic optimiser) is refused, since its re-executed
        # steps would differ and the columns straddling the resume lose their unit norm.
        meta["strategy"] = list(bandmf.strategy_coefficients(plan.steps, plan.bands))
    return meta


class PrivacyGuard:
    """Owns the journal, checkpoints and identity of one training run (module docstring), and
    makes its :class:`~maskdp_jax.core.mechanism.Mechanism`.

    Constructing it runs every resume check, before the model is built; nothing is written.

    Args:
      workdir: the run's output directory (journal, checkpoints).
      plan: the run's :class:`~maskdp_jax.core.plan.PrivacyPlan`.
      config: the run's published configuration as a plain dict (compared on resume,
        fingerprinted in the journal).
      randomness: ``"secret"`` or ``"seeded"`` (:mod:`maskdp_jax.core.randomness`).
      seed: the public seed (``config.seed``).
      keep: checkpoints kept.

    Attributes:
      mechanism: the run's :class:`~maskdp_jax.core.mechanism.Mechanism` (the plan with the run's
        randomness): the trainer's private step, sampler and budget.
      plan, randomness, checkpoint_dir.

    Raises:
      ValueError / RuntimeError: a checkpoint or journal of another run, a corrupt ledger, or a
        ledger past the plan (see :func:`validate_meta`,
        :func:`maskdp_jax.run.journal.check_journal`, :func:`check_epsilon_budget`).
      maskdp_jax.core.mechanism.PlanExhausted: a checkpoint past the planned steps.
      run.workdir_lock.WorkdirBusyError: another live run uses ``workdir``.
    """

    def __init__(self, workdir: str, *, plan: PrivacyPlan, config: Mapping[str, Any],
                 randomness: str, seed: int, keep: int):
        # One run per workdir (process 0 of a multi-host run); released by close() or by exit.
        self._lock = WorkdirLock(workdir) if jax.process_index() == 0 else None
        try:
            self._open(workdir, plan=plan, config=config, randomness=randomness, seed=seed,
                       keep=keep)
        except BaseException:
            if self._lock is not None:
                self._lock.release()
            raise

    def _open(self, workdir, *, plan, config, randomness, seed, keep) -> None:
        self.workdir = workdir
        self.plan = plan
        self._config = identity.to_json_config(config)
        self._topology = identity.current_topology()
        self._primary = jax.process_index() == 0
        self._checkpoints = checkpoint.Checkpointer(workdir, keep=keep)
        self.checkpoint_dir = self._checkpoints.directory
        meta, notes = self._checkpoints.newest_intact_meta(fall_back=jax.process_count() == 1)
        for note in notes:
            warnings.warn(note, stacklevel=2)
        self.randomness = randomness_lib.for_run(
            mode=randomness, seed=seed, restored=(meta or {}).get("randomness"))
        self.mechanism = Mechanism(plan=plan, randomness=self.randomness)
        self._sampler_meta = sampler_meta(plan, seed=seed)
        self._identity = identity.run_identity(
            self._config, randomness_id=self.randomness.public_id(), topology=self._topology)
        ledger = accounting.Ledger()
        self._resume_step: int | None = None
        if meta is not None:
            ledger = validate_meta(
                meta, config=self._config, noise_key_data=self._noise_key_data(),
                sampler=self._sampler_meta, randomness=self.randomness.to_meta(),
                topology=self._topology, where=self.checkpoint_dir)
            self._resume_step = int(meta["step"])
            self.mechanism.check_step(self._resume_step, taken=True)
        journal.check_journal(workdir, privacy=plan.accounting_meta(), run=self._identity,
                              q=plan.q, noise_multiplier=plan.noise_multiplier)
        if plan.target_epsilon is not None:
            check_epsilon_budget(ledger, plan)

    def _noise_key_data(self) -> np.ndarray:
        return np.asarray(jax.random.key_data(self.randomness.noise_key()))

    @property
    def resume_step(self) -> int:
        """The step the run goes on from: the validated checkpoint's (0 for a fresh run)."""
        return self._resume_step or 0

    def ledger(self, state: PyTree) -> accounting.Ledger:
        """The steps charged up to ``state`` (a :class:`~maskdp_jax.core.train_step.TrainState`):
        the mechanism's ledger of ``state.privacy``."""
        return self.mechanism.ledger(state.privacy)

    # ------------------------------------------------------------------------------------------
    def resume(self, state: PyTree) -> tuple[PyTree, bool]:
        """``(state, resumed)``: the validated checkpoint's state, or ``state`` for a fresh run.

        A fresh run in secret mode writes its step-0 checkpoint here, so that a run killed before
        its first periodic checkpoint resumes with the same noise and batches.

        Args:
          state: the freshly initialised TrainState (host arrays): the restore target.

        Raises:
          ValueError: the restored state's counter or noise key is not its meta's.
        """
        if self._resume_step is not None:
            state, _ = self._checkpoints.restore(self._resume_step, like=state)
            restored_key = np.asarray(jax.random.key_data(state.privacy.key))
            if (int(state.privacy.step) != self._resume_step
                    or not np.array_equal(restored_key, self._noise_key_data())):
                raise ValueError(
                    f"Checkpoint in {self.checkpoint_dir}: its training state (step "
                    f"{int(state.privacy.step)}) does not match its meta (step "
                    f"{self._resume_step}, the run's noise key); refusing to resume from an "
                    "inconsistent checkpoint. Start again in a fresh --workdir.")
            return state, True
        if self.randomness.mode == "secret":
            self.save(state)
        return state, False

    def release(self, state: PyTree, emit: Callable[[], T] | None = None) -> T | None:
        """Journal every step charged up to ``state`` (process 0), then call ``emit``, the action
        that makes something computed from them leave the run (a metric row, the report, ...)."""
        if self._primary:
            journal.write_ledger_journal(self.workdir, self.ledger(state),
                                         privacy=self.plan.accounting_meta(), run=self._identity)
        return None if emit is None else emit()

    def save(self, state: PyTree) -> None:
        """Journal, then checkpoint ``state`` (host arrays) at its step (collective: every
        process calls it at the same step). A checkpoint of this step that already exists (the
        one just resumed from, or a secret run's step 0) holds this very state and is kept."""
        ledger = self.ledger(state)
        if self._checkpoints.latest_step() == ledger.steps:
            self.release(state)
            return
        meta = {"step": ledger.steps, "ledger": ledger.to_dict(), "config": self._config,
                "noise_key": self._noise_key_data().tolist(),
                "sampler": dict(self._sampler_meta), "randomness": self.randomness.to_meta(),
                "topology": dict(self._topology), "state_format": STATE_FORMAT}
        self.release(state, lambda: self._checkpoints.save(state, step=ledger.steps, meta=meta))

    def epsilon_spent(self, state: PyTree) -> float:
        """ε of the steps charged up to ``state`` by the plan's accountant (the one that
        calibrated σ), so that the progress display, the metrics and the training curve show the
        report's headline number (once per logged step; a PLD ε costs far more than an RDP one,
        docs/benchmarks.md, "Accounting")."""
        return self.plan.epsilon(self.ledger(state))

    def close(self) -> None:
        self._checkpoints.close()
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> PrivacyGuard:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
