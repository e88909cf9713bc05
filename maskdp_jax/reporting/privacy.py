"""Privacy reports: the ε of a run together with what exactly it protects.

The statement a person reads next to ε. It belongs to the reporting layer (not to
:mod:`maskdp_jax.accounting`, which computes ε): it reads the training
:class:`~maskdp_jax.core.plan.Mode` (what is protected) and the run's randomness policy
(:mod:`maskdp_jax.core.randomness`), and it is built from the run's
:class:`~maskdp_jax.core.plan.PrivacyPlan` (the only privacy input) and the guard's ledger.

Every report names the mode, the adjacency relation and the sampling scheme next
to ε, and states in plain English what is and is not protected. JSON convention:
an infinite ε is written as the string ``"inf"`` (strict JSON has no infinity);
an ε that cannot be computed by a method is ``null`` with a note saying why.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from maskdp_jax import accounting
from maskdp_jax.accounting import Ledger, inputs
from maskdp_jax.core import randomness as randomness_lib
from maskdp_jax.core.plan import Mode, PrivacyPlan


def _unit(mode: Mode, adjacency: str) -> str:
    if mode.uses_views:  # the unit is a video's private tokens
        if adjacency == "special":
            return (
                "masked adjacency (special): two datasets are neighbours if the private "
                "tokens of one video are present in one and absent (contributing exactly "
                "zero private gradient) in the other"
            )
        return (
            "masked adjacency (replace, the papers' Definition 2): two datasets are "
            "neighbours if they differ only in the private tokens of one video, replaced "
            "by arbitrary other values"
        )
    if adjacency == "special":
        return (
            "video-level adjacency (special = add/remove one video): two datasets are "
            "neighbours if one video is present in one and absent in the other"
        )
    return (
        "video-level adjacency (replace): two datasets are neighbours if one video is "
        "replaced by an arbitrary other video"
    )


def _protected(mode: Mode) -> str:
    if mode.uses_views:
        return (
            "The private tokens of any one video are protected. Its label and its "
            "public tokens are NOT protected."
        )
    return "Any one video (its pixels and its label) is protected."


def _sampling_sentence(sampling: str) -> str:
    if sampling == "decoupled":
        return (
            "Sampling: decoupled (independent Poisson batches for the public and the "
            "private pass), so the private batch stays hidden and amplification by "
            "subsampling applies (Theorem 4.1 holds)."
        )
    return (
        "Sampling: coupled (one shared batch, the papers' Algorithm 1); the unnoised "
        "public gradient may reveal the batch, so epsilon uses the revealed-sample bound "
        "(no amplification by subsampling)."
    )


SEEDED_WARNING = (
    "randomness seeded from config.seed (published in this report): noise and batches can be "
    "recomputed — the ε holds only if the seed is kept secret; for reproducibility experiments, "
    "not for releasing models."
)
SECRET_SENTENCE = (
    "Noise and batches were drawn from a secret seed kept only in the run's checkpoints "
    "(keep them private: a shared checkpoint makes the noise recoverable)."
)


@dataclasses.dataclass(frozen=True)
class PrivacyReport:
    """ε of a run and the guarantee it stands for.

    Attributes:
      mode: ``"maskdp"``, ``"dp"``, ``"public_only"`` or ``"nonprivate"``.
      adjacency: ``"special"`` or ``"replace"``.
      sampling: ``"decoupled"`` or ``"coupled"``.
      delta: δ of the guarantee.
      num_examples: N, number of training videos.
      steps: logical steps taken.
      q: sampling rate, or None if it changed during the run (or no step yet).
      noise_multiplier: σ, or None if it changed during the run (or no step yet).
      epsilon_rdp: ε by RDP; None when RDP cannot account this case (see notes).
      epsilon_pld: ε by PLD (the tighter number).
      statement: plain-English statement of what is protected.
      notes: further remarks (why a number is missing, ε = ∞ causes, ...).
      randomness: where the noise and the batches came from: ``"secret"``, ``"seeded"``
        (from the published seed: the ε does not hold for a released model), or None (not
        stated, e.g. a planned run).
      calibrated_by: the accountant (``"pld"`` / ``"rdp"``) whose ε σ was calibrated to, or
        None when σ was given.
      target_epsilon: that calibration's target ε, or None.
      noise / bands: ``"independent"`` (1 band) or ``"banded"`` correlated noise with ``bands``
        bands (ε then by the amplified BandMF bound,
        :meth:`maskdp_jax.core.plan.PrivacyPlan.accounted`).
    """

    mode: str
    adjacency: str
    sampling: str
    delta: float
    num_examples: int
    steps: int
    q: float | None
    noise_multiplier: float | None
    epsilon_rdp: float | None
    epsilon_pld: float
    statement: str
    notes: tuple[str, ...] = ()
    randomness: str | None = None
    calibrated_by: str | None = None
    target_epsilon: float | None = None
    noise: str = "independent"
    bands: int = 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict; infinite values become the string ``"inf"``. ``noise`` and ``bands``
        appear for banded noise only (independent-noise reports keep their earlier keys)."""

        def clean(value: Any) -> Any:
            if isinstance(value, float) and math.isinf(value):
                return "inf" if value > 0 else "-inf"
            if isinstance(value, tuple):
                return list(value)
            return value

        out = {f.name: clean(getattr(self, f.name)) for f in dataclasses.fields(self)}
        if self.noise == "independent":
            del out["noise"], out["bands"]
        return out

    def to_markdown(self) -> str:
        """A short Markdown block: a table of the numbers and the statement."""

        def fmt(value: Any) -> str:
            if value is None:
                return "n/a"
            if isinstance(value, float):
                return "∞" if math.isinf(value) else f"{value:.6g}"
            return str(value)

        rows = [
            ("mode", self.mode),
            ("adjacency", self.adjacency),
            ("sampling", self.sampling),
            ("ε (PLD)", self.epsilon_pld),
            ("ε (RDP)", self.epsilon_rdp),
            ("δ", self.delta),
            ("N (videos)", self.num_examples),
            ("steps", self.steps),
            ("q", self.q),
            ("σ (noise multiplier)", self.noise_multiplier),
        ]
        if self.randomness is not None:
            rows.append(("randomness", self.randomness))
        if self.calibrated_by is not None:
            rows.append(("σ calibrated by", f"{self.calibrated_by.upper()} to ε = "
                                            f"{self.target_epsilon:g}"))
        lines = ["| quantity | value |", "| --- | --- |"]
        lines += [f"| {name} | {fmt(value)} |" for name, value in rows]
        lines += ["", self.statement]
        lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines) + "\n"


