"""The launcher's live view, drawn by rich's ``Live`` on a fixed-width terminal console exactly
as ``python -m lightning_hpo.launch`` sets it up, then read back line by line; the ``lines``
mode's output; and the closing summary read from a study with paused trials."""

from __future__ import annotations

import io
import re
import time

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState
from rich.cells import cell_len
from rich.console import Console

from lightning_hpo.launch.config import load_config
from lightning_hpo.launch.config.devices import plan_slots
from lightning_hpo.launch.processes.supervisor import Supervisor, TrialRow
from lightning_hpo.launch.status import Display, summary
from lightning_hpo.schema import ATTR

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


# ------------------------------------------------------------------------------------------
# Paused trials (pausing schedules, crash resume).


def _pause(sup: Supervisor, number: int) -> TrialRow:
    """Trial ``number`` paused at epoch 4 on slot 1, as the supervisor marks it on a worker's
    ``pause`` event: state PAUSED and ``ended`` (its segment's end), which the display must not
    take for the end of the trial."""
    now = time.time()
    row = TrialRow(number, 1, "cpu:1", state="PAUSED", epochs=4, last=0.15,
                   params={"lr": 0.3}, started=now - 10)
    row.ended = now - 6
    sup.rows[number] = row
    return row


def test_live_view_shows_a_paused_trial_as_paused_and_not_finished() -> None:
    sup = _supervisor(20)
    _pause(sup, 3)
    lines = _last_frame(120, sup)
    view = "\n".join(lines)
    words = _words(lines)
    assert "1 paused" in words and "2/20 trials (this run)" in words, view  # not finished
    order = [int(m.group(1)) for line in lines if (m := re.match(r"│ +(\d+) │", line))]
    assert order == [2, 3, 1, 0], view  # running, then paused, then the latest finished first
    (paused,) = [line for line in lines if re.match(r"│ +3 │", line)]
    assert "│ PAUSED" in paused and "4/9" in paused and "0.1500" in paused, paused
    assert " 4.0 s " in paused  # its segment, not the time since it paused


def test_lines_mode_prints_each_pause_and_the_end() -> None:
    sup = _supervisor(20)
    console = Console(file=io.StringIO(), width=200, highlight=False, markup=False)
    display = Display(sup.cfg, "lines", console)
    display.update(sup)
    display.update(sup)  # nothing new: nothing printed twice
    _pause(sup, 3)
    display.update(sup)
    display.update(sup)
    now = time.time()  # resumed on slot 0 (a new row), then it completes
    sup.rows[3] = TrialRow(3, 0, "cpu:0", epochs=4, params={"lr": 0.3}, started=now - 3)
    display.update(sup)
    row = sup.rows[3]
    row.state, row.epochs, row.ended = "PAUSED", 8, now - 1  # paused again at the next rung
    display.update(sup)
    sup.rows[3] = TrialRow(3, 0, "cpu:0", epochs=8, params={"lr": 0.3}, started=now - 1)
    display.update(sup)
    row = sup.rows[3]
    row.state, row.epochs, row.value, row.ended = "COMPLETE", 9, 0.02, now
    display.update(sup)
    printed = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert [line.split()[1:3] for line in printed] == [
        ["0", "COMPLETE"], ["1", "PRUNED"], ["3", "PAUSED"], ["3", "PAUSED"], ["3", "COMPLETE"]]
    assert "epochs   4  validation_error 0.1500" in printed[2]  # its last value, at the pause
    assert "[slot 1 cpu:1, 4.0 s]" in printed[2]


def test_a_paused_trial_the_schedule_ends_prints_pruned_with_its_last_value() -> None:
    """A trial paused at a rung that is not promoted ends PRUNED while its row shows PAUSED:
    the row takes the trial's state and reason, and shows its last value (as a trial the
    pruner stopped does), not '-'."""
    sup = _supervisor(20)
    sup.study.add_trial(optuna.trial.create_trial(
        state=TrialState.PRUNED, params={"lr": 0.1},
        distributions={"lr": FloatDistribution(0.01, 1.0, log=True)},
        user_attrs={ATTR.STOP_REASON: "not promoted at rung 3"}, intermediate_values={3: 0.15}))
    now = time.time()
    sup.rows = {0: TrialRow(0, 1, "cpu:1", state="PAUSED", epochs=3, last=0.15,
                            params={"lr": 0.1}, started=now - 4, ended=now)}
    sup._refresh_paused_rows()
    console = Console(file=io.StringIO(), width=200, highlight=False, markup=False)
    Display(sup.cfg, "lines", console).update(sup)
    (line,) = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert "PRUNED   epochs   3  validation_error 0.1500" in line, line
    assert "(not promoted at rung 3)" in line, line


def _study_with_pauses(best: str) -> optuna.Study:
    """A study as the scheduler leaves it: COMPLETE, not promoted (PRUNED with its pause left
    behind and a stop reason), paused, running, waiting; ``best`` reported the best value."""
    study = optuna.create_study(direction="minimize")
    lr = {"lr": FloatDistribution(0.01, 1.0, log=True)}
    paused = {"epoch": 4, "checkpoint": "/c.ckpt", "since": 1.0, "target": None, "why": "rung 4"}
    trials = {
        "complete": (TrialState.COMPLETE, {}),
        "not-promoted": (TrialState.PRUNED, {ATTR.PAUSED: dict(paused, epoch=2),
                                             ATTR.STOP_REASON: "not promoted from rung 2"}),
        "paused": (TrialState.RUNNING, {ATTR.PAUSED: paused}),
        "running": (TrialState.RUNNING, {ATTR.PAUSED: None, ATTR.TARGET: 8}),
        "budget": (TrialState.PRUNED, {ATTR.STOP_REASON: "wall-clock budget reached"}),
    }
    for name, (state, attrs) in trials.items():
        value = 0.01 if name == best else 0.5
        study.add_trial(optuna.trial.create_trial(
            state=state, value=0.3 if state == TrialState.COMPLETE else None,
            params={"lr": 0.1}, distributions=lr, user_attrs=attrs,
            intermediate_values={1: 0.6, 2: value}))
    study.enqueue_trial({"lr": 0.2})
    return study


