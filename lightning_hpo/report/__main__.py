"""``python -m lightning_hpo.report``: tables, CSV files and plots of a study, or a comparison.

Examples::

    python -m lightning_hpo.report --storage runs/quickstart.journal
    python -m lightning_hpo.report --storage sqlite:///runs/all.db --study lenet-asha --out rep/
    python -m lightning_hpo.report --storage sqlite:///runs/all.db --compare asha random
    python -m lightning_hpo.report --compare asha@runs/asha.journal rs@runs/rs.journal

A study with several objectives gets its trials ranked by Pareto front, the Pareto-optimal
trials and the hypervolume (with its reference point) in place of the best value, and
pareto.png, hypervolume.png and one learning_curves_<metric>.png per objective; --compare
compares such studies by hypervolume, with one reference point shared by all of them.

Ctrl-C prints one line and exits with code 130; the files are written whole or not at all.
Bad input (an unknown flag or a bad value, unreachable storage, unknown or empty study, a study
with one objective compared with one with several) prints one line naming the field, with any
password masked, and exits with code 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from lightning_hpo._cli import OneLineParser
from lightning_hpo.errors import EXIT_BAD_INPUT, ConfigError
from lightning_hpo.storage import mask, mask_text

_STYLE = {"COMPLETE": "green", "PRUNED": "yellow", "FAIL": "red", "RUNNING": "cyan",
          "PAUSED": "magenta"}


def _positive(text: str) -> int:
    """``--top N``: a whole number of rows, at least 1 (the parser prints the refusal, exit 2).

    Example::

        >>> _positive("3")
        3
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of rows, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _config_path(text: str) -> Path:
    """``--best-config PATH``: the file to write; in a folder (one that exists, or ``PATH``
    ending in ``/``) its ``best_config.yaml``.

    Example::

        >>> str(_config_path("configs/")), str(_config_path("best.yaml"))
        ('configs/best_config.yaml', 'best.yaml')
    """
    path = Path(text)
    folder = text.endswith(("/", os.sep)) or path.is_dir()
    return path / "best_config.yaml" if folder else path


def _parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m lightning_hpo.report",
        description="Report on an Optuna study, ours or any other: a table of the best trials,\n"
        "counts by state, the best value reported at any epoch of any trial and the best\n"
        "COMPLETE trial, the compute spent (epochs, device-seconds), the paused trials,\n"
        "trials.csv, curves.csv, incumbent.csv, rungs.csv, segments.csv (trials trained in\n"
        "segments), and four plots: incumbent trajectory, learning curves, rungs (one panel\n"
        "per bracket), worker timeline (one bar per segment). With --compare, overlay several\n"
        "studies' incumbent trajectories and show the time and epochs each took to reach the\n"
        "others' best.\n\n"
        "A study with several objectives (Optuna's directions=[...]): trials ranked by Pareto\n"
        "front, the Pareto-optimal trials and the hypervolume with its reference point,\n"
        "hypervolume.csv, and the plots pareto.png (front of the first two objectives),\n"
        "hypervolume.png (over wall-clock) and learning_curves_<metric>.png per objective.\n"
        "With --compare, such studies are compared by hypervolume over wall-clock and epochs,\n"
        "with one reference point computed from every study compared.",
        epilog="examples:\n"
        "  python -m lightning_hpo.report --storage runs/quickstart.journal\n"
        "  python -m lightning_hpo.report --storage sqlite:///runs/all.db --study lenet-asha "
        "--out reports/asha\n"
        "  python -m lightning_hpo.report --storage sqlite:///runs/all.db --compare asha random\n"
        "  python -m lightning_hpo.report --compare asha@runs/asha.journal "
        "rs@runs/rs.journal",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--storage", metavar="URL",
                        help="SQLAlchemy URL (sqlite:///runs/x.db, postgresql://...) or journal "
                        "file path (runs/x.journal)")
    parser.add_argument("--study", metavar="NAME",
                        help="study name (optional when the storage holds one study)")
    parser.add_argument("--out", metavar="DIR", type=Path,
                        help="output folder (default: reports/<study>, or "
                        "reports/compare_<a>_vs_<b>)")
    parser.add_argument("--top", metavar="N", type=_positive, default=10,
                        help="rows of the best-trials table (default: 10)")
    parser.add_argument("--compare", metavar="STUDY", nargs="+",
                        help="compare studies: NAME (in --storage) or NAME@STORAGE")
    parser.add_argument("--best-config", metavar="PATH", type=_config_path,
                        help="also write the best COMPLETE trial's config.yaml there (a study "
                        "of a LightningCLI project; a folder, or PATH ending in /, gets "
                        "best_config.yaml in it): python main.py fit --config PATH "
                        "retrains it")
    parser.add_argument("--trial", metavar="N", type=int,
                        help="with --best-config: trial N's config.yaml instead (a study of "
                        "several objectives: one of its Pareto-optimal trials)")
    return parser


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _times(ratio: float | None) -> str:
    """``1.13x``; ``-`` where there is no ratio (a study that reached its target having spent
    no epoch: one that reports none)."""
    shown = _fmt(ratio, 3)
    return shown if shown == "-" else f"{shown}x"


