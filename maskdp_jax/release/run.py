"""A DP-CDA release and its utility study: calibrate, mix, write the synthetic set, evaluate.

``release_once`` makes the one release a config asks for (secret randomness by default),
records it in the workdir's release ledger (:mod:`maskdp_jax.release.ledger`) and then writes
``synthetic.npz`` (``synthetic_<n>.npz`` for the n-th release, ``release.another=True``) with its
report, which gives the composed ε of every release in the ledger; ``utility_sweep`` repeats
the mechanism over mixing orders l × ε × seeds × label variants and trains the config's classifier
on each synthetic set, testing on the real held-out split (Saha et al. 2024's protocol). The sweep
is a study, not a release: each of its runs re-mixes the same private data with a published seed,
so its accuracies are **outside the release's ε**. It runs by default only on public benchmark data
(``sweep.enabled="auto"``, :data:`maskdp_jax.release.datasets.BENCHMARKS`) and writes to its own
folder, ``<workdir>/study/``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import os
from typing import Any

import numpy as np
from tqdm import tqdm

from maskdp_jax.accounting import dpcda, inputs
from maskdp_jax.core import randomness
from maskdp_jax.data import atomic
from maskdp_jax.release import datasets, ledger, mixing
from maskdp_jax.run.workdir_lock import WorkdirLock

CLASSIFIERS = ("logistic", "mlp")
LABEL_VARIANTS = {True: "noised label (seed)", False: "exact label"}
"""``label_noise`` -> name. Both are valid under the same ε (accounting.dpcda)."""
STUDY_MODES = ("auto", "yes", "no")
"""``sweep.enabled``: ``auto`` runs the study on benchmark sources only."""
STUDY_DIR = "study"


def make_classifier(name: str, seed: int):
    """A scikit-learn classifier by name: ``logistic`` (multinomial logistic regression) or
    ``mlp`` (one hidden layer of 100 ReLUs, Adam)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    if name == "logistic":
        return LogisticRegression(max_iter=2000)
    if name == "mlp":
        return MLPClassifier(hidden_layer_sizes=(100,), max_iter=500, random_state=seed)
    raise ValueError(f"classifier must be one of {CLASSIFIERS}; got {name!r}.")


def num_synthetic(config, train: datasets.Split) -> int:
    """T: ``config.num_synthetic``, or as many as the private records when it is 0."""
    return int(config.num_synthetic) or len(train.labels)


def mixing_setup(config, train: datasets.Split, *, order: int) -> dpcda.MixingSetup:
    """The public parameters of a release at mixing order ``order`` (validated)."""
    return dpcda.MixingSetup(order=order, clip_norm=config.clip_norm,
                             num_classes=train.num_classes, min_class_size=config.min_class_size,
                             num_records=len(train.labels),
                             num_synthetic=num_synthetic(config, train), delta=config.delta,
                             draws=config.draws)


def privacy_for(config, train: datasets.Split, *, order: int, epsilon: float,
                label_noise: bool) -> dpcda.MixingPrivacy:
    """The noise of one release at target ``epsilon`` (∞: no noise, the mixing alone)."""
    setup = mixing_setup(config, train, order=order)
    if not math.isfinite(epsilon):
        return dpcda.mixing_epsilon(setup, sigma_x=0.0, sigma_y=0.0 if label_noise else None)
    return dpcda.calibrate_sigma_x(setup, target_epsilon=epsilon,
                                   sigma_ratio=config.sigma_ratio if label_noise else None)


def load(config) -> tuple[datasets.Split, datasets.Split | None]:
    """``(train, test)`` of ``config.data`` with every feature row clipped to ``config.clip_norm``
    (the test data too, so the classifier sees the same preprocessing); ``test`` is None for own
    data without held-out data."""
    return tuple(None if split is None else dataclasses.replace(
        split, features=mixing.clip_rows(split.features, config.clip_norm))
        for split in datasets.load(config.data))


def study_enabled(config) -> bool:
    """Whether :func:`maskdp_jax.run` runs the utility study: ``sweep.enabled`` is ``"yes"``, or
    ``"auto"`` on a benchmark source; and ``sweep.orders`` is not empty."""
    mode = config.sweep.enabled
    if mode not in STUDY_MODES:
        raise ValueError(f"sweep.enabled must be one of {STUDY_MODES}; got {mode!r}.")
    wanted = mode == "yes" or (mode == "auto" and config.data.source in datasets.BENCHMARKS)
    return wanted and len(config.sweep.orders) > 0


