"""The launcher's live view, drawn by rich's ``Live`` on a fixed-width terminal console exactly
as ``python -m lightning_hpo.launch`` sets it up, then read back line by line."""

from __future__ import annotations

import io
import re
import time

import optuna
import pytest
from rich.cells import cell_len
from rich.console import Console

from lightning_hpo.config import load_config
from lightning_hpo.launch.devices import plan_slots
from lightning_hpo.launch.status import Display
from lightning_hpo.launch.supervisor import Supervisor, TrialRow

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ERASE_LINE = "\x1b[2K"  # Live erases the previous frame line by line before each redraw
_BAR = set("━╸╺- ")


def _supervisor(n_trials: int | None) -> Supervisor:
    overrides = [f"stop.n_trials={n_trials}" if n_trials else "stop.n_trials=null",
                 "stop.max_wallclock_time=600"]
    cfg = load_config("configs/quickstart.yaml", overrides)
    sup = Supervisor(cfg, optuna.create_study(), plan_slots(2), "cpu", n_cores=2)
    now = time.time()
    params = {"lr": 0.1, "batch_size": 128, "momentum": 0.0, "activation": "relu"}
    sup.rows[0] = TrialRow(0, 0, "cpu:0", state="COMPLETE", epochs=9, value=0.0312,
                           params=params, started=now - 20, ended=now - 5)
    sup.rows[1] = TrialRow(1, 0, "cpu:0", state="PRUNED", epochs=1, value=0.41,
                           params=dict(params, lr=0.9), started=now - 5, ended=now - 4)
    sup.rows[2] = TrialRow(2, 1, "cpu:1", epochs=2, last=0.2,
                           params=dict(params, lr=0.5, activation="sigmoid"), started=now - 3)
    return sup


def _last_frame(width: int, sup: Supervisor) -> list[str]:
    """The view as the terminal shows it last: the text after Live's last erase, no styles."""
    console = Console(file=io.StringIO(), width=width, height=200, force_terminal=True,
                      color_system="truecolor", highlight=False, markup=False, soft_wrap=True)
    display = Display(sup.cfg, "live", console)
    with display:
        display.update(sup)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    frame = out[out.rindex(_ERASE_LINE) + len(_ERASE_LINE):] if _ERASE_LINE in out else out
    return [line.rstrip() for line in _ANSI.sub("", frame).split("\n") if line.strip()]


def _words(lines: list[str]) -> str:
    """Lines joined as the words a reader sees, whatever the wrapping."""
    return " ".join(" ".join(lines).split())


@pytest.mark.parametrize("n_trials", [pytest.param(20, id="n-trials"),
                                      pytest.param(None, id="wall-clock")])
@pytest.mark.parametrize("width", [pytest.param(w, id=f"{w}-columns") for w in (40, 60, 120, 160)])
def test_live_view_puts_each_part_on_its_own_line(width: int, n_trials: int | None) -> None:
    sup = _supervisor(n_trials)
    lines = _last_frame(width, sup)
    view = "\n".join(lines)
    assert all(cell_len(line) <= width for line in lines), view
    border = next((i for i, line in enumerate(lines) if line.startswith("┏")), None)
    bar = next((i for i, line in enumerate(lines) if line[:1] in "━╸╺"), None)
    assert border is not None, f"no line starts with the table's top border:\n{view}"
    assert bar is not None, f"no line starts with the progress bar:\n{view}"
    # header first, then the bar with its goal beside it, then the table from its top border
    assert lines[0].startswith("quickstart")
    header = _words(lines[:bar])
    assert "best validation_error 0.0312 (trial 0)" in header and "2 slots" in header
    bar_line = lines[bar]
    assert bar < border and lines[border].endswith("┓")
    assert "┏" not in bar_line and "┃" not in bar_line
    goal = "2/20 trials (this run)" if n_trials else "of 0:10:00"
    cells = bar_line.split("  ")[0]
    assert set(cells) <= _BAR and len(cells) >= 10, bar_line
    assert goal in _words(lines[bar:border])
    assert lines[border + 1].startswith("┃") and "━" in lines[border + 2]  # the header row
    assert lines[-1].startswith("└") and lines[-1].endswith("┘")
    for number in sup.rows:  # every trial has its row, its number in the first column
        assert any(re.match(rf"│ +{number} │", line) for line in lines), view
