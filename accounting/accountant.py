"""ε of a MaskDP-SGD training history, and noise calibration.

Thin wrappers over dp-accounting's accountants:

* ``method="rdp"``: ``RdpAccountant`` (Rényi DP, dp-accounting's default orders,
  converted to (ε, δ) by Balle et al. 2020). An upper bound, usually a few percent
  above the PLD value.
* ``method="pld"``: ``PLDAccountant`` (privacy-loss distributions, pessimistic
  discretisation). Tight up to the discretisation, which only ever *increases* ε.

Sampling schemes (``sampling``):

* ``"decoupled"`` (default): independent public and private Poisson batches; the
  private pass is the Poisson-subsampled Gaussian with a hidden sample.
* ``"coupled"``: one shared batch whose membership the public gradient reveals;
  accounted with the revealed-sample bound of :mod:`maskdp_jax.accounting.coupled`.

Adjacency (``adjacency``): ``"special"`` (default, dp-accounting
``REPLACE_SPECIAL`` = add/remove numbers = Theorem 4.1) or ``"replace"``
(``REPLACE_ONE``). dp-accounting's RDP accountant has no bound for Poisson
subsampling under ``REPLACE_ONE``, so ``method="rdp"`` with decoupled sampling
and ``replace`` raises instead of approximating.

PLD discretisation (accuracy/speed). dp-accounting's default grid
(``value_discretization_interval = 1e-4``) is too coarse at small ε with many
steps (NTU-like, ε ≈ 0.1: +5 %) and needlessly slow at large ε (ε ≈ 33: 3.5 s) or
with few steps. Measured: the pessimistic error grows like ``steps · interval²``
and the cost like ``ε / interval`` (many steps) or like ``(per-step loss range) /
interval`` (few steps). So the interval is

    max(PLD_RELATIVE_INTERVAL · ε_scale, per-step loss range / PLD_MAX_STEP_BINS)

rounded *down* to a ladder of 4 values per decade (reproducible, cacheable),
where ``ε_scale`` is the cheap RDP ε of the same history (RDP ≥ PLD, so the grid
errs on the fine side). Neither term shrinks when steps or q grow or σ shrinks,
so a history with a larger ε never gets a finer grid; the pessimism of the grid
therefore cannot reverse the order of ε in σ, q and steps (monotonicity is
tested). ``docs/benchmarks.md`` records the resulting time and accuracy.
Results are cached per (history, δ, method, adjacency, sampling).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Iterable

import numpy as np
from dp_accounting.pld import privacy_loss_distribution
from dp_accounting.rdp import rdp_privacy_accountant

from maskdp_jax.accounting import coupled, events, inputs


class _DropExcludedOrderWarnings(logging.Filter):
    """Silences dp-accounting's "failed to converge ... Excluding this order" warnings.

    dp-accounting's series for fractional orders close to 1 sometimes does not converge (e.g.
    α = 1.2 at large σ during calibration); it then drops that order. ε is a minimum over orders,
    so dropping one can only make the reported ε larger (never an under-count), and the optimum
    is at larger orders in every setting we calibrate. The message is emitted once per call and
    buried the training progress display, so we filter exactly this message and nothing else.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "Excluding this order" not in record.getMessage()


logging.getLogger("absl").addFilter(_DropExcludedOrderWarnings())

RDP_ORDERS: tuple[float, ...] = tuple(rdp_privacy_accountant.DEFAULT_RDP_ORDERS)
"""Rényi orders used by every RDP computation here (dp-accounting's defaults)."""

PLD_RELATIVE_INTERVAL = 5e-5
"""PLD grid step as a fraction of the history's (RDP) ε scale."""

PLD_MAX_STEP_BINS = 2e4
"""Target number of grid points of one step's privacy-loss distribution."""

PLD_MIN_INTERVAL = 1e-6
"""Finest PLD grid step used."""

SIGMA_BOUNDS = (1e-2, 1e4)
"""Search range of :func:`calibrate_noise_multiplier`."""