def _duration(seconds: float | None) -> str:
    if seconds is None or seconds != seconds:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds // 60 % 60):02d}m"


def _params(row: Any, columns: list[str]) -> str:
    parts = []
    for column in columns:
        value = row[column]
        if value is None or (isinstance(value, float) and value != value):
            continue
        shown = f"{value:.3g}" if isinstance(value, float) else str(value)
        parts.append(f"{column.removeprefix('params_')}={shown}")
    return " ".join(parts)


def _best_lines(summary: dict[str, Any], info: Any) -> list[str]:
    """The headline best (any trial, any epoch or step) and the best COMPLETE trial, in words."""
    metric, unit = info.metric, info.resource
    if summary["best_trial"] is None:
        return ["Best: no value reported yet"]
    params = " ".join(f"{k}={_fmt(v, 3)}" for k, v in summary["best_params"].items())
    state = summary["best_state"]
    if state == "PRUNED" and summary["best_stopped_by"] == "budget":
        how = f"stopped by the study's budget: {summary['best_stop_reason']}"
    elif state == "PRUNED":
        how = "PRUNED by the pruner"
    elif state == "PAUSED":
        how = "PAUSED, to be resumed"
    else:
        how = str(state)
    at = "" if summary["best_step"] is None else f" at {unit} {summary['best_step']}"
    lines = [f"Best {metric} observed: {_fmt(summary['best_value'])}, trial "
             f"{summary['best_trial']}{at} ({how}{'; ' + params if params else ''})"]
    if summary["best_complete_trial"] is None:
        lines.append("Best COMPLETE trial: none yet")
    else:
        done = " ".join(f"{k}={_fmt(v, 3)}" for k, v in summary["best_complete_params"].items())
        epochs = summary["best_complete_epochs"]  # 0: it reported no step (plain Optuna)
        after = f" after {epochs} {unit}s" if epochs else ""
        lines.append(f"Best COMPLETE trial: trial {summary['best_complete_trial']}, {metric} "
                     f"{_fmt(summary['best_complete_value'])}{after}"
                     f"{f' ({done})' if done else ''}")
    return lines


def _trial_list(numbers: list[int], limit: int = 12) -> str:
    """``trials 0, 3, 6`` (the first ``limit``, then ``...``)."""
    shown = ", ".join(map(str, numbers[:limit])) + (", ..." if len(numbers) > limit else "")
    return f"trial{'s' if len(numbers) > 1 else ''} {shown}"


def _reference_words(metrics: tuple[str, ...], reference: tuple[float, ...]) -> str:
    return ", ".join(f"{m}={_fmt(r)}" for m, r in zip(metrics, reference, strict=True))