def synthesize(key, config, train: datasets.Split,
               privacy: dpcda.MixingPrivacy) -> mixing.Mixture:
    """Algorithm 1 on the (clipped, :func:`load`) private features with ``privacy``'s noise."""
    return mixing.mix(key, train.features, train.labels,
                      num_classes=train.num_classes, order=privacy.order,
                      num_synthetic=num_synthetic(config, train), sigma_x=privacy.sigma_x,
                      sigma_y=privacy.sigma_y or 0.0)


def test_accuracy(config, features: np.ndarray, labels: np.ndarray, test: datasets.Split,
                  *, seed: int) -> float:
    """Top-1 accuracy on the real (clipped, :func:`load`) test split of ``config.classifier``
    trained on a synthetic set.

    A synthetic set whose labels collapsed to one class (label noise can do that) gives the
    constant classifier, whose accuracy is that class's share of the test set.
    """
    present = np.unique(labels)
    if present.size < 2:
        return float(np.mean(test.labels == present[0]))
    model = make_classifier(config.classifier, seed).fit(features, labels)
    return float(model.score(test.features, test.labels))


def another_release(config) -> bool:
    """``release.another``: one more release into a workdir that holds one (False when a config
    file made before the key has none: the safe side, the second release is refused)."""
    another = config.release.get("another", False)
    if not isinstance(another, bool):
        raise ValueError(f"{ledger.ANOTHER_KEY} must be True or False; got {another!r}.")
    return another


