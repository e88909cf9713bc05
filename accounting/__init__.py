"""Privacy accounting for MaskDP-SGD with masked adjacency.

Wraps dp-accounting's RDP and PLD accountants. Public surface:

* :func:`epsilon` / :func:`calibrate_noise_multiplier`: ε for σ, σ for ε.
* :class:`Ledger`: the (q, σ, steps) history of a run, stored in checkpoints.
* :func:`theorem41_epsilon`: the papers' closed form, checked against dp-accounting.
* :func:`check_delta`: refuses δ >= 1/N.
* :func:`supports` / :func:`unsupported_reason`: which (accountant, adjacency, sampling)
  combinations can be accounted, and why not.

See ``accounting/README.md`` for the adjacency relations and sampling schemes. The plain-English
statement of what a run's ε protects is written by :mod:`maskdp_jax.reporting.privacy` (it needs the
training mode, which this package does not know).
"""

from maskdp_jax.accounting.accountant import (
    calibrate_noise_multiplier,
    epsilon,
    history_epsilon,
    supports,
    unsupported_reason,
)
from maskdp_jax.accounting.coupled import coupled_step_rdp
from maskdp_jax.accounting.events import Segment, steps_for_epochs
from maskdp_jax.accounting.inputs import Accountant, Adjacency, Sampling, check_delta
from maskdp_jax.accounting.ledger import Ledger
from maskdp_jax.accounting.theorem41 import theorem41_epsilon, theorem41_rdp

__all__ = [
    "Accountant",
    "Adjacency",
    "Ledger",
    "Sampling",
    "Segment",
    "calibrate_noise_multiplier",
    "check_delta",
    "coupled_step_rdp",
    "epsilon",
    "history_epsilon",
    "steps_for_epochs",
    "supports",
    "theorem41_epsilon",
    "theorem41_rdp",
    "unsupported_reason",
]
