"""What a person sees: a live table while the study runs, and a summary at the end.

Three modes: ``live`` (a terminal: the table redraws in place with a progress bar), ``lines``
(output is a file or a pipe: one line per finished or paused trial), ``quiet`` (scripts: the
summary only).

Under the pausing schedules (``sync_sh``, ``sync_hyperband``, ``mode: promotion``) and crash
resume a trial may pause between two training segments: the supervisor's row then says
``PAUSED`` (and is not finished: it trains again later, maybe on another slot), and in the study
it stays RUNNING with :data:`ATTR.PAUSED <lightning_hpo.schema.ATTR>` set, which the closing
summary counts apart from the trials still running.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import optuna
from optuna.trial import FrozenTrial, TrialState
from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from lightning_hpo.launch.config import Config
from lightning_hpo.launch.processes.supervisor import Supervisor, TrialRow
from lightning_hpo.pareto import nondominated_fronts, pareto_order
from lightning_hpo.report.snapshot import StudySnapshot, TrialRecord
from lightning_hpo.schema import ATTR, is_paused
from lightning_hpo.storage import StorageSpec, mask

__all__ = ["Display", "summary"]

_STYLE = {"RUNNING": "cyan", "PAUSED": "magenta", "COMPLETE": "green", "PRUNED": "yellow",
          "FAIL": "red"}
#: Trial states in the order the summary counts them (PAUSED: RUNNING in Optuna, waiting).
_ORDER = ("COMPLETE", "PRUNED", "FAIL", "RUNNING", "PAUSED", "WAITING")
_ROWS = 14  # rows of the live table: running trials first, then paused, then finished
_BAR_WIDTH = 40  # characters of the live view's progress bar


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:.4f}"


def _fmt_any(value: float) -> str:
    """A value of any size: whole numbers (a parameter count) without decimals."""
    if math.isfinite(value) and value == int(value) and abs(value) >= 1:
        return f"{value:.0f}"
    return _fmt(value)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _params(params: dict[str, Any]) -> str:
    """``lr=0.0325 batch_size=171``: floats to 3 significant digits, as every line prints them.

    Example::

        >>> _params({"lr": 0.0325003874457434, "batch_size": 171, "activation": "relu"})
        'lr=0.0325 batch_size=171 activation=relu'
    """
    return " ".join(
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()
    )


def _paused(row: TrialRow) -> bool:
    """Whether a row's trial waits between two segments (it trains again later)."""
    return row.state == "PAUSED"


def _finished(row: TrialRow) -> bool:
    """Whether a row's trial ended for good (a paused one did not, whatever its ``ended``)."""
    return row.ended is not None and not _paused(row)


def _took(row: TrialRow) -> float:
    """Seconds of the row's segment: to its end, its pause, or now."""
    return (row.ended or time.time()) - row.started  # a paused row's ended: its pause


def _best(rows: dict[int, TrialRow], direction: str) -> TrialRow | None:
    done = [r for r in rows.values() if r.state == "COMPLETE" and r.value is not None
            and math.isfinite(r.value)]
    if not done:
        return None
    pick = min if direction == "minimize" else max
    return pick(done, key=lambda r: r.value)  # type: ignore[arg-type, return-value]