CALIBRATION_RTOL = 1e-4
"""Calibration stops when the bracket [lo, hi] has hi/lo <= 1 + CALIBRATION_RTOL."""


def unsupported_reason(method: str, *, adjacency: str, sampling: str) -> str | None:
    """Why accountant ``method`` cannot bound ε under ``adjacency`` with ``sampling``, or None
    when it can: the one statement of which combinations the accountants cover.

    PLD covers every combination. RDP covers all but Poisson subsampling (``decoupled``: the
    private batch is a hidden Poisson draw) under ``replace`` (``REPLACE_ONE``), for which
    dp-accounting's RDP accountant has no bound; we refuse rather than approximate. (Coupled
    sampling reveals the batch, so its RDP is a plain Gaussian's, exact under both relations.)

    Args:
      method: ``"pld"`` or ``"rdp"``.
      adjacency: ``"special"`` or ``"replace"``.
      sampling: ``"decoupled"`` or ``"coupled"``.

    Raises:
      ValueError: an unknown method, adjacency or sampling.

    >>> unsupported_reason("rdp", adjacency="special", sampling="decoupled") is None
    True
    >>> unsupported_reason("rdp", adjacency="replace", sampling="decoupled")[:26]
    'RDP cannot account Poisson'
    """
    inputs.check_choice("method", method, inputs.METHODS)
    inputs.check_choice("adjacency", adjacency, inputs.ADJACENCIES)
    inputs.check_choice("sampling", sampling, inputs.SAMPLINGS)
    if method == "rdp" and adjacency == "replace" and sampling == "decoupled":
        return (
            "RDP cannot account Poisson subsampling under the 'replace' adjacency: "
            "dp-accounting's RdpAccountant has no bound for PoissonSampledDpEvent with "
            "REPLACE_ONE, and we do not approximate it. Use method='pld' (exact "
            "REPLACE_ONE PLD) or adjacency='special'."
        )
    return None


def supports(method: str, *, adjacency: str, sampling: str) -> bool:
    """Whether accountant ``method`` can bound ε under ``adjacency`` with ``sampling``
    (:func:`unsupported_reason` says why not).

    >>> supports("pld", adjacency="replace", sampling="decoupled")
    True
    >>> supports("rdp", adjacency="replace", sampling="decoupled")
    False
    """
    return unsupported_reason(method, adjacency=adjacency, sampling=sampling) is None


def check_combination(method: str, adjacency: str, sampling: str) -> None:
    """Raises ``ValueError`` for an unknown method, adjacency or sampling, or for a combination
    the accountant does not cover (:func:`unsupported_reason`)."""
    reason = unsupported_reason(method, adjacency=adjacency, sampling=sampling)
    if reason is not None:
        raise ValueError(reason)


# ---------------------------------------------------------------------------
# RDP
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _rdp_curve(segments: tuple[events.Segment, ...], adjacency: str, sampling: str) -> np.ndarray:
    """RDP of the whole history at :data:`RDP_ORDERS` (all σ > 0)."""
    if sampling == "coupled":
        orders = np.asarray(RDP_ORDERS)
        total = np.zeros_like(orders)
        for seg in segments:
            total += seg.steps * coupled.coupled_step_rdp(
                q=seg.q, noise_multiplier=seg.noise_multiplier, orders=orders, adjacency=adjacency
            )
        total.flags.writeable = False  # cached: callers must not mutate it
        return total
    accountant = rdp_privacy_accountant.RdpAccountant(
        orders=list(RDP_ORDERS), neighboring_relation=events.neighboring_relation(adjacency)
    )
    accountant.compose(events.decoupled_event(segments))
    rdp = accountant.rdp
    rdp.flags.writeable = False  # cached: callers must not mutate it
    return rdp


