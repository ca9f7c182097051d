"""The report's :mod:`~lightning_hpo.report.comparison`: time and epochs to reach the other
study's best, and a comparison needs two studies everywhere."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from helpers.report_support import _png_shape, make_launcher_study

from lightning_hpo.errors import ConfigError
from lightning_hpo.report import (
    Comparison,
    compare,
    incumbent_frame,
    plot_compare,
    study_info,
    write_compare,
)
from lightning_hpo.report.__main__ import main


def test_compare_time_and_epochs_to_reach_the_other_best(tmp_path: Path) -> None:
    spec = str(tmp_path / "both.journal")
    fast = make_launcher_study(spec, "fast", running=False, waiting=0, epoch_s=0.5)
    slow = make_launcher_study(spec, "slow", running=False, waiting=0, epoch_s=1.0)
    pairs = compare([fast, slow])
    assert list(zip(pairs["study"], pairs["target"], strict=True)) == [("fast", "slow"),
                                                                        ("slow", "fast")]
    assert pairs["reached"].all()  # the same values, half the time per epoch
    row = pairs.set_index("study").loc["fast"]
    assert row["time_s"] < row["target_time_s"] and row["time_speedup"] > 1.5
    # the target is the best value reported anywhere: trial 3's last epoch in both studies
    inc = incumbent_frame(fast)
    first = inc[inc["best"] <= row["target_best"]].iloc[0]
    assert row["target_best"] == pytest.approx(0.04) and first["trial"] == 3
    assert row["time_s"] == pytest.approx(first["elapsed_s"])
    assert row["epochs"] == row["target_epochs"] == first["epochs_spent"]
    comparison = Comparison.of([fast, slow])  # read once: the table, the files, the plot
    pd.testing.assert_frame_equal(comparison.pairs, pairs)
    assert list(comparison.snapshots) == ["fast", "slow"]
    assert list(Comparison.of([fast, fast]).snapshots) == ["fast", "fast (2)"]
    paths = write_compare(comparison, tmp_path / "cmp")
    assert len(pd.read_csv(paths["compare.csv"])) == 2
    long = pd.read_csv(paths["incumbents.csv"])
    assert sorted(set(long["study"])) == ["fast", "slow"]
    fig = plot_compare(long, study_info(fast))
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert sorted(a.get_gid() for a in ax.lines if a.get_gid().startswith("study-")) == [
            "study-fast", "study-slow"]
    height, width, _ = _png_shape(paths["compare.png"])
    assert width >= 1000 and height >= 400


def test_a_comparison_needs_two_studies_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(tmp_path / "one.journal")
    only = make_launcher_study(spec, "only", running=False)
    for call in (compare, Comparison.of, lambda s: write_compare(s, tmp_path / "cmp")):
        with pytest.raises(ConfigError, match="needs at least 2 studies, got 1") as caught:
            call([only])
        assert caught.value.field == "compare"
    with pytest.raises(ConfigError, match="got 0"):
        compare({})
    assert main(["--storage", spec, "--compare", "only"]) == 2
    assert capsys.readouterr().err == "error: compare: needs at least 2 studies, got 1\n"
    assert not (tmp_path / "cmp").exists()
