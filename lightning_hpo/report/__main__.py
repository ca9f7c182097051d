"""``python -m lightning_hpo.report``: tables, CSV files and plots of a study, or a comparison.

Examples::

    python -m lightning_hpo.report --storage runs/quickstart.journal
    python -m lightning_hpo.report --storage sqlite:///runs/all.db --study lenet-asha --out rep/
    python -m lightning_hpo.report --storage sqlite:///runs/all.db --compare asha random
    python -m lightning_hpo.report --compare asha@runs/asha.journal rs@runs/rs.journal

Bad input (unreachable storage, unknown or empty study) prints one line naming the field, with
any password masked, and exits with code 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from lightning_hpo.errors import EXIT_BAD_INPUT, ConfigError
from lightning_hpo.storage import mask, mask_text

_STYLE = {"COMPLETE": "green", "PRUNED": "yellow", "FAIL": "red", "RUNNING": "cyan",
          "PAUSED": "magenta"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lightning_hpo.report",
        description="Report on an Optuna study, ours or any other: a table of the best trials,\n"
        "counts by state, the best value reported at any epoch of any trial and the best\n"
        "COMPLETE trial, the compute spent (epochs, device-seconds), the paused trials,\n"
        "trials.csv, curves.csv, incumbent.csv, rungs.csv, segments.csv (trials trained in\n"
        "segments), and four plots: incumbent trajectory, learning curves, rungs (one panel\n"
        "per bracket), worker timeline (one bar per segment). With --compare, overlay several\n"
        "studies' incumbent trajectories and show the time and epochs each took to reach the\n"
        "others' best.",
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
    parser.add_argument("--top", metavar="N", type=int, default=10,
                        help="rows of the best-trials table (default: 10)")
    parser.add_argument("--compare", metavar="STUDY", nargs="+",
                        help="compare studies: NAME (in --storage) or NAME@STORAGE")
    parser.add_argument("--best-config", metavar="PATH", type=Path,
                        help="also write the best COMPLETE trial's config.yaml there (a study "
                        "of a LightningCLI project): python main.py fit --config PATH "
                        "retrains it")
    return parser


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


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


def _best_lines(summary: dict[str, Any], metric: str) -> list[str]:
    """The headline best (any trial, any epoch) and the best COMPLETE trial, in words."""
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
    at = "" if summary["best_step"] is None else f" at epoch {summary['best_step']}"
    lines = [f"Best {metric} observed: {_fmt(summary['best_value'])}, trial "
             f"{summary['best_trial']}{at} ({how}; {params})"]
    if summary["best_complete_trial"] is None:
        lines.append("Best COMPLETE trial: none yet")
    else:
        done = " ".join(f"{k}={_fmt(v, 3)}" for k, v in summary["best_complete_params"].items())
        lines.append(f"Best COMPLETE trial: trial {summary['best_complete_trial']}, {metric} "
                     f"{_fmt(summary['best_complete_value'])} after "
                     f"{summary['best_complete_epochs']} epochs ({done})")
    return lines


def _paused_words(trial: Any) -> str:
    """``trial 3 at epoch 4 (rung 4)``: a paused trial, where and why it waits."""
    pause = trial.paused
    at = "" if pause.epoch is None else f" at epoch {pause.epoch}"
    why = "" if pause.why is None else f" ({pause.why})"
    return f"trial {trial.number}{at}{why}"


def _safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label)


def _report(args: argparse.Namespace, console: Console) -> None:
    import pandas as pd

    from lightning_hpo.report import (
        RANK_ORDER,
        STATUSES,
        StudySnapshot,
        limitations,
        load,
        summarize,
        trials_frame,
        write_report,
    )

    if args.storage is None:
        raise ConfigError("storage", "is required: --storage URL (or a journal file path)")
    study = load(args.storage, args.study)
    best_config = None
    if args.best_config is not None:  # first: a study without one writes nothing at all
        from lightning_hpo.report.best_config import write_best_config

        best_config = write_best_config(study, args.best_config)
    snap = StudySnapshot.read(study)
    out = args.out or Path("reports") / _safe(snap.info.name)
    paths = write_report(snap, out)
    info, summary, trials = snap.info, summarize(snap), trials_frame(snap)
    pruning = (f", {info.pruner} rungs {', '.join(map(str, info.rungs))} epochs"
               if info.rungs else "")
    console.print(f"Study '{info.name}' on {mask(args.storage)}: {info.direction} "
                  f"{info.metric}{pruning}")
    ranked = trials.dropna(subset=["rank"]).sort_values("rank")
    shown = ranked.head(max(args.top, 0))
    table = Table(title=f"Best {len(shown)} of {len(trials)} started trials, {RANK_ORDER}",
                  header_style="bold", title_justify="left")
    best_column = f"best {info.metric}\n@ epoch"
    for column in ("rank", "trial", "state", "epochs", best_column, "final/last", "duration",
                   "params"):
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
        best = Text(_fmt(row["best_value"]))
        if pd.notna(row["best_step"]):
            best.append(f" @ {row['best_step']}", style="dim")
        last = row["value"] if row["state"] == "COMPLETE" else row["last_value"]
        table.add_row(
            str(int(row["rank"])), str(row["trial"]), state, str(row["epochs"]), best,
            _fmt(last),
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
    for line in _best_lines(summary, info.metric):
        console.print(line)
    slots = f" on {summary['slots']} slot(s)" if summary["slots"] else ""
    device_s = summary["device_seconds"]
    running = (f" (+ {summary['unfinished']} trial(s) training now: the segment in flight not "
               "counted in device-s)" if summary["unfinished"] else "")
    console.print(f"Compute: {summary['epochs']} epochs, {device_s:.1f} device-s "
                  f"({device_s / 3600:.3g} device-h){slots} in "
                  f"{_duration(summary['wall_clock_s'])} wall-clock{running}")
    notes = limitations(snap)
    if notes:
        console.print(f"note: not drawn or estimated: {'; '.join(notes)}")
    console.print(f"Wrote {out}/: {', '.join(paths)}")
    if best_config is not None:
        number, path = best_config
        console.print(f"Wrote {path}: trial {number}'s config (the project's fit --config "
                      f"{path} retrains it)")


def _compare(args: argparse.Namespace, console: Console) -> None:
    from lightning_hpo.report import Comparison, load_ref, summarize, write_compare

    if args.study is not None:
        raise ConfigError("study", "cannot be combined with --compare (list the studies there)")
    comparison = Comparison.of([load_ref(ref, args.storage) for ref in args.compare])
    snaps = comparison.snapshots
    metrics = {s.info.metric for s in snaps.values()}
    out = args.out or Path("reports") / _safe("compare_" + "_vs_".join(snaps))
    paths = write_compare(comparison, out)
    pairs = comparison.pairs
    info = comparison.info
    overview = Table(title=f"Studies compared ({info.direction} {info.metric}; best: reported "
                     "at any epoch of any trial)", header_style="bold", title_justify="left")
    for column in ("study", "trials", "best", "wall-clock", "epochs", "device-s"):
        overview.add_column(column, justify="left" if column == "study" else "right")
    for label, snap in snaps.items():
        summary = summarize(snap)
        overview.add_row(label, str(len(snap.trials)), _fmt(summary["best_value"]),
                         _duration(summary["wall_clock_s"]), str(summary["epochs"]),
                         f"{summary['device_seconds']:.1f}")
    console.print(overview)
    table = Table(title="Time and compute to reach another study's final best (vs what that "
                  "study itself needed)",
                  header_style="bold", title_justify="left")
    for column in ("study", "to reach", "time", "speed-up", "epochs", "epochs ratio"):
        table.add_column(column, justify="left" if column in ("study", "to reach") else "right",
                         no_wrap=True)
    for _, row in pairs.iterrows():
        target = f"{row['target']}'s {_fmt(row['target_best'])}"
        if not row["reached"]:
            table.add_row(row["study"], target, Text("never", style="red"), "-", "-", "-")
            continue
        table.add_row(
            row["study"], target,
            f"{_duration(row['time_s'])} (vs {_duration(row['target_time_s'])})",
            f"{_fmt(row['time_speedup'], 3)}x",
            f"{row['epochs']} (vs {row['target_epochs']})", f"{_fmt(row['epochs_speedup'], 3)}x",
        )
    console.print(table)
    if len(metrics) > 1:
        console.print(f"note: the studies report different metrics: {', '.join(sorted(metrics))}")
    console.print(f"Wrote {out}/: {', '.join(paths)}")


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
    return 0


if __name__ == "__main__":
    sys.exit(main())