class Display:
    """Shows a :class:`Supervisor`'s progress; pass :meth:`update` as its ``on_change``."""

    def __init__(self, cfg: Config, mode: Literal["live", "lines", "quiet"], console: Console):
        self.cfg = cfg
        self.mode = mode
        self.console = console
        self._live: Live | None = None
        self._printed: dict[int, tuple[str, float | None]] = {}  # trial -> what was printed
        self._last_draw = 0.0

    def __enter__(self) -> Display:
        if self.mode == "live":
            self._live = Live(console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def update(self, sup: Supervisor) -> None:
        """Show the supervisor's rows: redraw the live view, or in ``lines`` mode print each
        trial once when it ends and once each time it pauses."""
        if self.mode == "lines":
            for row in sorted(sup.rows.values(), key=lambda r: r.number):
                if not (_finished(row) or _paused(row)):  # training: its next pause is news
                    self._printed.pop(row.number, None)
                    continue
                seen = (row.state, row.ended)
                if self._printed.get(row.number) != seen:
                    self._printed[row.number] = seen
                    self.console.print(self._line(row), highlight=False, markup=False)
        elif self._live is not None and time.time() - self._last_draw > 0.25:
            self._last_draw = time.time()
            self._live.update(self.render(sup))

    def _line(self, row: TrialRow) -> str:
        value = row.last if _paused(row) else row.value
        shown = f"{self.cfg.metric} {_fmt(value)}"
        if self.cfg.several and row.last_values is not None and row.state != "FAIL":
            shown = ", ".join(f"{metric} {'-' if v is None else _fmt_any(v)}" for (metric, _), v
                              in zip(self.cfg.objectives, row.last_values, strict=True))
        what = f"{row.state:<8} epochs {row.epochs:>3}  {shown}"
        extra = f"  ({row.reason})" if row.reason else ""
        return (f"trial {row.number:>4}  {what}  {_params(row.params)}  "
                f"[slot {row.slot} {row.device}, {_took(row):.1f} s]{extra}")

    def render(self, sup: Supervisor) -> Group:
        """The live view, each part starting on a line of its own at any console width.

        A header (study, best value, elapsed time, slots, paused trials), the progress bar
        with the goal beside it, and the table of trials: running first, then paused (PAUSED:
        waiting to train on), then the latest finished. Rich's ``ProgressBar`` ends no line,
        so it sits in a one-row grid, which does; the header wraps rather than being cut off
        where the console is narrow (the launcher's console soft-wraps, which Live would crop).

        Example::

            >>> display = Display(cfg, "live", Console(width=60))  # doctest: +SKIP
            >>> display.console.print(display.render(supervisor))  # doctest: +SKIP
        """
        rows = sup.rows
        finished = sum(_finished(r) for r in rows.values())
        paused = sorted((r for r in rows.values() if _paused(r)),
                        key=lambda r: r.ended or 0.0, reverse=True)
        best = _best(rows, self.cfg.direction)
        stop = self.cfg.stop
        if stop.n_trials is not None:
            bar = ProgressBar(total=stop.n_trials, completed=finished, width=_BAR_WIDTH)
            goal = f"{finished}/{stop.n_trials} trials (this run)"
        else:
            total = stop.max_wallclock_time or 1.0
            bar = ProgressBar(total=total, completed=min(sup.elapsed, total), width=_BAR_WIDTH)
            goal = f"{_clock(sup.elapsed)} of {_clock(total)}"
        if self.cfg.several:
            front = _live_front(rows, self.cfg)
            more = ", ..." if len(front) > 5 else ""
            best_text = (f"Pareto front: {_count(len(front), 'trial')} "
                         f"({', '.join(str(n) for n in front[:5])}{more})"
                         if front else "no completed trial yet")
        else:
            best_text = (f"best {self.cfg.metric} {_fmt(best.value)} (trial {best.number})"
                         if best else "no completed trial yet")
        head = Text.assemble(
            (f"{self.cfg.study}", "bold"), "  ",
            (best_text, "green"),
            f"  {_clock(sup.elapsed)} elapsed  {len(sup.slots)} slots",
            f"  {len(paused)} paused" if paused else "",
            no_wrap=False, overflow="fold",  # wrap even on a soft-wrapping console
        )
        progress = Table.grid(padding=(0, 2))
        progress.add_row(bar, Text(goal, no_wrap=False))
        table = Table(expand=False, header_style="bold")
        for column in ("trial", "state", "epochs", "last", "params", "slot/device", "elapsed"):
            table.add_column(column, justify="right" if column in ("trial", "epochs") else "left")
        running = sorted((r for r in rows.values() if r.ended is None and not _paused(r)),
                         key=lambda r: r.slot)
        ended = sorted((r for r in rows.values() if _finished(r)),
                       key=lambda r: r.ended or 0.0, reverse=True)
        shown = running + paused
        for row in shown[: max(_ROWS, len(running))] + ended[: max(0, _ROWS - len(shown))]:
            table.add_row(
                str(row.number), Text(row.state, style=_STYLE.get(row.state, "")),
                f"{row.epochs}/{self.cfg.max_epochs}",
                _fmt(row.value if _finished(row) else row.last),
                _params(row.params), f"{row.slot} {row.device}", f"{_took(row):.1f} s",
            )
        return Group(head, progress, table)


def _best_seen(snap: StudySnapshot) -> tuple[TrialRecord, float, int | None] | None:
    """The best value any trial reported at any epoch, whatever its state, with the trial and
    the epoch: the report's first ranked trial (:attr:`StudySnapshot.ranked`), so that the
    summary and ``python -m lightning_hpo.report`` name the same trial, ties included."""
    if not snap.ranked:
        return None
    record = snap.ranked[0]
    found = record.best(snap.info)
    return None if found is None else (record, found[0], found[1])


def summary(cfg: Config, study: optuna.Study, sup: Supervisor | None, why: str) -> list[str]:
    """The closing lines: best trial, counts, where things are, and what to run next.

    Besides the best COMPLETE trial, the best value reported at any epoch by any trial is named
    when it is better, saying whether the study's budget stopped that trial (it then ended
    PRUNED with its learning curve, see ``stop_reason``).

    Parameters are printed as the per-trial lines print them, floats to 3 significant digits
    (``with lr=0.0325 batch_size=171``); the full values are the study's (``study.best_params``),
    in the report's ``trials.csv`` (its ``params_*`` columns), in the best checkpoint's
    hyperparameters and, for a LightningCLI project, in ``best_config.yaml``.

    Example::

        for line in summary(cfg, study, None, "all trials done"):
            print(line)
    """
    trials = study.get_trials(deepcopy=False)
    counts = Counter("PAUSED" if is_paused(t) else t.state.name for t in trials)
    count_text = ", ".join(f"{counts[s]} {s.lower()}" for s in _ORDER if counts[s])
    storage, behind_proxy = mask(cfg.storage), StorageSpec(cfg.storage).is_proxy
    lines = [
        f"Study '{cfg.study}' stopped: {why}.",
        f"Trials in the study: {count_text or 'none'}.",
    ]
    if counts["PAUSED"]:
        lines.append(
            f"Paused: {counts['PAUSED']} trial(s) wait with a checkpoint (RUNNING in Optuna, "
            "with a `paused` attribute); running the launcher on this study again resumes them."
        )
    if sup is not None:
        ran = Counter(r.state for r in sup.rows.values())
        states = ", ".join(f"{n} {s.lower()}" for s, n in ran.items())
        lines.append(
            f"This run: {_count(len(sup.rows), 'trial')} on {_count(len(sup.slots), 'slot')} in "
            f"{sup.elapsed:.1f} s{f' ({states})' if states else ''}."
        )
    completed = [t for t in trials if t.state == TrialState.COMPLETE]
    best_value: float | None = None
    if cfg.several:
        lines += _pareto_lines(cfg, completed)
    elif completed:
        best = study.best_trial
        best_value = best.value
        lines.append(
            f"Best {cfg.metric}: {_fmt(best.value)} (trial {best.number}) with "
            f"{_params(best.params)}"
        )
        if best.user_attrs.get(ATTR.CHECKPOINT):
            lines.append(f"Best checkpoint: {best.user_attrs[ATTR.CHECKPOINT]}")
    else:
        lines.append("No trial completed yet.")
    snap = None if cfg.several else StudySnapshot.read(study)
    seen = None if snap is None else _best_seen(snap)
    if snap is not None and seen is not None and (best_value is None or (
            seen[1] != best_value and snap.info.better(seen[1], best_value))):
        record, value, epoch = seen
        whose = ("stopped by the study's budget" if record.stopped_by == "budget"
                 else f"{record.status} trial")
        lines.append(
            f"Best {cfg.metric} seen at any epoch: {_fmt(value)} (trial {record.number} at epoch "
            f"{epoch}, {whose}) with {_params(record.params)}"
        )
        if record.attrs.get(ATTR.CHECKPOINT):
            lines.append(f"Its best checkpoint: {record.attrs[ATTR.CHECKPOINT]}")
    lines += [
        f"Study storage: {storage}",
        f"Per-trial logs and checkpoints: {cfg.study_dir}/trial_NNNNN/ "
        f"(worker logs: {cfg.study_dir / 'workers' if sup is None else sup.log_dir}/)",
        f"Dashboard: optuna-dashboard {storage}" if not behind_proxy else
        "Dashboard: optuna-dashboard DATABASE_URL (the proxy's database; it does not speak gRPC)",
        f"Report:    python -m lightning_hpo.report --storage {storage} --study {cfg.study}",
    ]
    if cfg.logger == "tensorboard" and (cfg.cli is None or _has_tensorboard_runs(cfg.study_dir)):
        lines.append(f"TensorBoard: tensorboard --logdir {cfg.study_dir}")
    return lines


def _live_front(rows: dict[int, TrialRow], cfg: Config) -> list[int]:
    """The Pareto front of this run's COMPLETE trials, by their last values (live view)."""
    minimize = tuple(d == "minimize" for _, d in cfg.objectives)
    points = {r.number: tuple(v if v is not None else math.nan for v in r.last_values)
              for r in rows.values() if r.state == "COMPLETE" and r.last_values is not None}
    fronts = nondominated_fronts(points, minimize)
    return fronts[0] if fronts else []


def _pareto_lines(cfg: Config, completed: list[FrozenTrial]) -> list[str]:
    """A study with several objectives: its Pareto front among the COMPLETE trials (up to
    :data:`_FRONT_SHOWN` of them, best first in :func:`lightning_hpo.pareto.pareto_order`)."""
    if not completed:
        return ["No trial completed yet."]
    names = [metric for metric, _ in cfg.objectives]
    minimize = tuple(d == "minimize" for _, d in cfg.objectives)
    points = {t.number: tuple(t.values) for t in completed if t.values is not None}
    front = nondominated_fronts(points, minimize)
    members = set(front[0]) if front else set()
    order = [n for n in pareto_order(points, minimize) if n in members]
    lines = [f"Pareto front ({', '.join(f'{n} {d}' for n, d in cfg.objectives)}): "
             f"{_count(len(order), 'trial')} of {len(completed)} completed."]
    by_number = {t.number: t for t in completed}
    for number in order[:_FRONT_SHOWN]:
        values = ", ".join(f"{n} {_fmt_any(v)}"
                           for n, v in zip(names, points[number], strict=True))
        lines.append(f"  trial {number}: {values} with {by_number[number].params}")
    if len(order) > _FRONT_SHOWN:
        lines.append(f"  ... and {len(order) - _FRONT_SHOWN} more (python -m lightning_hpo.report "
                     "lists them all)")
    return lines


#: Trials of the Pareto front the closing summary names.
_FRONT_SHOWN = 5


def _has_tensorboard_runs(study_dir: Path) -> bool:
    """Whether a trial wrote a TensorBoard run (a LightningCLI project's own logger replaces
    the launcher's, see :func:`lightning_hpo.launch.checks.project.build_trial`)."""
    return any(True for _ in study_dir.glob("trial_*/**/events.out.tfevents.*"))


def _count(n: int, noun: str) -> str:
    """``1 trial``, ``2 trials``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