def _pareto_lines(summary: dict[str, Any], info: Any) -> list[str]:
    """A study with several objectives in words: its Pareto-optimal trials and hypervolume."""
    complete, any_epoch = summary["pareto_complete_trials"], summary["pareto_trials"]
    if summary["reference"] is None:
        return ["Pareto front: no finite values reported yet"]
    done = (f"{len(complete)} COMPLETE trial(s) by their final values ({_trial_list(complete)})"
            if complete else "no COMPLETE trial yet")
    lines = [f"Pareto-optimal: {done}; {len(any_epoch)} trial(s) by the values reported at any "
             f"{info.resource} ({_trial_list(any_epoch)})"]
    lines.append(
        f"Hypervolume: {_fmt(summary['hypervolume'])} (values at any {info.resource}), "
        f"{_fmt(summary['hypervolume_complete'])} (COMPLETE trials' final values); reference "
        f"point {_reference_words(info.metrics, summary['reference'])} (each objective's worst "
        "value plus a tenth of its range)")
    return lines


def _paused_words(trial: Any) -> str:
    """``trial 3 at epoch 4 (rung 4)``: a paused trial, where and why it waits."""
    pause = trial.paused
    at = "" if pause.epoch is None else f" at epoch {pause.epoch}"
    why = "" if pause.why is None else f" ({pause.why})"
    return f"trial {trial.number}{at}{why}"


def _report(args: argparse.Namespace, console: Console) -> None:
    import pandas as pd

    from lightning_hpo.report import (
        RANK_ORDER,
        RANK_ORDER_FRONTS,
        STATUSES,
        StudySnapshot,
        limitations,
        load,
        summarize,
        trials_frame,
        write_report,
    )
    from lightning_hpo.report.files import safe_name

    if args.storage is None:
        raise ConfigError("storage", "is required: --storage URL (or a journal file path)")
    study = load(args.storage, args.study)
    best_config = None
    if args.best_config is not None:  # first: a study without one writes nothing at all
        from lightning_hpo.report.best_config import write_best_config

        best_config = write_best_config(study, args.best_config, args.trial)
    snap = StudySnapshot.read(study)
    out = args.out or Path("reports") / safe_name(snap.info.name)
    paths = write_report(snap, out)
    info, summary, trials = snap.info, summarize(snap), trials_frame(snap)
    pruning = (f", {info.pruner} rungs {', '.join(map(str, info.rungs))} {info.units}"
               if info.rungs else "")
    what = (f"{len(info.metrics)} objectives: {info.objectives}" if info.several
            else f"{info.direction} {info.metric}")
    console.print(f"Study '{info.name}' on {mask(args.storage)}: {what}{pruning}")
    ranked = trials.dropna(subset=["rank"]).sort_values("rank")
    shown = ranked.head(max(args.top, 0))
    order = (RANK_ORDER_FRONTS if info.several else RANK_ORDER).replace("epoch", info.resource)
    table = Table(title=f"Best {len(shown)} of {len(trials)} started trials, {order}",
                  header_style="bold", title_justify="left")
    if info.several:
        values = [f"{metric}\nfinal/last" for metric in info.metrics]
        columns = ("rank", "trial", "state", info.units, "front\nfinal",
                   f"best front\n@ {info.resource}", *values, "duration", "params")
    else:
        columns = ("rank", "trial", "state", info.units, f"best {info.metric}\n@ {info.resource}",
                   "final/last", "duration", "params")
    for column in columns:
        if column == "params":
            table.add_column(column, min_width=24, overflow="fold")
        else:
            numeric = column not in ("state", "params")
            table.add_column(column, justify="right" if numeric else "left", no_wrap=True)
    param_columns = [c for c in trials.columns if c.startswith("params_")]
    for _, row in shown.iterrows():
        status = "PAUSED" if row["paused"] else str(row["state"])
        state = Text(status, style=_STYLE.get(status, ""))
        if row["stopped_by"] == "budget":
            state.append(" (budget)", style="dim")
        if row["paused"] and pd.notna(row["paused_epoch"]):  # the epoch it resumes from
            state.append(f" @ {row['paused_epoch']}", style="dim")
        if info.several:
            best = Text(_fmt(row["best_front"]))
            if pd.notna(row["best_front_step"]):
                best.append(f" @ {row['best_front_step']}", style="dim")
            prefix = "values_" if row["state"] == "COMPLETE" else "last_"
            front = "-" if pd.isna(row["front"]) else str(int(row["front"]))
            cells: list[Any] = [front, best,
                                *(_fmt(row[f"{prefix}{m}"]) for m in info.metrics)]
        else:
            best = Text(_fmt(row["best_value"]))
            if pd.notna(row["best_step"]):
                best.append(f" @ {row['best_step']}", style="dim")
            last = row["value"] if row["state"] == "COMPLETE" else row["last_value"]
            cells = [best, _fmt(last)]
        table.add_row(
            str(int(row["rank"])), str(row["trial"]), state, str(row["epochs"]), *cells,
            status.lower() if status in ("RUNNING", "PAUSED") else _duration(row["duration_s"]),
            _params(row, param_columns),
        )
    console.print(table)
    if (shown["stopped_by"] == "budget").any():
        console.print("PRUNED (budget): stopped when the study's budget was spent, not by the "
                      "pruner (trials.csv: stop_reason)")
    counts = dict(summary["counts"], PAUSED=summary["paused"])
    counts["RUNNING"] = counts.get("RUNNING", 0) - summary["paused"]
    text = ", ".join(f"{counts[s]} {s.lower()}" for s in STATUSES if counts.get(s))
    console.print(f"Trials: {summary['n_trials']} ({text})")
    paused = [t for t in snap.trials if t.paused is not None]
    if paused:
        console.print("Paused (RUNNING in Optuna, resumed from their checkpoint by the next "
                      "run): " + "; ".join(_paused_words(t) for t in paused[:8])
                      + ("; ..." if len(paused) > 8 else ""))
    lines = _pareto_lines(summary, info) if info.several else _best_lines(summary, info)
    for line in lines:
        console.print(line)
    slots = f" on {summary['slots']} slot(s)" if summary["slots"] else ""
    device_s = summary["device_seconds"]
    running = (f" (+ {summary['unfinished']} trial(s) training now: the segment in flight not "
               "counted in device-s)" if summary["unfinished"] else "")
    n = summary["epochs"]
    spent = (f"{n} epoch{'s' * (n != 1)}" if info.resource == "epoch" else
             f"{n} step{'s' * (n != 1)} (up to each trial's last report)")
    hours = f" ({device_s / 3600:.3g} device-h)" if device_s >= 36 else ""  # 0.01 h and up
    console.print(f"Compute: {spent}, {device_s:.1f} device-s{hours}{slots} in "
                  f"{_duration(summary['wall_clock_s'])} wall-clock{running}")
    notes = limitations(snap)
    if notes:
        console.print(f"note: not drawn or estimated: {'; '.join(notes)}")
    console.print(f"Wrote {out}/: {', '.join(paths)}")
    if best_config is not None:
        number, path = best_config
        console.print(f"Wrote {path}: trial {number}'s config (the project's fit --config "
                      f"{shlex.quote(str(path))} retrains it)")