def _rdp_epsilon(
    segments: tuple[events.Segment, ...], delta: float, adjacency: str, sampling: str
) -> float:
    rdp = _rdp_curve(segments, adjacency, sampling)
    eps, _ = rdp_privacy_accountant.compute_epsilon(RDP_ORDERS, rdp, delta)
    return float(eps)


# ---------------------------------------------------------------------------
# PLD
# ---------------------------------------------------------------------------


def _step_loss_range(seg: events.Segment, adjacency: str, sampling: str) -> float:
    """Approximate width of one step's privacy-loss support (only sizes the grid).

    dp-accounting truncates the Gaussian noise where its tail mass is e^-50, i.e.
    at about ±10σ (in units of C). A Gaussian of sensitivity Δ then has privacy
    losses spanning Δ(20σ + Δ)/σ² (coupled sampling: Δ = 1 special, 2 replace).
    With a hidden Poisson sample the upper end shrinks to
    L = log(1 + q·(e^{(20σ+1)/(2σ²)} - 1)) and the lower end is ≈ 0 (special) or
    ≈ -L (replace, where both neighbours are mixtures).
    """
    sigma = seg.noise_multiplier
    if sampling == "coupled":
        sens = 2.0 if adjacency == "replace" else 1.0
        return sens * (20.0 * sigma + sens) / sigma**2
    half = (20.0 * sigma + 1.0) / (2.0 * sigma**2)
    upper = float(np.logaddexp(np.log1p(-seg.q), np.log(seg.q) + half))
    return 2.0 * upper if adjacency == "replace" else upper


def pld_discretization(epsilon_scale: float, step_loss_range: float = 0.0) -> float:
    """PLD grid step for a history.

    Args:
      epsilon_scale: an upper estimate of the history's ε (we use the RDP ε).
      step_loss_range: the widest per-step privacy-loss support among the
        history's segments (``_step_loss_range``).

    Returns:
      ``max(PLD_RELATIVE_INTERVAL · epsilon_scale, step_loss_range /
      PLD_MAX_STEP_BINS)`` rounded down to the ladder ``10^(k/4)``, at least
      :data:`PLD_MIN_INTERVAL`.
    """
    target = max(epsilon_scale * PLD_RELATIVE_INTERVAL, step_loss_range / PLD_MAX_STEP_BINS, 1e-300)
    rung = math.floor(math.log10(target) * 4.0) / 4.0
    return max(PLD_MIN_INTERVAL, 10.0**rung)


def pld_interval(
    segments: tuple[events.Segment, ...], delta: float, adjacency: str, sampling: str
) -> float:
    """The PLD grid step used for this history (see the module docstring)."""
    if not supports("rdp", adjacency=adjacency, sampling=sampling):
        # No RDP bound for Poisson + REPLACE_ONE; the special-adjacency RDP ε, doubled,
        # is only used to choose the grid, never reported.
        scale = 2.0 * _rdp_epsilon(segments, delta, "special", sampling)
    else:
        scale = _rdp_epsilon(segments, delta, adjacency, sampling)
    step_range = max(_step_loss_range(seg, adjacency, sampling) for seg in segments)
    return pld_discretization(scale, step_range)


def _pld_epsilon(
    segments: tuple[events.Segment, ...], delta: float, adjacency: str, sampling: str
) -> float:
    interval = pld_interval(segments, delta, adjacency, sampling)
    if sampling == "coupled":
        pld = coupled.coupled_pld(
            segments, adjacency=adjacency, value_discretization_interval=interval
        )
        return float(pld.get_epsilon_for_delta(delta))
    # What PLDAccountant.compose(events.decoupled_event(segments)) computes, step for step
    # (identity, then each segment's subsampled-Gaussian PLD self-composed), with the one-step
    # PLD cached: building it is most of the cost of an ε (benchmarks/results/first_run.md),
    # and a run asks for ε at every logged row with the same σ, q and, mostly, grid. Equality
    # with the accountant is tested (tests/test_accounting_accountant.py).
    pld = privacy_loss_distribution.identity(
        value_discretization_interval=interval)
    for seg in segments:
        step = _subsampled_gaussian_pld(seg.noise_multiplier, seg.q, interval, adjacency)
        pld = pld.compose(step.self_compose(seg.steps))
    return float(pld.get_epsilon_for_delta(delta))


