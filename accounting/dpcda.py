r"""Privacy of DP-CDA (Saha et al. 2024, Algorithm 1 and Theorem 1): class-centric mixing + Gaussian
noise.

The mechanism. For each class k, T_k = ⌊T/K⌋ times: draw l of the class's N_k records uniformly
without replacement; release their feature mean (features L2-clipped to c) plus N(0, σx² I) and
their one-hot label mean plus N(0, σy² I_K).

**Adjacency.** Replace-one on whole records (features *and* label), as the seed states it ("replace
one single person's data with another"). Two cases, and the seed's Theorem 1 covers only the first:

1. *Same label*: a record's features change, its class does not. Only class k's pool changes, by
   one replaced element, its size fixed: Wang et al. 2019's subsampling-without-replacement bound
   applies (:mod:`maskdp_jax.accounting.without_replacement`, improved form).
2. *Label change*: the record leaves pool k (N_k → N_k − 1) and joins pool k'. Each affected pool
   loses or gains one element. Draws from a pool P and from P∖{x} couple as
   M(P) = (1−γ)·M(P∖{x}) + γ·E[M(S with one element replaced by x)], γ = l/``|P|``; by joint
   convexity of e^{(α−1)D_α} every order is bounded by the Poisson-subsampled Gaussian at rate γ
   with the same sensitivity (both directions, Mironov, Talwar, Zhang 2019), which dp-accounting's
   RDP accountant evaluates exactly.

The reported ε is the larger of the two (each converted from its own RDP curve: each is a valid
(ε, δ) statement for its pairs).

**Sensitivities (the seed's, kept).** Swapping one of the l mixed records moves the feature mean
by at most Δx = 2c/l and the label mean by Δy = √2/l, so one draw is a Gaussian mechanism with
ε(α) = α(Δx²/σx² + Δy²/σy²)/2 = (α/l²)(2c²/σx² + 1/σy²), i.e. noise-to-sensitivity
z = l/√(4c²/σx² + 2/σy²). Note that under *class-centric* mixing every mixed record has label k,
so the label mean is always e_k and Δy = 0 would be valid: the label term is conservative (it
only ever raises ε). We keep it by default, so that our ε is never below the seed's Theorem 1
and σy keeps the role the seed gives it; ``sigma_y=None`` drops it and releases the label
without noise, which is just as private and (measured, docs/guides/dpcda.md) more accurate,
since a noised one-hot mean at the σy a small ε needs flips most labels.

**The sampling rate the seed leaves undefined.** Sampling is within a class, so the rate of a
draw on class k is l/N_k; the guarantee must hold for every record, hence for the smallest class.
The class sizes themselves are *not* public: under a label-changing replacement they differ by
one between neighbours, so a release that printed them (or a noise level computed from them)
could reveal the record. The rate is therefore γ = l/n_min with n_min a **public lower bound**
on every class's size (``min_class_size``, a config constant); the private data is only checked
against it (:func:`check_class_sizes`, fail closed before anything is released). In case 2 the
pools involved have N_k and N_{k'}+1 ≥ n_min records (the larger pool of each pair sets its
rate), so the same γ bounds them, and the bound grows with γ. ``epsilon_rate_dataset`` (l/N,
how the seed's p reads if taken from its Wang et al. citation literally) under-states the rate
by a factor of about K and is computed only to show how much a careless reading would
under-count; it is not a guarantee. N itself is public under replace-one adjacency.

**Composition.** Composed over all T draws by default (``draws="all"``), as the seed does. Only
the draws of the affected classes read the record (T_k in case 1, 2T_k in case 2, both ≤ T for
K ≥ 2), so ``draws="affected"`` is also valid and tighter by up to a factor of K.

**Several releases of the same data** (a workdir's release ledger, :mod:`maskdp_jax.release.ledger`)
compose by :func:`compose_releases`: basic composition, the sums of the releases' ε and δ.

**Normalisation.** The seed standardises features with the private data's mean and std and does
not account for it: those statistics are an unaccounted release. We use fixed (data-independent)
or public statistics only (the callers in :mod:`maskdp_jax.release` enforce it), so this module
accounts for the mixing draws alone.

(ε, δ) from RDP by Balle et al. 2020 (the project's conversion,
:func:`~maskdp_jax.accounting.theorem41.balle2020_curve`, on RDP clipped at 0), which is never
looser than the seed's ε + log(1/δ)/(α−1).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import dp_accounting
import numpy as np
from scipy import optimize

from maskdp_jax.accounting import inputs, without_replacement
from maskdp_jax.accounting.theorem41 import balle2020_curve

DRAWS = ("all", "affected")
DEFAULT_ORDERS: tuple[int, ...] = tuple(range(2, 129))
"""Integer Rényi orders (the without-replacement bound is defined at integers only)."""


@dataclasses.dataclass(frozen=True)
class MixingSetup:
    """The public parameters of a DP-CDA release: everything its ε depends on but the noise.

    Validated on construction.

    Attributes:
      order: l, records mixed per synthetic sample (l < ``min_class_size``: a draw takes l
        distinct records of one class, also in a neighbour where that class lost one).
      clip_norm: c > 0, the L2 bound of every (normalised) feature vector.
      num_classes: K >= 2.
      min_class_size: a *public* lower bound on every class's size (the rate is
        l/min_class_size); the private data is checked against it by :func:`check_class_sizes`.
      num_records: N, the number of private records (public under replace-one adjacency).
      num_synthetic: T; ⌊T/K⌋ >= 1 samples per class are released.
      delta: δ < 1/N.
      draws: ``"all"`` (compose the K·⌊T/K⌋ draws, as the seed) or ``"affected"``.
    """

    order: int
    clip_norm: float
    num_classes: int
    min_class_size: int
    num_records: int
    num_synthetic: int
    delta: float
    draws: str = "all"

    def __post_init__(self):
        for name, low in (("order", 1), ("num_classes", 2), ("min_class_size", 1),
                          ("num_records", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}; got {value!r}.")
        c = self.clip_norm
        if not (isinstance(c, (int, float)) and math.isfinite(c) and c > 0):
            raise ValueError(f"the clip norm c must be a finite number > 0; got {c!r}.")
        if self.order >= self.min_class_size:
            raise ValueError(
                f"the mixing order l={self.order} must be smaller than the smallest class (at "
                f"least min_class_size={self.min_class_size} records): a draw takes l distinct "
                "records of one class, also in a neighbouring dataset where that class lost one.")
        if self.num_classes * self.min_class_size > self.num_records:
            raise ValueError(
                f"{self.num_classes} classes of at least {self.min_class_size} records need "
                f"{self.num_classes * self.min_class_size} records; there are "
                f"{self.num_records}.")
        inputs.check_delta(delta=self.delta, num_examples=self.num_records)
        inputs.check_choice("draws", self.draws, DRAWS)
        if self.per_class < 1:
            raise ValueError(f"num_synthetic={self.num_synthetic} gives no sample per class "
                             f"({self.num_classes} classes): ask for at least one per class.")

    @property
    def per_class(self) -> int:
        """T_k = ⌊T/K⌋."""
        return self.num_synthetic // self.num_classes

    @property
    def sampling_rate(self) -> float:
        """γ = l / min_class_size (module docstring)."""
        return self.order / self.min_class_size

    @property
    def draws_per_case(self) -> tuple[int, int]:
        """Composed draws ``(same label, label change)``: K·T_k each for ``"all"``; T_k and 2T_k
        (the record's class, or its two classes) for ``"affected"``."""
        if self.draws == "all":
            return (self.per_class * self.num_classes,) * 2
        return self.per_class, 2 * self.per_class


def check_class_sizes(*, class_sizes: Sequence[int], min_class_size: int) -> None:
    """Checks the private data against the public lower bound the accountant uses. For the
    operator only: a release must not publish the class sizes (under a label-changing
    replacement they differ between neighbours, so exact sizes would reveal the record).

    **What if the stated bound is wrong.** Too low: the guarantee holds, with more noise than
    needed (the rate l/min_class_size is over-stated). Above some class's true size: the rate of
    that class's draws is under-stated and the computed ε is not a guarantee, so the release is
    refused (fail closed). The refusal is itself a function of the private data: it says whether
    the smallest class is below the bound, one bit, which no ε accounts for. We accept that bit
    and do not hide it (e.g. by releasing anyway, or by randomising the check) because (1) the
    refusal reaches only the operator, who holds the data already, and nothing is written;
    (2) the alternatives are worse: releasing with an under-stated rate breaks the guarantee for
    every record of the small class, and a DP test of the bound would spend budget and still
    fail sometimes. The operator must then treat the bound as public knowledge, not as a value
    tuned to the data: lowering it until the check passes, or publishing that a first attempt
    was refused, makes the final bound (and the refusal) a release about the smallest class that
    no ε covers. The same holds for the data file's other checks
    (:mod:`maskdp_jax.release.datasets`: labels in range, finite features), whose refusals are
    likewise for the operator only.

    Raises:
      ValueError: an empty class, or a class below ``min_class_size``.
    """
    sizes = np.asarray(class_sizes, dtype=np.int64)
    empty = np.flatnonzero(sizes == 0)
    if empty.size:
        raise ValueError(f"classes {empty.tolist()} have no records: DP-CDA draws every class; "
                         "drop the empty classes from the label set or add data.")
    small = np.flatnonzero(sizes < min_class_size)
    if small.size:
        raise ValueError(
            f"classes {small.tolist()} have fewer than min_class_size={min_class_size} records, "
            "the public lower bound the accountant's sampling rate l/min_class_size assumes; "
            "lower min_class_size (to a value that is public knowledge) or add data.")


def noise_multiplier(*, order: int, clip_norm: float, sigma_x: float,
                     sigma_y: float | None) -> float:
    """z = l/√(4c²/σx² + 2/σy²): one draw is a Gaussian mechanism with ε(α) = α/(2z²).

    ``sigma_y=None`` releases the label without noise and drops its term (z = lσx/(2c)): valid
    because the class-centric label mean is always e_k (module docstring). 0 when a noise std is
    0 (no privacy).
    """
    if sigma_x < 0 or (sigma_y is not None and sigma_y < 0):
        raise ValueError(f"noise stds must be >= 0; got sigma_x={sigma_x}, sigma_y={sigma_y}.")
    if sigma_x == 0 or sigma_y == 0:
        return 0.0
    label_term = 0.0 if sigma_y is None else 2.0 / sigma_y**2
    return order / math.sqrt(4.0 * clip_norm**2 / sigma_x**2 + label_term)


@dataclasses.dataclass(frozen=True)
class MixingPrivacy:
    """The (ε, δ) of one DP-CDA release and what it was computed from.

    Attributes:
      epsilon: the guarantee, max of the two adjacency cases.
      epsilon_same_label: case 1 (Wang et al. 2019 improved bound).
      epsilon_label_change: case 2 (Poisson-subsampled Gaussian bound, dp-accounting RDP).
      epsilon_rate_dataset: case 1 at γ = l/N: **not a guarantee**, shows the under-count of
        reading the seed's undefined p as l/N.
      sampling_rate: γ = l / min_class_size.
      draws_same_label, draws_label_change: the number of composed draws per case.
      noise_multiplier: z of :func:`noise_multiplier`.
      best_order: the Rényi order attaining ``epsilon_same_label``.
      delta, order, clip_norm, sigma_x, sigma_y: the inputs.
    """

    epsilon: float
    epsilon_same_label: float
    epsilon_label_change: float
    epsilon_rate_dataset: float
    sampling_rate: float
    draws_same_label: int
    draws_label_change: int
    noise_multiplier: float
    best_order: int
    delta: float
    order: int
    clip_norm: float
    sigma_x: float
    sigma_y: float | None

    def to_dict(self) -> dict[str, float | int]:
        return dataclasses.asdict(self)


def _epsilon(rdp: np.ndarray, orders: Sequence[int], delta: float) -> tuple[float, int]:
    """(ε, the order attaining it) of an RDP curve by Balle et al. 2020, Theorem 21 (never
    looser than the seed's ε + log(1/δ)/(α−1)).

    RDP is a divergence, so ≥ 0; a value rounded below 0 (a numerically extreme event) is
    clipped to 0, which can only raise ε. dp-accounting's ``compute_epsilon`` would instead read
    such an order, and any order whose RDP is below about δ², as ε = 0 (a KL shortcut) and return
    0 overall; so the conversion is ours (:func:`maskdp_jax.accounting.theorem41.balle2020_curve`,
    the same formula without the shortcut).
    """
    rdp = np.maximum(np.asarray(rdp, dtype=np.float64), 0.0)
    curve = balle2020_curve(rdp=rdp, orders=orders, delta=delta)
    best = int(np.argmin(curve))
    return max(0.0, float(curve[best])), int(orders[best])


def _same_label(*, rate, z, draws, delta, orders) -> tuple[float, int]:
    """Case 1: ε and the order attaining it."""
    rdp = draws * without_replacement.subsampled_gaussian_rdp(
        sampling_rate=rate, noise_multiplier=z, orders=orders)
    return _epsilon(rdp, orders, delta)


def _label_change(*, rate, z, draws, delta, orders) -> float:
    """Case 2: the Poisson-subsampled Gaussian bound (dp-accounting)."""
    accountant = dp_accounting.rdp.RdpAccountant(orders=[float(a) for a in orders])
    event = dp_accounting.PoissonSampledDpEvent(rate, dp_accounting.GaussianDpEvent(z))
    return _epsilon(accountant.compose(event, draws).rdp, orders, delta)[0]


def _guarantee(setup: MixingSetup, z: float, orders) -> tuple[float, int, float]:
    """``(ε same label, its best order, ε label change)`` of draws with noise-to-sensitivity z."""
    n_same, n_change = setup.draws_per_case
    common = dict(rate=setup.sampling_rate, z=z, delta=setup.delta, orders=orders)
    same, best = _same_label(draws=n_same, **common)
    return same, best, _label_change(draws=n_change, **common)


def mixing_epsilon(
    setup: MixingSetup,
    *,
    sigma_x: float,
    sigma_y: float | None,
    orders: Sequence[int] = DEFAULT_ORDERS,
) -> MixingPrivacy:
    """(ε, δ) of releasing ⌊T/K⌋ mixed samples per class (see the module docstring).

    Args:
      setup: the release's public parameters.
      sigma_x, sigma_y: noise stds on the feature mean and on the one-hot label mean; 0 means
        no noise (ε = ∞); ``sigma_y=None``: the label is released without noise (valid, see
        the module docstring).
      orders: integer Rényi orders.

    Returns:
      :class:`MixingPrivacy`.
    """
    z = noise_multiplier(order=setup.order, clip_norm=setup.clip_norm, sigma_x=sigma_x,
                         sigma_y=sigma_y)
    n_same, n_change = setup.draws_per_case
    common = dict(delta=setup.delta, order=setup.order, clip_norm=setup.clip_norm,
                  sigma_x=sigma_x, sigma_y=sigma_y, sampling_rate=setup.sampling_rate,
                  draws_same_label=n_same, draws_label_change=n_change, noise_multiplier=z)
    if z == 0.0:
        inf = math.inf
        return MixingPrivacy(epsilon=inf, epsilon_same_label=inf, epsilon_label_change=inf,
                             epsilon_rate_dataset=inf, best_order=0, **common)
    same, best, change = _guarantee(setup, z, orders)
    careless, _ = _same_label(rate=setup.order / setup.num_records, z=z, draws=n_same,
                              delta=setup.delta, orders=orders)
    return MixingPrivacy(epsilon=max(same, change), epsilon_same_label=same,
                         epsilon_label_change=change, epsilon_rate_dataset=careless,
                         best_order=best, **common)


def calibrate_sigma_x(
    setup: MixingSetup,
    *,
    target_epsilon: float,
    sigma_ratio: float | None,
    orders: Sequence[int] = DEFAULT_ORDERS,
) -> MixingPrivacy:
    """The smallest σx (with σy = ``sigma_ratio``·σx, or no label noise for ``None``) whose ε is
    at most ``target_epsilon``.

    ε decreases in σx (z grows with it), so a root search on log σx finds it; the returned σx is
    on the safe side of the root (its ε ≤ target).

    Raises:
      ValueError: bad inputs, or a target no σx below 1e6·c reaches (reported with the ε there).
    """
    target = inputs.check_epsilon_target(target_epsilon)
    if sigma_ratio is not None and not (math.isfinite(sigma_ratio) and sigma_ratio > 0):
        raise ValueError(f"sigma_ratio (sigma_y / sigma_x) must be > 0; got {sigma_ratio}.")

    def sigma_y(sx: float) -> float | None:
        return None if sigma_ratio is None else sigma_ratio * sx

    def epsilon(log_sigma: float) -> float:
        """The guarantee alone (the report-only quantities are computed once, at the end)."""
        sx = math.exp(log_sigma)
        z = noise_multiplier(order=setup.order, clip_norm=setup.clip_norm, sigma_x=sx,
                             sigma_y=sigma_y(sx))
        same, _, change = _guarantee(setup, z, orders)
        return max(same, change)

    lo, hi = math.log(1e-3 * setup.clip_norm), math.log(1e6 * setup.clip_norm)
    if (at_hi := epsilon(hi)) > target:
        raise ValueError(
            f"target epsilon {target:g} is unreachable: even sigma_x = {math.exp(hi):.3g} gives "
            f"epsilon = {at_hi:.4g} (delta = {setup.delta:g}); raise delta, lower the "
            "number of synthetic samples or raise the mixing order.")
    if epsilon(lo) <= target:
        root = lo
    else:
        root = optimize.brentq(lambda s: epsilon(s) - target, lo, hi, xtol=1e-6)
        step = 1e-6
        while epsilon(root) > target:
            root += step
            step *= 2
    sx = math.exp(root)
    return mixing_epsilon(setup, sigma_x=sx, sigma_y=sigma_y(sx), orders=orders)


def compose_releases(*, epsilons: Sequence[float], deltas: Sequence[float]) -> tuple[float, float]:
    """(ε, δ) of several DP-CDA releases of the same private data: **basic composition**, the sum
    of their ε and the sum of their δ (Dwork & Roth 2014, "The Algorithmic Foundations of
    Differential Privacy", Theorem 3.16; it holds when each release is chosen after seeing the
    previous ones too, Dwork, Rothblum & Vadhan 2010, "Boosting and Differential Privacy").

    Why not dp-accounting's composition: a release's ε is the larger of two cases, and the
    same-label case comes from this project's without-replacement RDP bound, not from a
    dp-accounting ``DpEvent``, so there is no event to compose. Summing each case's RDP curves
    over the releases before the conversion would be tighter; the sum of (ε, δ) is an upper bound
    under the same replace-one adjacency whatever the releases' setups.

    Args:
      epsilons: each release's ε (∞ for a release without noise).
      deltas: each release's δ, in the same order.

    Returns:
      ``(Σ ε, Σ δ)``.

    >>> compose_releases(epsilons=[5.0, 2.0], deltas=[1e-5, 1e-5])
    (7.0, 2e-05)
    """
    if len(epsilons) != len(deltas) or not epsilons:
        raise ValueError(f"one δ per ε, at least one release; got {len(epsilons)} ε and "
                         f"{len(deltas)} δ.")
    if any(not e >= 0 for e in epsilons) or any(not 0 <= d < 1 for d in deltas):
        raise ValueError(f"every ε must be >= 0 and every δ in [0, 1); got {list(epsilons)}, "
                         f"{list(deltas)}.")
    return float(math.fsum(epsilons)), float(math.fsum(deltas))