def release_once(config, train: datasets.Split, test: datasets.Split | None,
                 workdir: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The release the config asks for: ``(its record, the workdir's ledger)``.

    Journals the release in ``<workdir>/release_ledger.json`` (ε, δ, randomness commitment, time,
    file name and SHA-256), **then** writes the file
    (:func:`maskdp_jax.release.ledger.file_name`: features ``[T', d]`` float32, labels ``[T']``
    int32, class names ``[K]``, T' = K·⌊T/K⌋: nothing else leaves the private data). The
    record's ``test_accuracy`` is None without held-out data; the ledger
    (:func:`maskdp_jax.release.ledger.to_dict`) holds every release of the workdir and their
    composition.

    Raises:
      FileExistsError / ValueError: the workdir holds a release and ``release.another`` is not
        set, or its ledger cannot be extended (:func:`maskdp_jax.release.ledger.check_workdir`).
    """
    spec = config.release
    previous = ledger.check_workdir(workdir, another=another_release(config))
    privacy = privacy_for(config, train, order=spec.order, epsilon=spec.epsilon,
                          label_noise=spec.label_noise)
    rand = randomness.for_run(mode=config.randomness, seed=config.seed, restored=None)
    mixture = synthesize(rand.noise_key(), config, train, privacy)
    buffer = io.BytesIO()
    np.savez(buffer, features=mixture.features, labels=mixture.labels,
             class_names=np.array(train.class_names))
    content = buffer.getvalue()
    entry = ledger.Release(
        index=len(previous) + 1, file=ledger.file_name(len(previous) + 1),
        sha256=hashlib.sha256(content).hexdigest(), time=ledger.now(),
        randomness=rand.public_id(), epsilon=privacy.epsilon, delta=privacy.delta,
        num_samples=int(len(mixture.labels)), privacy=privacy.to_dict())
    journal = ledger.write(workdir, [*previous, entry])  # before anything leaves
    atomic.write(os.path.join(workdir, entry.file), content)
    accuracy = None if test is None else test_accuracy(config, mixture.features, mixture.labels,
                                                       test, seed=config.seed)
    return {"file": entry.file, "sha256": entry.sha256, "index": entry.index,
            "num_samples": entry.num_samples, "randomness": entry.randomness,
            "label_noise": bool(spec.label_noise), "privacy": privacy.to_dict(),
            "test_accuracy": accuracy}, journal


def utility_sweep(config, train: datasets.Split, test: datasets.Split) -> list[dict[str, Any]]:
    """One row per (label variant, ε, l, seed): the calibrated noise and the test accuracy.

    Seeded randomness (``Randomness(mode="seeded", seed=s)``): a study must be reproducible,
    and its synthetic sets are not released.
    """
    sweep = config.sweep
    cells = [(noise, eps, order) for noise in sweep.label_noise for eps in sweep.epsilons
             for order in sweep.orders]
    rows = []
    for noise, eps, order in tqdm(cells, desc="DP-CDA sweep", unit="cell"):
        privacy = privacy_for(config, train, order=order, epsilon=eps, label_noise=noise)
        for seed in sweep.seeds:
            key = randomness.Randomness(mode="seeded", seed=seed).noise_key()
            mixture = synthesize(key, config, train, privacy)
            rows.append({
                "variant": LABEL_VARIANTS[noise], "epsilon": eps, "order": order, "seed": seed,
                "epsilon_achieved": privacy.epsilon, "sigma_x": privacy.sigma_x,
                "sigma_y": privacy.sigma_y, "sampling_rate": privacy.sampling_rate,
                "label_flip_rate": float(np.mean(mixture.labels != mixture.classes)),
                "accuracy": test_accuracy(config, mixture.features, mixture.labels, test,
                                          seed=seed),
            })
    return rows


def summarize(rows: list[dict[str, Any]]) -> dict[tuple[str, float, int], tuple[float, float]]:
    """``(variant, ε, l) -> (mean, std)`` of the accuracy over seeds."""
    groups: dict[tuple[str, float, int], list[float]] = {}
    for r in rows:
        groups.setdefault((r["variant"], r["epsilon"], r["order"]), []).append(r["accuracy"])
    return {k: (float(np.mean(v)), float(np.std(v))) for k, v in groups.items()}


def utility_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one row per (variant, ε), one column per l, mean ± std accuracy (%); the best
    l of each row in bold."""
    stats = summarize(rows)
    orders = sorted({k[2] for k in stats})
    lines = ["| labels | ε | " + " | ".join(f"l = {o}" for o in orders) + " |",
             "|---|---|" + "---|" * len(orders)]
    for variant, eps in sorted({(k[0], k[1]) for k in stats}, key=lambda t: (t[0], t[1])):
        best = max(orders, key=lambda o: stats[(variant, eps, o)][0])
        cells = []
        for o in orders:
            mean, std = stats[(variant, eps, o)]
            text = f"{100 * mean:.1f} ± {100 * std:.1f}"
            cells.append(f"**{text}**" if o == best else text)
        label = f"{eps:g}" if math.isfinite(eps) else "∞"
        lines.append(f"| {variant} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ledger_markdown(journal: dict[str, Any]) -> list[str]:
    """The report's lines on the workdir's releases (:mod:`maskdp_jax.release.ledger`)."""
    releases, total = journal["releases"], journal["composition"]
    if len(releases) == 1:
        return [f"The first release from this workdir, recorded in `{ledger.LEDGER}` before its "
                f"file was written. Another release into this workdir is refused unless "
                f"`{ledger.ANOTHER_KEY}=True`; its report then gives the composed ε of both."]
    lines = [f"**All {len(releases)} releases from this workdir compose to (ε, δ) = "
             f"({_number(total['epsilon'])}, {total['delta']:g})** by {total['method']}: whoever "
             "holds their files holds the privacy loss of all of them "
             f"(`{ledger.LEDGER}`, `accounting/dpcda.py`: `compose_releases`).",
             "",
             "| release | file | SHA-256 | time (UTC) | randomness | ε | δ |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['index']} | `{r['file']}` | `{r['sha256'][:16]}…` | {r['time']} | "
              f"`{r['randomness']}` | {_number(r['epsilon'])} | {r['delta']:g} |"
              for r in releases]
    lines.append(f"| **composed** | | | | | **{_number(total['epsilon'])}** | "
                 f"**{total['delta']:g}** |")
    return lines


def composed_headline(journal: dict[str, Any]) -> list[str]:
    """Before a later release's own (ε, δ), in the same paragraph: the composed (ε, δ) of the
    workdir ([] for a first release)."""
    releases, total = journal["releases"], journal["composition"]
    if len(releases) == 1:
        return []
    return [f"**Release {releases[-1]['index']} of this workdir: with the earlier ones, "
            f"(ε, δ) = ({_number(total['epsilon'])}, {total['delta']:g})** (composed, see "
            "\"Releases from this workdir\"). This release alone:"]


def _number(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else "∞"


def report_markdown(config, train: datasets.Split, test: datasets.Split | None,
                    record: dict[str, Any], studied: bool, journal: dict[str, Any]) -> str:
    """The release's report: what was released, its (ε, δ) and how it was computed, and the
    composed (ε, δ) of every release in the workdir's ledger (``journal``)."""
    p = record["privacy"]
    sigma_y = "none (exact label)" if p["sigma_y"] is None else f"{p['sigma_y']:.4g}"
    held_out = ("no held-out data" if test is None else
                f"test: {len(test.labels)} real held-out records")
    accuracy = ("no held-out data to test on (`data.test_path`)." if record["test_accuracy"] is None
                else f"test accuracy {100 * record['test_accuracy']:.1f} % (`{config.classifier}` "
                     "trained on the synthetic set, tested on real data).")
    lines = [
        f"# DP-CDA release: {config.title}",
        "",
        f"Private data: `{config.data.source}`, {len(train.labels)} records, "
        f"{train.num_classes} classes of at least {config.min_class_size} (a public bound; the "
        f"exact sizes are not released); {held_out}.",
        f"Released: `{record['file']}`, {record['num_samples']} synthetic "
        f"samples (features + argmax label), randomness `{record['randomness']}`, SHA-256 "
        f"`{record['sha256']}`.",
        "",
        "## Privacy",
        "",
        *composed_headline(journal),
        f"**(ε, δ) = ({p['epsilon']:.4g}, {p['delta']:g})** under replace-one adjacency on "
        "whole records (features and label), for mixing order "
        f"l = {p['order']}, clip norm c = {p['clip_norm']:g}, σx = {p['sigma_x']:.4g}, "
        f"σy = {sigma_y}.",
        "",
        "| quantity | value |",
        "|---|---|",
        f"| sampling rate p = l / min_class_size | {p['sampling_rate']:.4g} |",
        f"| draws composed (same-label case / label-change case) | {p['draws_same_label']} / "
        f"{p['draws_label_change']} |",
        f"| noise-to-sensitivity z of one draw | {p['noise_multiplier']:.4g} |",
        f"| ε, same-label replacement (Wang et al. 2019, improved bound) | "
        f"{p['epsilon_same_label']:.4g} (best order {p['best_order']}) |",
        f"| ε, label change (Poisson-subsampled Gaussian, dp-accounting RDP) | "
        f"{p['epsilon_label_change']:.4g} |",
        f"| ε if p were read as l/N (**not a guarantee**) | {p['epsilon_rate_dataset']:.4g} |",
        "",
        "Features were scaled by fixed constants only (no private statistics) and clipped to "
        "c. How each choice is made and why it is an upper bound: `accounting/dpcda.py`.",
        "",
        "## Releases from this workdir",
        "",
        *ledger_markdown(journal),
        "",
        "## Utility",
        "",
        f"Release: {accuracy}",
        "",
        (f"The utility study is in `{STUDY_DIR}/` and is **not covered by this release's ε**."
         if studied else "No utility study was run (`sweep.enabled`, `sweep.orders`)."),
    ]
    return "\n".join(lines) + "\n"


def _variant_table(rows, *, variant: str, key: str, fmt) -> str:
    """Markdown: one row per finite ε, one column per l, the seed-mean of ``key`` for
    ``variant``."""
    cells: dict[tuple[float, int], list[float]] = {}
    for r in rows:
        if r["variant"] == variant:
            cells.setdefault((r["epsilon"], r["order"]), []).append(r[key])
    orders = sorted({o for _, o in cells})
    lines = ["| ε | " + " | ".join(f"l = {o}" for o in orders) + " |",
             "|---|" + "---|" * len(orders)]
    for eps in sorted({e for e, _ in cells if math.isfinite(e)}):
        lines.append(f"| {eps:g} | " + " | ".join(fmt(float(np.mean(cells[(eps, o)])))
                                                  for o in orders) + " |")
    return "\n".join(lines)


def sigma_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: the calibrated σx of the exact-label cells, per (ε, l)."""
    return _variant_table(rows, variant=LABEL_VARIANTS[False], key="sigma_x",
                          fmt=lambda v: f"{v:.3g}")


def flip_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: the share of labels the seed's label noise flips (%), per (ε, l)."""
    return _variant_table(rows, variant=LABEL_VARIANTS[True], key="label_flip_rate",
                          fmt=lambda v: f"{100 * v:.0f}")


def best_order(rows: list[dict[str, Any]], *, variant: str, epsilon: float) -> int:
    """The l with the highest seed-mean accuracy of ``variant`` at ``epsilon``."""
    stats = summarize(rows)
    return max((o for (v, e, o) in stats if v == variant and e == epsilon),
               key=lambda o: stats[(variant, epsilon, o)][0])


def study_markdown(config, train: datasets.Split, test: datasets.Split,
                   rows: list[dict[str, Any]]) -> str:
    """The study's report (``study/report.md``): accuracy, σx and label flips per (ε, l)."""
    exact = LABEL_VARIANTS[False]
    bests = ", ".join(f"l = {best_order(rows, variant=exact, epsilon=e)} at ε = {e:g}"
                      for e in sorted({r["epsilon"] for r in rows}) if math.isfinite(e))
    return "\n".join([
        f"# DP-CDA utility study: {config.title}",
        "",
        "**Not covered by the release's ε.** Every cell re-mixes the private data with a "
        "published seed (to be reproducible), so its accuracy is a deterministic function of the "
        "private data. It is a measurement for public benchmark data; for data you must protect, "
        "leave it off (`sweep.enabled`, default `auto`: benchmark sources only).",
        "",
        f"`{config.classifier}` trained on each synthetic set, tested on {len(test.labels)} real "
        f"held-out records; mean ± std over seeds {list(config.sweep.seeds)}, top-1 (%), each "
        f"cell calibrated to its ε (δ = {config.delta:g}); sampling rate l / "
        f"{config.min_class_size}. Best l with exact labels: {bests}.",
        "",
        utility_table(rows),
        "",
        f"Chance: {100 / train.num_classes:.1f} %. Plot: `accuracy_vs_order.png`.",
        "",
        "## Calibrated σx (exact label)",
        "",
        sigma_table(rows),
    ] + ([  # only where the study ran the seed's noised label
        "",
        f"## Labels flipped by the seed's label noise (%, σy = {config.sigma_ratio:g}·σx)",
        "",
        flip_table(rows),
    ] if any(r["variant"] == LABEL_VARIANTS[True] for r in rows) else [])) + "\n"


def write_outputs(config, workdir: str, train, test, record, rows, journal) -> None:
    """``report.json`` (the config, the release and the workdir's ledger ``journal``) and
    ``report.md`` of the release; with a study, ``study/`` holds its ``report.md``,
    ``report.json``, ``utility.csv`` and ``accuracy_vs_order.png``."""
    from maskdp_jax.reporting import plots, results

    with open(os.path.join(workdir, "report.json"), "w") as f:
        json.dump({"config": config.to_dict(), "release": record, "ledger": journal}, f,
                  indent=1, default=float)
    with open(os.path.join(workdir, "report.md"), "w") as f:
        f.write(report_markdown(config, train, test, record, studied=bool(rows),
                                journal=journal))
    if not rows:
        return
    study = os.path.join(workdir, STUDY_DIR)
    os.makedirs(study, exist_ok=True)
    with open(os.path.join(study, "report.json"), "w") as f:
        json.dump({"note": "not covered by the release's epsilon", "sweep": rows}, f, indent=1,
                  default=float)
    with open(os.path.join(study, "report.md"), "w") as f:
        f.write(study_markdown(config, train, test, rows))
    results.write_csv(rows, os.path.join(study, "utility.csv"))
    plots.accuracy_vs_mixing_order(
        summarize(rows), os.path.join(study, "accuracy_vs_order.png"), delta=config.delta,
        title=f"DP-CDA on {config.data.source} (study, outside the release's ε)",
        chance=1.0 / train.num_classes)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What :func:`maskdp_jax.run` made: the release record, the sweep rows and the workdir's
    release ledger (:func:`maskdp_jax.release.ledger.to_dict`: every release, their composition)."""

    release: dict[str, Any]
    sweep: list[dict[str, Any]]
    ledger: dict[str, Any]


def check_public(config) -> None:
    """The config's public numbers, checked before any private data is read; every problem
    at once, in one message, so a user fixes them in one go.

    Raises:
      ValueError: a bad target ε, ``min_class_size`` or ``clip_norm`` unset, an own-data
        source's ``data`` settings unset (:func:`maskdp_jax.release.datasets.public_problems`),
        a bad ``sweep.enabled`` or ``release.another``, or ``release.epsilon = inf`` on own
        data without ``release.without_privacy=True`` (several problems: one message that
        numbers them).
    """
    problems: list[str] = []

    def check(fn) -> None:
        try:
            fn()
        except ValueError as e:
            problems.append(str(e))

    def epsilons() -> None:
        for key, eps in (("release.epsilon", config.release.epsilon),
                         *(("sweep.epsilons", e) for e in config.sweep.epsilons)):
            if math.isfinite(eps):
                inputs.check_epsilon_target(eps, name=key)

    def class_size() -> None:
        n_min = config.min_class_size
        if isinstance(n_min, bool) or not isinstance(n_min, int) or n_min < 1:
            raise ValueError(
                f"min_class_size must be set to a public lower bound on every class's size (an "
                f"integer >= 1, known without looking at the private data: accounting/dpcda.py)"
                f"; got {n_min!r}.")

    def clip_norm() -> None:
        c = config.clip_norm
        if not (isinstance(c, (int, float)) and math.isfinite(c) and c > 0):
            raise ValueError(f"the clip norm c (clip_norm) must be set to a fixed constant > 0; "
                             f"got {c!r}.")

    for fn in (epsilons, class_size, clip_norm):
        check(fn)
    problems += datasets.public_problems(config.data)
    for fn in (lambda: study_enabled(config), lambda: another_release(config),
               lambda: without_privacy(config)):
        check(fn)
    if len(problems) == 1:
        raise ValueError(problems[0])
    if problems:
        raise ValueError(f"{len(problems)} settings to fix: " + " ".join(
            f"({i}) {problem}" for i, problem in enumerate(problems, 1)))


def without_privacy(config) -> bool:
    """Whether the release is at ε = ∞, which private data needs asked for explicitly.

    ``release.epsilon = inf`` mixes without noise: the synthetic set is averages of real records,
    with no guarantee. On a benchmark (public) source that is the study's ceiling; on a user's
    own data it needs ``release.without_privacy=True``, so that no typo releases the data in
    the clear.

    Raises:
      ValueError: ε = ∞ on own data without the key, or the key not a bool.
    """
    asked = config.release.get("without_privacy", False)
    if not isinstance(asked, bool):
        raise ValueError(f"release.without_privacy must be True or False; got {asked!r}.")
    free = not math.isfinite(config.release.epsilon)
    if free and not asked and config.data.source not in datasets.BENCHMARKS:
        raise ValueError(
            f"release.epsilon = {config.release.epsilon} releases the private "
            f"{config.data.source} data without noise (no privacy guarantee); set "
            "release.without_privacy=True if that is what you mean, or a finite release.epsilon.")
    return free


def run(config, workdir: str) -> Outcome:
    """Check the public config and the workdir's release ledger, load and check the data, make
    the release, run the utility study if enabled, write everything to ``workdir``; bad input
    (``ValueError``, or ``FileExistsError`` for a workdir that holds a release while
    ``release.another`` is not set) is refused before anything is written.

    One release at a time per workdir (:class:`maskdp_jax.run.workdir_lock.WorkdirLock`): two at
    once would both read a ledger without the other's release."""
    check_public(config)
    ledger.check_workdir(workdir, another=another_release(config))  # before the data is read
    studied = study_enabled(config)
    train, test = load(config)
    dpcda.check_class_sizes(class_sizes=train.class_sizes(), min_class_size=config.min_class_size)
    for order in (config.release.order, *(config.sweep.orders if studied else ())):
        mixing_setup(config, train, order=order)
    if studied and test is None:
        raise ValueError("the utility study needs held-out data: set data.test_path, or leave "
                         "the study off (sweep.enabled='no').")
    os.makedirs(workdir, exist_ok=True)
    lock = WorkdirLock(workdir)
    try:
        record, journal = release_once(config, train, test, workdir)
        rows = utility_sweep(config, train, test) if studied else []
        write_outputs(config, workdir, train, test, record, rows, journal)
    finally:
        lock.release()
    return Outcome(release=record, sweep=rows, ledger=journal)