@functools.lru_cache(maxsize=64)
def _subsampled_gaussian_pld(
    noise_multiplier: float, q: float, interval: float, adjacency: str
) -> privacy_loss_distribution.PrivacyLossDistribution:
    """One step's PLD, as ``PLDAccountant`` builds it for ``PoissonSampled(q, Gaussian(σ))``
    (PLDs are immutable: ``compose``/``self_compose`` return new ones, so sharing is safe)."""
    return privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=noise_multiplier,
        value_discretization_interval=interval,
        sampling_prob=q,
        neighboring_relation=events.neighboring_relation(adjacency),
    )


@functools.lru_cache(maxsize=4096)
def _cached_epsilon(
    segments: tuple[events.Segment, ...],
    delta: float,
    method: str,
    adjacency: str,
    sampling: str,
) -> float:
    if method == "rdp":
        return _rdp_epsilon(segments, delta, adjacency, sampling)
    return _pld_epsilon(segments, delta, adjacency, sampling)


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def clear_caches() -> None:
    """Forgets cached results (for cold-start timings; results do not change)."""
    _rdp_curve.cache_clear()
    _cached_epsilon.cache_clear()
    _subsampled_gaussian_pld.cache_clear()


def history_epsilon(
    segments: Iterable[events.Segment],
    *,
    delta: float,
    method: str = "pld",
    adjacency: str = "special",
    sampling: str = "decoupled",
) -> float:
    """ε of a (possibly heterogeneous) training history.

    Args:
      segments: validated :class:`~maskdp_jax.accounting.events.Segment` s, oldest first.
      delta: 0 < δ < 1.
      method: ``"pld"`` or ``"rdp"``.
      adjacency: ``"special"`` or ``"replace"``.
      sampling: ``"decoupled"`` or ``"coupled"``.

    Returns:
      ε such that the run is (ε, δ)-DP under the named adjacency: 0 for an empty
      history, ``inf`` if any segment has ``noise_multiplier == 0``.
    """
    check_combination(method, adjacency, sampling)
    delta = inputs.check_delta_range(delta)
    segments = tuple(
        events.make_segment(q=s.q, noise_multiplier=s.noise_multiplier, steps=s.steps)
        for s in segments
    )
    if not segments:
        return 0.0
    if any(s.noise_multiplier == 0.0 for s in segments):
        return math.inf
    return _cached_epsilon(segments, delta, method, adjacency, sampling)


def epsilon(
    *,
    q: float,
    noise_multiplier: float,
    steps: int,
    delta: float,
    method: str = "pld",
    adjacency: str = "special",
    sampling: str = "decoupled",
) -> float:
    """ε after ``steps`` identical MaskDP-SGD steps.

    Args:
      q: Poisson sampling rate B/N (B the *expected* batch size), ``0 < q < 1``.
      noise_multiplier: σ >= 0, noise std over clip norm C (0: ε = ∞).
      steps: number of logical steps taken, >= 0 (epochs / q for full epochs).
      delta: 0 < δ < 1.
      method: ``"pld"`` (tight) or ``"rdp"`` (upper bound).
      adjacency: ``"special"`` (private tokens of one video replaced by "absent";
        equals add/remove and Theorem 4.1) or ``"replace"`` (replaced by arbitrary
        values; PLD only with decoupled sampling).
      sampling: ``"decoupled"`` (independent public/private batches) or
        ``"coupled"`` (one batch, revealed by the public gradient).

    Returns:
      ε of the (ε, δ) guarantee. In ``maskdp`` mode this protects the private
      tokens of any one video (labels and public tokens are not protected); in
      ``dp`` mode it protects whole videos.

    Example:
      >>> round(epsilon(q=128 / 40320, noise_multiplier=1.0, steps=47250, delta=1e-6), 2)
      4.44
    """
    seg_steps = inputs.check_steps(steps, minimum=0)
    segment = events.make_segment(q=q, noise_multiplier=noise_multiplier, steps=max(seg_steps, 1))
    if seg_steps == 0:
        check_combination(method, adjacency, sampling)
        inputs.check_delta_range(delta)
        return 0.0
    return history_epsilon(
        (segment,), delta=delta, method=method, adjacency=adjacency, sampling=sampling
    )


