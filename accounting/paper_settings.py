"""The training settings of the MaskDP papers (Schneider et al. 2024a/b), for tables and checks.

Paper: batch size 128, clip norm C = 1, 150 epochs (300 for UCF-101), δ = 1e-6
for NTU RGB+D and 1e-5 for Toyota Smarthome, HMDB-51 and UCF-101 (Schneider et al. 2024a,
Sec. 5.3; Schneider et al. 2024b, Sec. 5.3). The papers do not state the number of steps; we
use ``epochs · ceil(N / B)`` (:func:`maskdp_jax.accounting.events.steps_for_epochs`, the
trainer's rule too: the steps per epoch of Opacus' Poisson loader, which the papers
used, never fewer than the papers' ``T·N/B``).

Training-set sizes N (the unit of privacy is one video):

* NTU RGB+D 60, cross-subject: 40,320 training samples (16,560 test), Shahroudy
  et al., "NTU RGB+D", CVPR 2016, Sec. 4.1.
* Toyota Smarthome, cross-subject: 10,682 clips. The protocol (Das et al., ICCV
  2019) trains on subjects 3, 4, 6, 7, 9, 12, 13, 15, 17, 19, 25. The authors' split
  files (github.com/srijandas07/i3d_smarthome, ``splits/train_CS.txt`` 8,831 and
  ``splits/validation_CS.txt`` 1,854 lines, the latter holding subjects 19 and 25)
  total 10,685, less 3 clips of the dropped class Pour.Fromcup (the 31-class
  dataset has 16,115 clips, as in the paper; the files list 16,129). If only
  ``train_CS`` is used for training, N = 8,829.
* UCF-101, split 1: 9,537 training videos (``trainlist01.txt``; 3,783 in
  ``testlist01.txt``), Soomro et al. 2012.
* HMDB-51, split 1: 3,570 training clips (70 per class × 51 classes in the split-1
  files; 1,530 test), Kuehne et al., ICCV 2011. 150 epochs: Schneider et al. 2024a, Sec. 5.3
  ("batch size 128, ... a 0.01 learning rate over 150 epochs") covers every dataset
  of its experiments, HMDB-51 included (its Table 2).
"""

from __future__ import annotations

import dataclasses

from maskdp_jax.accounting import events


@dataclasses.dataclass(frozen=True)
class PaperSetting:
    """One dataset's DP-SGD setting in the papers.

    Attributes:
      name: dataset and split.
      num_examples: N, training videos.
      epochs: training epochs.
      delta: δ of the reported guarantee.
      batch_size: expected batch size B.
    """

    name: str
    num_examples: int
    epochs: int
    delta: float
    batch_size: int = 128

    @property
    def q(self) -> float:
        """Poisson sampling rate B / N."""
        return self.batch_size / self.num_examples

    @property
    def steps(self) -> int:
        """``epochs · ceil(N / B)`` logical steps
        (:func:`maskdp_jax.accounting.events.steps_for_epochs`, the trainer's rule)."""
        return events.steps_for_epochs(num_examples=self.num_examples,
                                       batch_size=self.batch_size, epochs=self.epochs)


PAPER_SETTINGS: tuple[PaperSetting, ...] = (
    PaperSetting("NTU RGB+D 60 (CS)", num_examples=40320, epochs=150, delta=1e-6),
    PaperSetting("Toyota Smarthome (CS)", num_examples=10682, epochs=150, delta=1e-5),
    PaperSetting("UCF-101 (split 1)", num_examples=9537, epochs=300, delta=1e-5),
    PaperSetting("HMDB-51 (split 1)", num_examples=3570, epochs=150, delta=1e-5),
)

PAPER_EPSILONS: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 1.0, 2.0, 3.0, 5.0, 10.0)
"""Privacy budgets at which the papers (and our table) report results."""