def format_epsilon(epsilon, accountant: str) -> str:
    """ε for people, labelled with its accountant: the one number shown wherever a single ε is
    shown (progress bar, final line, training curve); reports give both accountants in full.

    >>> format_epsilon(0.9999999456271528, "pld"), format_epsilon(float("inf"), "rdp")
    ('1.00 (PLD)', '∞')
    >>> format_epsilon("inf", "pld")
    '∞'
    """
    epsilon = float(epsilon)
    if not math.isfinite(epsilon):
        return "∞"
    return f"{epsilon:.2f} ({accountant.upper()})"


def privacy_report(
    *,
    plan: PrivacyPlan,
    ledger: Ledger,
    randomness: str | None = None,
) -> PrivacyReport:
    """Accounts ``ledger`` under ``plan`` and states the resulting guarantee.

    Args:
      plan: the run's :class:`~maskdp_jax.core.plan.PrivacyPlan`. Its mode says what is protected
        (``maskdp``: the private tokens of one video under masked adjacency; ``dp``: one
        whole video; ``public_only``: the private tokens, ε = 0; ``nonprivate``: nothing,
        ε = ∞); its δ (``0 < δ < 1/N``,
        :func:`maskdp_jax.accounting.check_delta`, refused otherwise even for ``nonprivate``), N,
        adjacency and effective sampling scheme are those of the guarantee; its accountant and
        target ε say how σ was set (shown as "calibrated by" when σ was calibrated, nothing
        when σ was given).
      ledger: the steps taken (q and σ are reported from it, not from the plan).
      randomness: ``"secret"``, ``"seeded"`` (the statement then says that the noise can be
        recomputed from the published seed) or None (not stated).

    Returns:
      A :class:`PrivacyReport` with ε by PLD and (where the accountant covers the case,
      :func:`maskdp_jax.accounting.supports`) RDP.
    """
    mode, delta, adjacency, sampling = plan.mode, plan.delta, plan.adjacency, plan.sampling
    if randomness is not None:
        inputs.check_choice("randomness", randomness, randomness_lib.MODES)
    inputs.check_delta(delta=delta, num_examples=plan.num_examples)
    segments = ledger.segments
    q = segments[0].q if segments and all(s.q == segments[0].q for s in segments) else None
    sigmas = {s.noise_multiplier for s in segments}
    sigma = segments[0].noise_multiplier if len(sigmas) == 1 else None
    notes: list[str] = []
    run = dict(mode=mode.value, adjacency=adjacency, sampling=sampling, delta=float(delta),
               num_examples=plan.num_examples, steps=ledger.steps, q=q, noise_multiplier=sigma,
               randomness=randomness,
               calibrated_by=plan.accountant if plan.target_epsilon is not None else None,
               target_epsilon=plan.target_epsilon, noise=plan.noise, bands=plan.bands)

    if mode.fixed_epsilon == 0:
        return PrivacyReport(
            epsilon_rdp=0.0, epsilon_pld=0.0,
            statement=(
                f"(0, 0)-MaskDP under {_unit(mode, adjacency)}: the run trains on the public "
                "views alone and never reads a private pixel, so its output does not depend on "
                f"the private tokens of any video. {_protected(mode)}"),
            notes=("Mode 'public_only' is MaskDP without its private pass: no clipping, no "
                   "noise; the control that says what the private pass adds.",), **run,
        )
    if not mode.is_private:
        return PrivacyReport(
            epsilon_rdp=math.inf, epsilon_pld=math.inf,
            statement="Non-private training: epsilon = inf; nothing is protected.",
            notes=("Mode 'nonprivate' adds no noise and clips nothing.",), **run,
        )

    accounted = plan.accounted(ledger)  # banded noise: the amplified BandMF rounds
    eps_pld = accounted.epsilon(delta=delta, method="pld", adjacency=adjacency,
                                sampling=sampling)
    no_rdp = accounting.unsupported_reason("rdp", adjacency=adjacency, sampling=sampling)
    if no_rdp is not None:
        eps_rdp = None
        notes.append(f"No RDP epsilon: {no_rdp}")
    else:
        eps_rdp = accounted.epsilon(delta=delta, method="rdp", adjacency=adjacency,
                                    sampling=sampling)
    if not ledger.is_private():
        notes.append("At least one recorded step had noise_multiplier = 0, so epsilon = inf.")
    if q is None and segments:
        notes.append(
            f"Heterogeneous history of {len(segments)} segments; epsilon composes them "
            + ("(each segment's BandMF rounds rounded up: conservative)." if plan.banded
               else "exactly."))
    guarantee = "MaskDP" if mode.uses_views else "DP"
    eps_text = "inf" if math.isinf(eps_pld) else f"{eps_pld:.4g}"
    statement = (
        f"({eps_text}, {delta:g})-{guarantee} under {_unit(mode, adjacency)}. "
        f"{_protected(mode)} {_sampling_sentence(sampling)}"
    )
    if plan.banded:
        statement += (
            f" Noise: banded matrix factorization with {plan.bands} bands (correlated across "
            f"steps, cyclic Poisson sampling of the private batch in {plan.bands} "
            f"{'secret ' if randomness == 'secret' else ''}groups), "
            f"accounted as DP-SGD at rate {plan.bands} q over ceil(steps / {plan.bands}) rounds "
            "(amplified BandMF, Choquette-Choo et al. 2023).")
    if math.isinf(eps_pld):
        statement += " Since epsilon = inf, nothing is actually guaranteed."
    if randomness == "seeded":
        statement += " WARNING: " + SEEDED_WARNING
    elif randomness == "secret":
        statement += " " + SECRET_SENTENCE
    return PrivacyReport(
        epsilon_rdp=eps_rdp, epsilon_pld=eps_pld, statement=statement, notes=tuple(notes),
        **run,
    )