def _compare(args: argparse.Namespace, console: Console) -> None:
    from lightning_hpo.report import Comparison, load_ref, summarize, write_compare
    from lightning_hpo.report.files import safe_name

    if args.study is not None:
        raise ConfigError("study", "cannot be combined with --compare (list the studies there)")
    comparison = Comparison.of([load_ref(ref, args.storage) for ref in args.compare])
    snaps = comparison.snapshots
    metrics = {s.info.metric for s in snaps.values()}
    out = args.out or Path("reports") / safe_name("compare_" + "_vs_".join(snaps))
    paths = write_compare(comparison, out)
    if comparison.several:
        _compare_hypervolumes(comparison, console)
        console.print(f"Wrote {out}/: {', '.join(paths)}")
        return
    pairs = comparison.pairs
    info = comparison.info
    overview = Table(title=f"Studies compared ({info.direction} {info.metric}; best: reported "
                     f"at any {info.resource} of any trial)", header_style="bold",
                     title_justify="left")
    for column in ("study", "trials", "best", "wall-clock", info.units, "device-s"):
        overview.add_column(column, justify="left" if column == "study" else "right")
    for label, snap in snaps.items():
        summary = summarize(snap)
        overview.add_row(label, str(len(snap.trials)), _fmt(summary["best_value"]),
                         _duration(summary["wall_clock_s"]), str(summary["epochs"]),
                         f"{summary['device_seconds']:.1f}")
    console.print(overview)
    console.print(_pairs_table(pairs, "best", "target_best", info.units))
    if len(metrics) > 1:
        console.print(f"note: the studies report different metrics: {', '.join(sorted(metrics))}")
    console.print(f"Wrote {out}/: {', '.join(paths)}")


