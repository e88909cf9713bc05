r"""The headline's floor, measured: the shipped pretrained backbone with an untrained head.

    python benchmarks/pretrained_floor.py --out=docs/results/default/floor.json

The default run fine-tunes ``shipped:mvit_cpu_pretrained`` with a fresh head
(configs/default.py); before any fine-tuning step the model is that backbone and a head drawn from
the run's seed. This evaluates exactly that model, for seeds 0-4, on the default setting's test
split (full videos, the evaluation the headline uses), so the table's floor is a measurement and
not only the expectation "chance, since no class has been seen". No training, no privacy spent.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from maskdp_jax import train
from maskdp_jax.configs import default
from maskdp_jax.reporting import results
from maskdp_jax.run import evaluation


def floor(seeds=range(5)) -> dict:
    """Test top-1 of the default model before fine-tuning, one entry per seed."""
    config = default.get_config()
    config.mode = "nonprivate"  # full videos only; the data and the model are the default run's
    _, test_ds = train.load_data(config)
    per_seed = {}
    for seed in seeds:
        config.seed = seed
        built = train.build_model(config, num_classes=test_ds.num_classes)
        logits = evaluation.predict(built.apply_fn, built.params, test_ds,
                                    num_clips=config.input.eval_clips,
                                    batch_size=config.physical_batch_size)
        per_seed[seed] = evaluation.accuracy_metrics(logits, test_ds.labels,
                                                     test_ds.num_classes)["top1"]
    values = list(per_seed.values())
    return {"model": config.model.init_from, "setting": config.input.setting,
            "test_videos": len(test_ds), "chance": 1.0 / test_ds.num_classes,
            "top1_per_seed": per_seed, "top1_mean": float(np.mean(values)),
            "top1_std": float(np.std(values, ddof=1)),
            "built_with": results.build_environment()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/results/default/floor.json")
    args = parser.parse_args()
    found = floor()
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(found, f, indent=1)
    print(f"floor: test top-1 {100 * found['top1_mean']:.1f} ± {100 * found['top1_std']:.1f} % "
          f"over {len(found['top1_per_seed'])} heads (chance {100 * found['chance']:.1f} %)")


if __name__ == "__main__":
    main()
