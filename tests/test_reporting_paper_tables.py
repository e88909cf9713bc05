"""reporting.paper_tables: the papers' numbers as quoted, the sweep grid per table, and the path of
docs/guides/reproduce.md end to end at a tiny size (generated videos -> person masks ->
anonymisation with background and person outputs -> clip store -> a paper sweep -> our table
beside the paper's)."""

from __future__ import annotations

import math
import os
import re

import pytest

from maskdp_jax import paper_tables as tables_command
from maskdp_jax import sweep
from maskdp_jax.configs import sweep_paper
from maskdp_jax.reporting import paper_tables

SEEDS = "/work/shared/seeds"


def _numbers(quote: str) -> list[str]:
    """The numbers of a seed line; the PDF extraction writes some four times ("1.91.91.91.9")."""
    out = []
    for token in quote.split():
        m = re.fullmatch(r"((\d+\.\d+?|\d+))\1\1\1", token)
        if m:
            out.append(m.group(1))
        elif re.fullmatch(r"\d+(\.\d+)?", token):
            out.append(token)
    return out


@pytest.mark.parametrize("key", sorted(paper_tables.TABLES))
def test_values_are_the_numbers_of_the_quoted_lines(key):
    table = paper_tables.TABLES[key]
    for row in table.rows:
        assert len(row.values) == len(table.epsilons) and math.isinf(table.epsilons[-1])
        printed = [v for v in row.values if v is not None]
        assert [float(x) for x in _numbers(row.quote)] == printed, row.label


def test_quotes_are_verbatim_lines_of_the_seed_text():
    if not os.path.isdir(SEEDS):
        pytest.skip(f"the seed texts ({SEEDS}) are not on this machine")
    text = open(next(os.path.join(SEEDS, f) for f in sorted(os.listdir(SEEDS))
                     if f.startswith("000_")), encoding="utf-8").read()
    lines = set(text.splitlines())
    for table in paper_tables.TABLES.values():
        for row in table.rows:
            assert row.quote in lines, (table.key, row.label)


def test_sweep_grid_is_the_tables_and_the_estimate_counts_its_runs(capsys):
    for key, table in paper_tables.TABLES.items():
        config = sweep_paper.get_config(key)
        runs = dict(sweep.grid(config))
        eps = {c.privacy.target_epsilon for c in runs.values() if c.mode != "nonprivate"}
        assert eps == set(table.finite_epsilons)
        # one data variant's sweep: a non-private run and every ε for dp and maskdp
        assert len(runs) == 1 + 2 * len(table.finite_epsilons)
    ntu = paper_tables.TABLES["ntu60"]
    assert paper_tables.runs_needed(ntu) == {"dp": 12, "maskdp": 12, "nonprivate": 2}
    steps = 150 * math.ceil(40320 / 128)
    expected = steps * (12 * 0.8054 + 12 * 1.5692 + 2 * 0.7947) / 3600
    assert paper_tables.gpu_hours(ntu) == pytest.approx(expected)
    assert tables_command.cli(["prog", "--table=ntu60"]) == 0
    out = capsys.readouterr().out
    assert "| Anonymized MaskDP | — / 4.2 | — / 16.18 |" in out and f"{steps:,} steps" in out
    with pytest.raises(ValueError, match="unknown paper table"):
        sweep_paper.get_config("kinetics")


@pytest.mark.slow
@pytest.mark.heavy  # the paper-table path from raw videos (30 s): in .ci/run only
def test_raw_videos_to_our_table_beside_the_papers(tmp_path, capsys):
    """docs/guides/reproduce.md at a tiny size: generated UCF-101-layout videos with person masks
    -> python -m maskdp_jax.anonymize's pipeline (masks from files; background and person outputs)
    -> clip store -> the UCF-101 paper sweep (shrunk: test preset, one ε, 2 steps) on the anonymised
    videos -> the table generator prints our cells beside the paper's."""
    from maskdp_jax import prepare
    from maskdp_jax.anonymize import pipeline, segment
    from maskdp_jax.data import testing

    raw = testing.make_ucf101_folder(str(tmp_path / "raw"), train_per_class=4, num_frames=16,
                                     height=32, width=40)
    out = {d: str(tmp_path / d) for d in ("anon", "public", "background", "person")}
    summary = pipeline.anonymize_folder(
        raw["video_dir"], out["anon"], out["public"],
        pipeline.Stages(segmenter=segment.MaskFiles(raw["mask_dir"])),
        pipeline.Options(), background_dir=out["background"],
        person_dir=out["person"], progress=False)
    assert len(summary["videos"]) == 10
    for key in summary["videos"]:
        stem = os.path.splitext(key)[0]
        assert summary["videos"][key]["outputs"]["background"] == stem + ".mkv"
        assert os.path.isfile(os.path.join(out["background"], stem + ".mkv"))
        assert os.path.isfile(os.path.join(out["person"], stem + ".npz"))

    config = sweep_paper.get_config("ucf101")
    b = config.base
    b.input.data_dir, b.input.split_dir = out["anon"], raw["split_dir"]
    b.input.mask_dir, b.input.store_dir = out["public"], str(tmp_path / "store")
    b.input.clip_frames, b.input.stride, b.input.resize_size, b.input.crop_size = 8, 2, 32, 32
    b.input.num_workers, b.input.eval_clips = 1, 1
    b.model.name, b.model.finetune = "mvit_test", "full"  # no K400 weights for the test preset
    b.batch_size = b.physical_batch_size = 4
    b.num_epochs, b.privacy.delta, b.compilation_cache_dir = 0.5, 1e-2, ""
    b.optimizer.warmup_epochs = 0.0
    prepare.prepare_stores(b, workers=1)
    config.sweep.epsilons, config.sweep.modes = (1.0,), ("nonprivate", "maskdp")
    workdir = str(tmp_path / "runs")
    sweep.check_runs(sweep.grid(config))
    sweep.run_all(sweep.grid(config), workdir, num_workers=1)
    capsys.readouterr()
    assert tables_command.cli(["prog", "--table=ucf101", f"--anonymized={workdir}"]) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if line.startswith("| Anonymized MaskDP |"))
    cells = [c.strip() for c in row.strip("| \n").split("|")][1:]
    assert cells[0] == "— / 5" and cells[2] == "— / 36.6"  # ε = 0.5, 2: not run
    assert re.fullmatch(r"\d+\.\d / 15\.4", cells[1])  # ε = 1: ours beside the paper's
    assert re.fullmatch(r"\d+\.\d / 85\.9", cells[-1])  # ∞: our non-private run
    assert "| Real World DP | — / 1.2 |" in table  # no --real runs given
    assert tables_command.cli(["prog", "--table=ucf101", f"--real={tmp_path / 'none'}"]) == 2