def _compare_hypervolumes(comparison: Any, console: Console) -> None:
    """The --compare tables of studies with several objectives: each study's hypervolume, and
    the time and compute each took to reach every other's final hypervolume."""
    from lightning_hpo.report import summarize

    info, reference = comparison.info, comparison.reference
    hvs = comparison.hypervolumes
    words = _reference_words(info.metrics, reference)
    overview = Table(title=f"Studies compared ({info.objectives}; hypervolume of every value "
                     f"reported at any {info.resource}, one reference point for all)",
                     header_style="bold", title_justify="left")
    for column in ("study", "trials", "Pareto-optimal\nCOMPLETE", "hypervolume",
                   "wall-clock", info.units, "device-s"):
        overview.add_column(column, justify="left" if column == "study" else "right")
    for label, snap in comparison.snapshots.items():
        summary = summarize(snap)
        final = hvs.loc[hvs["study"] == label, "hypervolume"]
        overview.add_row(label, str(len(snap.trials)),
                         str(len(summary["pareto_complete_trials"])), _fmt(float(final.iloc[-1])),
                         _duration(summary["wall_clock_s"]), str(summary["epochs"]),
                         f"{summary['device_seconds']:.1f}")
    console.print(overview)
    console.print(f"Reference point (shared by every study): {words} (each objective's worst "
                  "value over all of them plus a tenth of its range)")
    console.print(_pairs_table(comparison.pairs, "hypervolume", "target_hypervolume",
                               info.units))


def _pairs_table(pairs: Any, what: str, target_column: str, units: str = "epochs") -> Table:
    """:func:`~lightning_hpo.report.compare`'s pairs: the time and compute (in ``units``) each
    study took to reach another's final ``what`` (its ``target_column``)."""
    table = Table(title=f"Time and compute to reach another study's final {what} (vs what that "
                  "study itself needed)",
                  header_style="bold", title_justify="left")
    for column in ("study", "to reach", "time", "speed-up", units, f"{units} ratio"):
        table.add_column(column, justify="left" if column in ("study", "to reach") else "right",
                         no_wrap=True)
    for _, row in pairs.iterrows():
        target = f"{row['target']}'s {_fmt(row[target_column])}"
        if not row["reached"]:
            table.add_row(row["study"], target, Text("never", style="red"), "-", "-", "-")
            continue
        table.add_row(
            row["study"], target,
            f"{_duration(row['time_s'])} (vs {_duration(row['target_time_s'])})",
            _times(row["time_speedup"]),
            f"{row['epochs']} (vs {row['target_epochs']})", _times(row["epochs_speedup"]),
        )
    return table


def main(argv: list[str] | None = None) -> int:
    """Run the report CLI; returns the process exit code."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    console = Console(highlight=False, markup=False, soft_wrap=True)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 120  # a file or a pipe: room for the tables, not rich's 80 columns
    specs = [s for s in [args.storage, *(r.partition("@")[2] for r in args.compare or [])] if s]
    try:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        if args.trial is not None and args.best_config is None:
            raise ConfigError("trial", "names the trial whose config --best-config PATH writes: "
                              "give --best-config too")
        if args.compare:
            if args.best_config is not None:
                raise ConfigError("best-config", "cannot be combined with --compare (name one "
                                  "study with --study)")
            _compare(args, console)
        else:
            _report(args, console)
    except ConfigError as error:
        message = str(error)
        for spec in specs:
            message = mask_text(message, spec)
        print(f"error: {' '.join(message.split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:  # Ctrl-C while reading, drawing or writing: no traceback
        print("stopped by SIGINT", file=sys.stderr)
        return 128 + int(signal.SIGINT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