def _smallest_sigma(
    eps_of_sigma: Callable[[float], float],
    target: float,
    lo: float,
    hi: float,
) -> float:
    """Smallest σ in [lo, hi] with ε(σ) <= target, to relative tolerance.

    Requires ε(lo) > target >= ε(hi). Illinois-modified regula falsi on
    f(log σ) = log(ε/target), which is nearly linear; new points stay at least half
    a tolerance inside the bracket so that it always shrinks, and when the secant
    puts the root within a tolerance of the new point, the other side of the root
    is probed at once. Returns ``hi`` of the final bracket, so the result always
    meets the target and σ / (1 + CALIBRATION_RTOL) does not.
    """

    def g(sigma: float) -> float:
        eps = eps_of_sigma(sigma)
        if eps <= 0.0:
            return -math.inf
        return math.log(eps / target)

    def f(log_sigma: float) -> float:
        return g(math.exp(log_sigma))

    a, b = math.log(lo), math.log(hi)
    fa, fb = g(lo), g(hi)  # exactly the bracket's σ, so cached values are reused
    tol = math.log1p(CALIBRATION_RTOL)
    last = 0
    for _ in range(200):
        if b - a <= tol:
            break
        finite = math.isfinite(fa) and math.isfinite(fb) and fa != fb
        x = b - fb * (b - a) / (fb - fa) if finite else 0.5 * (a + b)
        x = min(max(x, a + 0.5 * tol), b - 0.5 * tol)
        fx = f(x)
        slope = (fb - fa) / (b - a) if finite else 0.0
        if fx > 0.0:
            a, fa = x, fx
            if last == -1:
                fb *= 0.5
            last = -1
            probe = x + 0.75 * tol
        else:
            b, fb = x, fx
            if last == 1:
                fa *= 0.5
            last = 1
            probe = x - 0.75 * tol
        near_root = slope < 0.0 and math.isfinite(fx) and abs(fx / slope) < 0.5 * tol
        if near_root and a < probe < b:
            fp = f(probe)
            if fp > 0.0:
                a, fa = probe, fp
            else:
                b, fb = probe, fp
    return math.exp(b)


def _bracket(
    eps_of_sigma: Callable[[float], float],
    target: float,
    guess: float,
    factor: float,
    slope: float | None = None,
) -> tuple[float, float]:
    """[lo, hi] with ε(lo) > target >= ε(hi), searched from ``guess``.

    With ``slope`` (an estimate of d log ε / d log σ < 0) the first step jumps to
    just past the predicted root; otherwise, and whenever that falls short, it
    steps geometrically by ``factor``.
    """
    sigma_min, sigma_max = SIGMA_BOUNDS
    guess = min(max(guess, sigma_min), sigma_max)
    eps_guess = eps_of_sigma(guess)
    predicted = None
    if slope is not None and slope < 0.0 and 0.0 < eps_guess < math.inf:
        predicted = guess * math.exp(math.log(target / eps_guess) / slope)
    if eps_guess <= target:
        hi = guess
        lo = predicted * (1.0 - 5e-3) if predicted is not None and predicted < hi else hi / factor
        while True:
            if lo < sigma_min:
                raise ValueError(
                    f"target_epsilon={target:g} is so large that noise_multiplier="
                    f"{sigma_min:g} already meets it; calibration refuses such a nearly "
                    "non-private run. Lower target_epsilon, or set the noise multiplier "
                    "explicitly."
                )
            if eps_of_sigma(lo) > target:
                return lo, hi
            hi, lo = lo, lo / factor
    lo = guess
    hi = predicted * (1.0 + 5e-3) if predicted is not None and predicted > lo else lo * factor
    while True:
        if hi > sigma_max:
            raise ValueError(
                f"target_epsilon={target:g} is unreachable: even noise_multiplier="
                f"{sigma_max:g} gives epsilon={eps_of_sigma(sigma_max):.4g} > target. Raise "
                "target_epsilon, or plan fewer steps (epochs) or a smaller sampling rate "
                "q = B/N."
            )
        if eps_of_sigma(hi) <= target:
            return lo, hi
        lo, hi = hi, hi * factor


