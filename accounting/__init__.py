"""Privacy accounting for MaskDP-SGD with masked adjacency.

Wraps dp-accounting's RDP and PLD accountants. Public surface:

* :func:`epsilon` / :func:`calibrate_noise_multiplier`: ε for σ, σ for ε.
* :class:`Ledger`: the (q, σ, steps) history of a run, stored in checkpoints.
* :func:`privacy_report` / :class:`PrivacyReport`: ε with the adjacency named.
* :func:`theorem41_epsilon`: the papers' closed form, checked against dp-accounting.
* :func:`check_delta`: refuses δ >= 1/N.

See ``accounting/README.md`` for the adjacency relations and sampling schemes.
"""

from accounting.accountant import calibrate_noise_multiplier, epsilon, history_epsilon
from accounting.coupled import coupled_step_rdp
from accounting.events import Segment
from accounting.inputs import check_delta
from accounting.ledger import Ledger
from accounting.report import PrivacyReport, privacy_report
from accounting.theorem41 import theorem41_epsilon, theorem41_rdp

__all__ = [
    "Ledger",
    "PrivacyReport",
    "Segment",
    "calibrate_noise_multiplier",
    "check_delta",
    "coupled_step_rdp",
    "epsilon",
    "history_epsilon",
    "privacy_report",
    "theorem41_epsilon",
    "theorem41_rdp",
]
