"""benchmarks/dpcda_scale.py at a small size: the flip rate is the Monte-Carlo rate, σ is the
accountant's calibration, the table has a row per (dataset, ε)."""

import numpy as np
import pytest

from benchmarks import dpcda_scale
from maskdp_jax.accounting import dpcda


@pytest.mark.parametrize("sigma,num_classes", [(0.32, 10), (1.0, 10), (0.5, 3), (4.0, 10)])
def test_flip_rate_is_the_argmax_of_a_noised_one_hot(sigma, num_classes):
    rng = np.random.default_rng(0)
    scores = np.eye(num_classes)[0] + sigma * rng.normal(size=(200_000, num_classes))
    measured = np.mean(np.argmax(scores, axis=1) != 0)  # ±0.1 % (1σ) at worst
    assert dpcda_scale.flip_rate(sigma, num_classes) == pytest.approx(measured, abs=5e-3)


def test_a_small_table_is_the_calibration():
    size = dpcda_scale.Size("tiny", 200, 20, 1.0)
    orders = range(2, 17)  # few Rényi orders: a fast test
    rows = [dpcda_scale.row(size, order=o, epsilon=5.0, renyi_orders=orders) for o in (4, 16)]
    setup = dpcda.MixingSetup(order=4, clip_norm=1.0, num_classes=10, min_class_size=20,
                              num_records=200, num_synthetic=200, delta=1e-5)
    expected = dpcda.calibrate_sigma_x(setup, target_epsilon=5.0, sigma_ratio=1.0, orders=orders)
    assert rows[0]["sigma"] == expected.sigma_x
    assert rows[1]["sigma"] < rows[0]["sigma"]  # larger l: less noise for the same ε
    md = dpcda_scale.table(rows, sizes=[size])
    assert md.splitlines()[2].startswith("| tiny | 200 | 20 | 1 | 5 | ")
    assert f"{rows[0]['sigma']:.3f} ({100 * rows[0]['flip_rate']:.0f} %)" in md
