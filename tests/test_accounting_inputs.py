"""Malformed privacy numbers: δ, ε, q, σ, steps, accountant (the catalogue of malformed inputs,
issue 6; helpers in tests/malformed.py): ``accounting`` refuses them through its public API (the
checks live in ``accounting.inputs``).

The rules of every row are in ``tests/malformed.py``.
"""

from __future__ import annotations

import math

from malformed import Case, assert_refused, table

from maskdp_jax import accounting

EPS = dict(q=0.01, noise_multiplier=1.0, steps=100, delta=1e-5, method="rdp")
CAL = dict(target_epsilon=1.0, q=0.01, steps=100, delta=1e-5, method="rdp")


def eps_case(id: str, error, match: str, **kw) -> Case:
    return Case(f"epsilon-{id}", lambda _: accounting.epsilon(**{**EPS, **kw}), error, match)


def cal_case(id: str, error, match: str, **kw) -> Case:
    return Case(f"calibrate-{id}", lambda _: accounting.calibrate_noise_multiplier(
        **{**CAL, **kw}), error, match)


@table(
    Case("delta-zero", lambda _: accounting.check_delta(delta=0.0, num_examples=100), ValueError,
         r"delta must satisfy 0 < delta < 1, got 0\.0"),
    Case("delta-negative", lambda _: accounting.check_delta(delta=-1e-5, num_examples=100),
         ValueError, r"0 < delta < 1"),
    Case("delta-not-below-1/N", lambda _: accounting.check_delta(delta=1e-3, num_examples=1000),
         ValueError, r"delta=0\.001 is >= 1/N = 0\.001 \(N=1000\); such a delta allows publishing "
         r"a whole video in the clear\. Use delta << 1/N"),
    Case("delta-nan", lambda _: accounting.check_delta(delta=math.nan, num_examples=100),
         ValueError, r"delta must be finite"),
    cal_case("epsilon-zero", ValueError, r"target_epsilon must be > 0, got 0\.0",
             target_epsilon=0.0),
    cal_case("epsilon-negative", ValueError, r"target_epsilon must be > 0", target_epsilon=-1.0),
    cal_case("epsilon-nan", ValueError, r"target_epsilon must be finite", target_epsilon=math.nan),
    cal_case("epsilon-unreachable", ValueError,
             r"target_epsilon=0\.0001 is unreachable: even noise_multiplier=10000 gives "
             r"epsilon=.* > target\. Raise target_epsilon, or plan fewer steps",
             target_epsilon=1e-4, q=0.25, steps=6),
    cal_case("epsilon-needs-no-noise", ValueError,
             r"target_epsilon=1e\+06 is so large .* nearly non-private run\. Lower "
             r"target_epsilon, or set the noise multiplier", target_epsilon=1e6),
    eps_case("q-zero", ValueError, r"q \(sampling rate B/N\) must be > 0, got 0\.0", q=0.0),
    eps_case("q-negative", ValueError, r"q \(sampling rate B/N\) must be > 0", q=-0.1),
    eps_case("q-above-one", ValueError,
             r"q \(sampling rate B/N\) must be < 1, got 1\.5: .*check batch size and dataset size",
             q=1.5),
    eps_case("q-one", ValueError, r"must be < 1, got 1\.0: the expected batch size is at least "
             r"the dataset size", q=1.0),
    eps_case("q-nan", ValueError, r"q \(sampling rate B/N\) must be finite", q=math.nan),
    eps_case("q-string", TypeError, r"q \(sampling rate B/N\) must be a real number", q="0.1"),
    eps_case("sigma-negative", ValueError, r"noise_multiplier must be >= 0, got -1\.0",
             noise_multiplier=-1.0),
    eps_case("sigma-nan", ValueError, r"noise_multiplier must be finite",
             noise_multiplier=math.nan),
    eps_case("steps-negative", ValueError, r"steps must be >= 0, got -1", steps=-1),
    eps_case("steps-float", TypeError, r"steps must be an integer, got 2\.5", steps=2.5),
    cal_case("steps-zero", ValueError, r"steps must be >= 1, got 0", steps=0),
    eps_case("rdp-with-replace", ValueError,
             r"RDP cannot account Poisson subsampling under the 'replace' adjacency.*Use "
             r"method='pld' \(exact REPLACE_ONE PLD\) or adjacency='special'",
             adjacency="replace"),
    cal_case("rdp-with-replace", ValueError, r"RDP cannot account .*Use method='pld'",
             adjacency="replace"),
    eps_case("unknown-method", ValueError, r"method must be one of \('pld', 'rdp'\)",
             method="moments"),
    eps_case("unknown-adjacency", ValueError, r"adjacency must be one of", adjacency="swap"),
    eps_case("unknown-sampling", ValueError, r"sampling must be one of", sampling="shared"),
    Case("ledger-sigma-negative", lambda _: accounting.Ledger().record(q=0.1, noise_multiplier=-2),
         ValueError, r"noise_multiplier must be >= 0"),
)
def test_bad_privacy_numbers(case, tmp_path):
    assert_refused(case, tmp_path)