@pytest.mark.parametrize(("best", "whose"), [
    pytest.param("paused", "trial 2 at epoch 2, PAUSED trial", id="paused-best"),
    pytest.param("not-promoted", "trial 1 at epoch 2, PRUNED trial", id="not-promoted-best"),
    pytest.param("budget", "trial 4 at epoch 2, stopped by the study's budget", id="budget-best"),
])
def test_summary_counts_paused_trials_apart_from_running(best: str, whose: str) -> None:
    cfg = load_config("configs/quickstart.yaml", ["stop.n_trials=5"])
    lines = summary(cfg, _study_with_pauses(best), None, "all trials done")
    assert "Trials in the study: 1 complete, 2 pruned, 1 running, 1 paused, 1 waiting." in lines
    assert any(line.startswith("Paused: 1 trial(s) wait with a checkpoint") and
               "running the launcher on this study again resumes them" in line
               for line in lines), lines
    (seen,) = [line for line in lines if line.startswith("Best validation_error seen at any")]
    assert f"0.0100 ({whose})" in seen, seen


@pytest.mark.parametrize(("logger", "storage", "tensorboard", "dashboard"), [
    ("tensorboard", "runs/q.journal", True, "Dashboard: optuna-dashboard runs/q.journal"),
    ("csv", "sqlite:///q.db", False, "Dashboard: optuna-dashboard sqlite:///q.db"),
    ("csv", "grpc://proxy:13000", False, "Dashboard: optuna-dashboard DATABASE_URL (the proxy's"),
])
def test_summary_names_the_commands_that_open_the_study(
    logger: str, storage: str, tensorboard: bool, dashboard: str
) -> None:
    """The TensorBoard command when trials log there; optuna-dashboard's, which needs the
    database behind a gRPC proxy (it does not speak gRPC)."""
    cfg = load_config("configs/quickstart.yaml", [f"trainer.logger={logger}", f"storage={storage}"])
    lines = summary(cfg, _study_with_pauses("paused"), None, "all trials done")
    assert (f"TensorBoard: tensorboard --logdir {cfg.study_dir}" in lines) is tensorboard
    assert any(line.startswith(dashboard) for line in lines), lines


@pytest.mark.parametrize("direction", ["minimize", "maximize"])
def test_summary_and_report_name_the_same_best_trial_in_a_tie(direction: str) -> None:
    """Two trials reach the same best value: trial 0 at its epoch 2 (unix s 20), trial 1 at its
    epoch 1, earlier (unix s 10). The report ranks the first to report it first (trial 1); the
    summary names the same trial, not the lower number."""
    from lightning_hpo.report import summarize

    study = optuna.create_study(direction=direction)
    best, other = (0.1, 0.9) if direction == "minimize" else (0.9, 0.1)
    for values, times in [({1: other, 2: best}, [10.0, 20.0]), ({1: best}, [10.0])]:
        study.add_trial(optuna.trial.create_trial(
            state=TrialState.PRUNED, params={"lr": 0.1},
            distributions={"lr": FloatDistribution(0.01, 1.0, log=True)},
            user_attrs={ATTR.START: 0.0, ATTR.END: times[-1] + 1, ATTR.EPOCH_END_TIMES: times},
            intermediate_values=values))
    cfg = load_config("configs/quickstart.yaml", [f"direction={direction}"])
    (seen,) = [line for line in summary(cfg, study, None, "all trials done")
               if line.startswith("Best validation_error seen at any")]
    assert summarize(study)["best_trial"] == 1
    assert "(trial 1 at epoch 1, PRUNED trial)" in seen, seen


def test_a_trial_that_fails_before_its_fit_starts_prints_its_values() -> None:
    """A trial whose model refuses its values in ``__init__`` ends before ``fit_start`` (which
    brought the values): its FAIL line showed none, only the error. Its ``end`` brings them."""
    from types import SimpleNamespace

    sup = _supervisor(20)
    worker = SimpleNamespace(slot=plan_slots(2)[1], trial=None, deaths_in_a_row=0)
    now = time.time()
    sup._handle(worker, {"e": "start", "t": now - 1, "trial": 3, "from_epoch": 0})  # type: ignore[arg-type]
    sup._handle(worker, {"e": "end", "t": now, "trial": 3, "state": "FAIL", "value": None,  # type: ignore[arg-type]
                         "reason": "ValueError: hidden 15 is odd", "params": {"lr": 0.3}})
    console = Console(file=io.StringIO(), width=200, highlight=False, markup=False)
    Display(sup.cfg, "lines", console).update(sup)
    printed = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    (line,) = [line for line in printed if line.split()[1:3] == ["3", "FAIL"]]
    assert "lr=0.3  [slot 1 cpu:1" in line and line.endswith("(ValueError: hidden 15 is odd)")