def calibrate_noise_multiplier(
    *,
    target_epsilon: float,
    delta: float,
    q: float,
    steps: int,
    method: str = "pld",
    adjacency: str = "special",
    sampling: str = "decoupled",
    num_examples: int | None = None,
) -> float:
    """Smallest noise multiplier σ whose ε after ``steps`` steps is <= target.

    Bisection-type search (see ``_smallest_sigma``) over the same accountant
    as :func:`epsilon`; for PLD the search starts from the RDP answer, which is an
    upper bound on the PLD σ.

    Args:
      target_epsilon: ε to reach, > 0.
      delta: 0 < δ < 1.
      q: Poisson sampling rate B/N, ``0 < q < 1``.
      steps: planned number of steps, >= 1.
      method: ``"pld"`` or ``"rdp"``.
      adjacency: ``"special"`` or ``"replace"``.
      sampling: ``"decoupled"`` or ``"coupled"``.
      num_examples: optional N; if given, δ >= 1/N is refused
        (:func:`~maskdp_jax.accounting.inputs.check_delta`).

    Returns:
      σ with ``epsilon(σ) <= target_epsilon`` and
      ``epsilon(σ / (1 + 1e-4)) > target_epsilon``.

    Raises:
      ValueError: bad inputs; a target needing σ > 1e4 (unreachable) or met
        already by σ = 1e-2 (nearly non-private).
    """
    target = inputs.check_epsilon_target(target_epsilon)
    delta = inputs.check_delta_range(delta)
    if num_examples is not None:
        inputs.check_delta(delta=delta, num_examples=num_examples)
    q = inputs.check_q(q)
    steps = inputs.check_steps(steps, minimum=1)
    check_combination(method, adjacency, sampling)

    def eps_fn(meth: str, adj: str) -> Callable[[float], float]:
        def eps_of_sigma(sigma: float) -> float:
            seg = events.Segment(q=q, noise_multiplier=float(sigma), steps=steps)
            return history_epsilon(
                (seg,), delta=delta, method=meth, adjacency=adj, sampling=sampling
            )

        return eps_of_sigma

    # RDP first: cheap, and an upper bound on the PLD σ (RDP ε >= PLD ε).
    rdp_adjacency = adjacency if supports("rdp", adjacency=adjacency, sampling=sampling) else \
        "special"
    rdp_fn = eps_fn("rdp", rdp_adjacency)
    lo, hi = _bracket(rdp_fn, target, guess=1.0, factor=2.0)
    sigma_rdp = _smallest_sigma(rdp_fn, target, lo, hi)
    if method == "rdp":
        return sigma_rdp
    # The RDP curve's log-log slope at σ_rdp predicts where the PLD root lies; none where the
    # conversion has already reached ε = 0 (a target of ~1e-6 and below).
    here, further = rdp_fn(sigma_rdp), rdp_fn(sigma_rdp * 1.05)
    slope = math.log(further / here) / math.log(1.05) if min(here, further) > 0 else None
    pld_fn = eps_fn("pld", adjacency)
    lo, hi = _bracket(pld_fn, target, guess=sigma_rdp, factor=1.25, slope=slope)
    return _smallest_sigma(pld_fn, target, lo, hi)
