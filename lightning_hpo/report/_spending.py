"""Compute spent by all trials up to given times, epochs and device-seconds: the
``epochs_spent`` and ``device_seconds_spent`` columns of
:func:`~lightning_hpo.report.incumbent_frame` and :func:`~lightning_hpo.report.hypervolume_frame`.

Example::

    spending = Spending(snap.trials, snap.horizon)
    spending.epochs_at(times), spending.device_seconds_at(times)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lightning_hpo.report.snapshot import TrialRecord

__all__ = ["Spending"]


class Spending:
    """Compute spent by all trials up to given times: epochs and device-seconds, vectorised.

    Epochs count each trial's ``epoch_end_times``; a trial without them is credited pro rata
    over its duration (its epochs spread evenly from start to end; in a study by steps, each
    report's steps since the one before, at its step's share of the trial's duration: one
    event per report, not per step); a trial that lists its
    segments is counted segment by segment (each segment's epochs, retrained ones included,
    at their end times where these fall in the segment, else pro rata over it), and its
    device-seconds run over its segments only, not its pauses. Both are cumulative sums
    over sorted event times, so a whole incumbent trajectory costs a few sorts, not a pass over
    every trial per row.
    """

    def __init__(self, trials: Sequence[TrialRecord], horizon: float, by_step: bool = False
                 ) -> None:
        ends: list[float] = []  # when epochs (steps, by_step) were done
        weights: list[float] = []  # how many at each of those ends
        spans = []  # (start, stop, devices) per span (segment) of each started trial
        for trial in trials:
            stop = trial.busy_until(horizon)
            if trial.start is None or stop is None:
                continue
            for seg in trial.spans:
                end = max(seg.end if seg.end is not None else horizon, seg.start)
                spans.append((seg.start, end, seg.devices or trial.devices))
            done: Sequence[float] = []
            if trial.segments and all(s.from_epoch is not None for s in trial.segments):
                done = _segment_epoch_ends(trial, horizon)
            elif trial.times and all(x is not None for x in trial.times):
                done = [x for x in trial.times if x is not None]
            elif trial.epochs:  # pro rata: epoch k of n ends at start + span * k / n
                stop = max(stop, trial.start)
                span = stop - trial.start
                at = list(trial.steps) if by_step else range(1, trial.epochs + 1)
                done = [trial.start + span * k / trial.epochs - 1e-9 * span / trial.epochs
                        for k in at]
                if by_step:  # each report: the steps since the one before
                    weights.extend(np.diff(at, prepend=0).tolist())
                    ends.extend(done)
                    continue
            ends.extend(done)
            weights.extend([1.0] * len(done))
        order = np.argsort(np.array(ends, dtype=float), kind="stable")
        self._epoch_ends = np.array(ends, dtype=float)[order]
        self._epochs_done = np.concatenate([[0.0], np.cumsum(np.array(weights)[order])])
        array = np.array(spans, dtype=float).reshape(-1, 3)
        # seconds since the first start: sums of unix times would cost precision
        self._t0 = float(array[:, 0].min()) if len(array) else 0.0
        array[:, :2] -= self._t0
        order = np.argsort(array[:, 0])
        self._starts = array[order, 0]
        self._start_devices = np.cumsum(array[order, 2])
        self._start_device_times = np.cumsum(array[order, 2] * array[order, 0])
        order = np.argsort(array[:, 1])
        self._stops = array[order, 1]
        self._stop_devices = np.cumsum(array[order, 2])
        self._stop_device_times = np.cumsum(array[order, 2] * array[order, 1])

    def epochs_at(self, times: np.ndarray) -> np.ndarray:
        """Epochs (steps, in a study by steps) completed by each unix time in ``times``, all
        trials together."""
        done = self._epochs_done[np.searchsorted(self._epoch_ends, times, side="right")]
        return np.rint(done).astype("int64")

    def device_seconds_at(self, times: np.ndarray) -> np.ndarray:
        """Device-seconds spent by each unix time in ``times``, all trials together.

        A trial started by ``t`` counts ``devices * (min(t, stop) - start)``: the finished ones
        their whole span, the others ``t - start``.
        """
        times = np.asarray(times, dtype=float) - self._t0
        started = np.searchsorted(self._starts, times, side="right")
        stopped = np.searchsorted(self._stops, times, side="right")

        def total(cumulative: np.ndarray, count: np.ndarray) -> np.ndarray:
            padded = np.concatenate([[0.0], cumulative])
            return padded[count]

        running = total(self._start_devices, started) - total(self._stop_devices, stopped)
        return (total(self._stop_device_times, stopped) + running * times
                - total(self._start_device_times, started))


def _segment_epoch_ends(trial: TrialRecord, horizon: float) -> list[float]:
    """Unix s when each epoch a segmented trial trained ended, segment by segment.

    Epoch ``e`` of a segment from ``from_epoch`` to ``to_epoch`` ends at the trial's recorded
    end time of epoch ``e`` when that falls within the segment (an epoch retrained after a
    crash or from scratch has its end time in its last segment only), else pro rata over the
    segment. A segment whose ``to_epoch`` is unknown (in flight, or left open by a worker that
    died) counts the epochs whose end times fall within it.
    """
    when = {s: x for s, x in zip(trial.steps, trial.times, strict=True) if x is not None}
    found: list[float] = []
    for seg in trial.segments:
        start = seg.start
        end = max(seg.end if seg.end is not None else horizon, start)
        first = seg.from_epoch or 0
        last = seg.to_epoch
        if last is None:
            last = max((s for s, x in when.items() if s > first and start <= x <= end + 1e-6),
                       default=first)
        n = last - first
        for k, epoch in enumerate(range(first + 1, last + 1), 1):
            x = when.get(epoch)
            if x is None or not start <= x <= end + 1e-6:
                x = start + (end - start) * k / n - 1e-9 * (end - start) / n
            found.append(x)
    return found
