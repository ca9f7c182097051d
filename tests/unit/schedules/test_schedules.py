"""The pausing schedules (``lightning_hpo.schedules``): pure decisions, checked by simulation.

``_Sim`` plays the launcher's side in memory: N slots ask ``decide`` whenever they are free, apply
its job (a segment of epochs that reports one value per epoch, then pauses at its target or ends
COMPLETE at the top rung) and end the pruned trials PRUNED. Segments take simulated time (epochs
times a per-trial duration), so slots finish out of order. Promotion-type ASHA is compared with a
literal transcription of Li et al.'s Algorithm 2 (MLSys 2020).
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import math
import random
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from lightning_hpo.pruners import rungs
from lightning_hpo.schedules import (
    Decision,
    Job,
    PromotionASHA,
    PromotionHyperband,
    Schedule,
    StopSchedule,
    SyncHyperband,
    SyncSuccessiveHalving,
    TrialView,
    promotable,
)

NAN, INF = float("nan"), float("inf")


def _plan(
    min_resource: int, max_resource: int, reduction_factor: int, prefact: int = 1, **kwargs: int
) -> list[tuple[int, int]]:
    """One synchronous round's plan, in the schedules' argument order."""
    return rungs.successive_halving_plan(min_resource, max_resource=max_resource,
                                         reduction_factor=reduction_factor, prefact=prefact,
                                         **kwargs)


# ---------------------------------------------------------------------------------------------
# The simulation


@dataclass
class _Trial:
    number: int
    group: int | None
    state: str = "running"
    epoch: int = 0
    values: dict[int, float] = field(default_factory=dict)
    target: int | None = None
    trained: int = 0  # epochs trained over all segments
    segments: list[tuple[int, int]] = field(default_factory=list)  # (from_epoch, to_epoch)

    def view(self) -> TrialView:
        return TrialView(self.number, self.state, self.epoch, dict(self.values),  # type: ignore[arg-type]
                         self.group, self.target)


Check = Callable[["_Sim", Decision], None]


class _Sim:
    """N slots driving a schedule; values from ``value(trial, epoch)``.

    Args:
        duration: seconds per epoch of a trial (default 1).
        interrupt: trial -> epoch at which its next segment passing it is cut short (once).
        lag: seconds between a segment's last report and its pause (the trial runs meanwhile).
        honor_prune: end pruned trials at once; ``False``: only at the final ``"done"``.
        check: called with every decision, before it is applied.
    """

    def __init__(
        self,
        schedule: Schedule,
        value: Callable[[int, int], float],
        *,
        workers: int,
        tickets: int | None,
        duration: Callable[[int], float] = lambda n: 1.0,
        interrupt: dict[int, int] | None = None,
        lag: float = 0.0,
        honor_prune: bool = True,
        check: Check | None = None,
    ) -> None:
        self.schedule, self.value, self.workers, self.tickets = schedule, value, workers, tickets
        self.duration, self.interrupt, self.lag = duration, dict(interrupt or {}), lag
        self.honor_prune, self.check = honor_prune, check
        self.top = max(ladder[-1] for ladder in schedule.ladders())
        self.trials: dict[int, _Trial] = {}
        self.decisions: list[Decision] = []
        self.jobs: list[Job] = []  # start and resume jobs, in order
        self.pruned_by: dict[int, str] = {}
        self.time = 0.0
        self.started_at: dict[int, float] = {}
        self.ended_at: dict[int, float] = {}
        self._events: list[tuple[float, int, str, int, int, int]] = []
        self._seq = 0
        self._busy = 0
        self.peak_paused = 0  # paused trials at once: checkpoints on disk

    def views(self) -> list[TrialView]:
        return [trial.view() for trial in self.trials.values()]

    def run(self, max_decisions: int = 100_000) -> _Sim:
        last = "start"
        while True:
            while self._busy < self.workers:
                decision = self.schedule.decide(self.views(), tickets=self.tickets,
                                                next_number=len(self.trials))
                assert len(self.decisions) < max_decisions, "the schedule never finishes"
                self.decisions.append(decision)
                if self.check is not None:
                    self.check(self, decision)
                job, last = decision.job, decision.job.kind
                if self.honor_prune or (job.kind == "done" and not self._events):
                    self._prune(decision)
                self._note_paused()
                if job.kind == "start":
                    assert self.tickets is None or self.tickets > 0
                    number = len(self.trials)
                    self.trials[number] = _Trial(number, job.group)
                    self.started_at[number] = self.time
                    self.tickets = None if self.tickets is None else self.tickets - 1
                    self._segment(self.trials[number], 0, job)
                elif job.kind == "resume":
                    trial = self.trials[job.trial]  # type: ignore[index]
                    assert trial.state == "paused", f"resumed trial {trial.number} is {trial.state}"
                    self._segment(trial, 0 if job.from_scratch else trial.epoch, job)
                else:
                    break
            if not self._events:
                assert last == "done", f"'{last}' with nothing running: the schedule is stuck"
                return self
            self._next_event()

    def _note_paused(self) -> None:
        paused = sum(1 for t in self.trials.values() if t.state == "paused")
        self.peak_paused = max(self.peak_paused, paused)

    def _prune(self, decision: Decision) -> None:
        for number in decision.prune:
            trial = self.trials[number]
            if trial.state == "pruned":
                continue
            assert trial.state == "paused" and trial.target is None, (number, trial.state)
            assert number in decision.reasons
            trial.state = "pruned"
            self.pruned_by[number] = decision.reasons[number]
            self.ended_at[number] = self.time

    def _segment(self, trial: _Trial, from_epoch: int, job: Job) -> None:
        assert job.to_epoch is not None and job.to_epoch > from_epoch
        self.jobs.append(job if job.kind == "resume" else Job(
            "start", trial=trial.number, to_epoch=job.to_epoch, group=job.group))
        end = job.to_epoch
        cut = self.interrupt.get(trial.number)
        if cut is not None and from_epoch < cut < end:
            del self.interrupt[trial.number]
            end = cut
        trial.state, trial.target, trial.epoch = "running", job.to_epoch, from_epoch
        self._busy += 1
        self._push(self.time + (end - from_epoch) * self.duration(trial.number), "report",
                   trial.number, from_epoch, end)

    def _push(self, when: float, kind: str, number: int, start: int, end: int) -> None:
        self._seq += 1
        heapq.heappush(self._events, (when, self._seq, kind, number, start, end))

    def _next_event(self) -> None:
        when, _, kind, number, start, end = heapq.heappop(self._events)
        self.time = when
        trial = self.trials[number]
        if kind == "report":
            for epoch in range(start + 1, end + 1):
                trial.values.setdefault(epoch, self.value(number, epoch))
            trial.epoch = end
            trial.trained += end - start
            trial.segments.append((start, end))
            if self.lag:
                self._push(when + self.lag, "pause", number, start, end)
                return
        self._busy -= 1
        assert trial.target is not None
        if end < trial.target:  # interrupted: paused, to be resumed to its target
            trial.state = "paused"
        elif end >= self.top:
            trial.state, trial.target = "complete", None
            self.ended_at[number] = when
        else:
            trial.state, trial.target = "paused", None
        self._note_paused()

    # what happened
    def in_group(self, group: int) -> list[_Trial]:
        return [t for t in self.trials.values() if t.group == group]

    def at_rung(self, trials: Sequence[_Trial], level: int) -> list[int]:
        return sorted(t.number for t in trials if level in t.values)


def _values(seed: int, n: int = 2000, *, ties: bool = False) -> Callable[[int, int], float]:
    """A learning curve per trial, ``a + b / epoch``: rankings change between rungs."""
    rng = random.Random(seed)
    curves = [(rng.randrange(4) if ties else rng.random(), rng.random() * 3) for _ in range(n)]
    if ties:
        return lambda number, epoch: float(curves[number][0])
    return lambda number, epoch: curves[number][0] + curves[number][1] / epoch


def _duration(seed: int) -> Callable[[int], float]:
    rng = random.Random(seed)
    speeds = [0.5 + rng.random() for _ in range(500)]
    return lambda number: speeds[number]


def _better(a: tuple[int, float], b: tuple[int, float], minimize: bool) -> bool:
    """Whether trial ``a`` ranks above ``b`` at a rung: finite first, best value, lower number."""
    (na, va), (nb, vb) = a, b
    if math.isfinite(va) != math.isfinite(vb):
        return math.isfinite(va)
    if math.isfinite(va) and va != vb:
        return va < vb if minimize else va > vb
    return na < nb


def _top(rung: dict[int, float], count: int, minimize: bool) -> list[int]:
    """The best ``count`` trials at a rung, best first (a transcription, not the module's sort)."""
    def compare(a: int, b: int) -> int:
        return -1 if _better((a, rung[a]), (b, rung[b]), minimize) else 1
    return sorted(rung, key=functools.cmp_to_key(compare))[:count]


# ---------------------------------------------------------------------------------------------
# Plans


@pytest.mark.parametrize("args", [(1, 27, 3, 1), (2, 10, 2, 1), (1, 1000, 10, 1), (1, 81, 3, 2),
                                  (3, 3, 2, 1), (1, 16, 4, 3), (2, 9, 5, 1)],
                         ids=lambda a: "-".join(map(str, a)))
def test_sync_hyperband_cycles_through_the_rounds(args: tuple[int, int, int, int]) -> None:
    expected = rungs.hyperband_rounds(*args)
    schedule = SyncHyperband(*args)
    assert schedule.ladders() == [ladder for ladder, _ in expected]
    assert [schedule.round_plan(j) for j in range(2 * len(expected))] == expected * 2


# ---------------------------------------------------------------------------------------------
# Arguments


_SYNC = (SyncSuccessiveHalving, SyncHyperband)


@pytest.mark.parametrize(("make", "name"), [
    (lambda: SyncSuccessiveHalving(0, 10, 2), "min_resource"),
    (lambda: SyncSuccessiveHalving(2, 1, 2), "max_resource"),
    (lambda: SyncSuccessiveHalving(2, 10, 1), "reduction_factor"),
    (lambda: SyncSuccessiveHalving(2, 10, 2, prefact=0), "prefact"),
    (lambda: SyncSuccessiveHalving(2, 10, 2, resume=1), "resume"),  # type: ignore[arg-type]
    (lambda: SyncHyperband(2, 10.0, 2), "max_resource"),  # type: ignore[arg-type]
    (lambda: SyncHyperband(2, 10, 2, minimize="yes"), "minimize"),  # type: ignore[arg-type]
    (lambda: PromotionASHA(1, 9, True), "reduction_factor"),  # type: ignore[arg-type]
    (lambda: PromotionHyperband(1, 9, 3, study_name=3), "study_name"),  # type: ignore[arg-type]
    (lambda: StopSchedule(0), "max_epochs"),
    (lambda: PromotionASHA(1, 9, 3, max_paused=0), "max_paused"),
    (lambda: PromotionHyperband(1, 9, 3, max_paused=True), "max_paused"),  # type: ignore[arg-type]
    (lambda: PromotionASHA(1, 9, 3, finish_best=1), "finish_best"),  # type: ignore[arg-type]
    (lambda: PromotionHyperband(1, 9, 3, finish_best=None), "finish_best"),  # type: ignore[arg-type]
    (lambda: SyncSuccessiveHalving(1, 9, 3, finish_best="no"), "finish_best"),  # type: ignore[arg-type]
    (lambda: SyncHyperband(1, 9, 3, finish_best=0), "finish_best"),  # type: ignore[arg-type]
    (lambda: _plan(1, 9, 3, configs=-1), "configs"),
    (lambda: rungs.hyperband_rounds(1, 9, 3, prefact=0), "prefact"),
    (lambda: promotable({}, (), 1, True), "reduction_factor"),
    (lambda: TrialView(0, "paused", -1), "epoch"),
    (lambda: TrialView(0, "stopped"), "state"),  # type: ignore[arg-type]
    (lambda: TrialView(0, "paused", 2, target=0), "target"),
    (lambda: Job("resume", to_epoch=4), "trial"),
    (lambda: Job("start"), "to_epoch"),
    (lambda: Job("go"), "kind"),  # type: ignore[arg-type]
    (lambda: StopSchedule(3).decide([], tickets=-1, next_number=0), "tickets"),
    (lambda: StopSchedule(3).decide([], tickets=None, next_number=-1), "next_number"),
    (lambda: StopSchedule(3).decide([TrialView(1, "running")] * 2, tickets=0, next_number=2),
     "trials"),
])
def test_bad_arguments_name_the_argument(make: Callable[[], object], name: str) -> None:
    with pytest.raises(ValueError, match=f"`{name}`"):
        make()


@pytest.mark.parametrize("schedule", [
    StopSchedule(9), SyncSuccessiveHalving(1, 9, 3), SyncHyperband(1, 9, 3), PromotionASHA(1, 9, 3),
    PromotionHyperband(1, 9, 3, study_name="s")], ids=lambda s: s.name)
def test_names_and_ladders(schedule: Schedule) -> None:
    assert schedule.name in {"stop", "sync_sh", "sync_hyperband", "promotion_asha",
                             "promotion_hyperband"}
    assert all(ladder[-1] == 9 for ladder in schedule.ladders())
    assert type(schedule).__name__ in repr(schedule)
    if not isinstance(schedule, StopSchedule):
        assert "finish_best=True" in repr(schedule)


# ---------------------------------------------------------------------------------------------
# Synchronous successive halving


def test_sync_trace_one_worker() -> None:
    """The exact job sequence of one round of (2, 10, 2) on one slot, best first."""
    quality = [5, 3, 7, 1, 6, 0, 4, 2]  # trial 5 best, then 3, 7, 1, 6, 0, 4, 2
    sim = _Sim(SyncSuccessiveHalving(2, 10, 2), lambda n, e: quality[n % 8] + 1 / e,
               workers=1, tickets=8).run()
    trace = [(job.kind, job.trial, job.to_epoch) for job in sim.jobs]
    assert trace == [("start", n, 2) for n in range(8)] + [
        ("resume", 5, 4), ("resume", 3, 4), ("resume", 7, 4), ("resume", 1, 4),
        ("resume", 5, 8), ("resume", 3, 8), ("resume", 5, 10)]
    pruned_when = [d.prune for d in sim.decisions if d.prune]
    assert pruned_when == [(0, 2, 4, 6), (1, 7), (3,)]
    assert sim.decisions[-1].job.kind == "done"
    assert sim.pruned_by[4] == "not promoted at rung 2 (round 0: 4 of 8 go on)"
    assert {n: t.state for n, t in sim.trials.items()} == {
        n: "complete" if n == 5 else "pruned" for n in range(8)}


def _check_sync(sim: _Sim, decision: Decision) -> None:
    """Strictly synchronous: a round starts only once every earlier round has ended (its top
    trial may still be finishing: it has reported its last epoch)."""
    job = decision.job
    if job.kind == "start":
        assert job.group is not None
        for trial in sim.trials.values():
            if trial.group is not None and trial.group < job.group:
                assert (trial.state in ("complete", "pruned") or trial.number in decision.prune
                        or (trial.state == "running" and sim.top in trial.values)), trial


def _assert_round(sim: _Sim, group: int, ladder: list[int], held: int, eta: int,
                  minimize: bool) -> None:
    """Round ``group`` kept exactly the best ``floor(n / eta)`` at each rung."""
    members = sim.in_group(group)
    assert len(members) == held
    admitted = sorted(t.number for t in members)
    for k, level in enumerate(ladder):
        assert sim.at_rung(members, level) == admitted, (group, level)
        if k == len(ladder) - 1:
            assert all(sim.trials[n].state == "complete" for n in admitted)
            break
        rung = {n: sim.trials[n].values[level] for n in admitted}
        admitted = sorted(_top(rung, len(admitted) // eta, minimize))
        for number in set(rung) - set(admitted):
            trial = sim.trials[number]
            assert trial.state == "pruned" and trial.epoch == level, (number, trial)
            assert sim.pruned_by[number].startswith(f"not promoted at rung {level} (round {group}")
        if not admitted:
            break


@pytest.mark.parametrize("resume", [True, False], ids=["resume", "retrain"])
@pytest.mark.parametrize("workers", [1, 3, 8])
@pytest.mark.parametrize("minimize", [True, False], ids=["min", "max"])
def test_sync_two_rounds(resume: bool, workers: int, minimize: bool) -> None:
    eta, ladder = 2, [2, 4, 8, 10]
    sim = _Sim(SyncSuccessiveHalving(2, 10, eta, resume=resume, minimize=minimize),
               _values(workers), workers=workers, tickets=16, duration=_duration(workers),
               check=_check_sync).run()
    for group in (0, 1):
        members = sim.in_group(group)
        assert [len(sim.at_rung(members, level)) for level in ladder] == [8, 4, 2, 1]
        assert sum(t.trained for t in members) == (34 if resume else 58)
        assert sorted(t.epoch for t in members if t.state == "pruned") == [2] * 4 + [4] * 2 + [8]
        _assert_round(sim, group, ladder, 8, eta, minimize)
    assert max(sim.ended_at[t.number] for t in sim.in_group(0)) <= min(
        sim.started_at[t.number] for t in sim.in_group(1))
    assert all(job.from_scratch == (not resume) for job in sim.jobs if job.kind == "resume")
    assert sim.decisions[-1].job.kind == "done" and sim.tickets == 0


@pytest.mark.parametrize(("args", "tickets"), [
    ((2, 10, 2), 11), ((2, 10, 2), 13), ((2, 10, 2), 9), ((1, 10, 3), 30), ((1, 27, 3, 2), 60),
    ((1, 100, 10), 103)], ids=str)
def test_sync_cut_short_last_round(args: tuple[int, ...], tickets: int) -> None:
    schedule = SyncSuccessiveHalving(*args)
    ladder, n0 = schedule.round_plan(0)
    sim = _Sim(schedule, _values(tickets), workers=4, tickets=tickets,
               duration=_duration(tickets), check=_check_sync).run()
    assert tickets % n0 and sim.tickets == 0
    for group in range(tickets // n0 + 1):
        held = min(n0, tickets - group * n0)
        members = sim.in_group(group)
        expected = [n for _, n in _plan(*args, configs=held)]
        assert [len(sim.at_rung(members, level)) for level in ladder] == expected
        _assert_round(sim, group, ladder, held, args[2], True)
    assert {t.state for t in sim.trials.values()} <= {"complete", "pruned"}
    # round epochs: only the ones that were promoted trained past the first rung
    last = sim.in_group(tickets // n0)
    expected_epochs = rungs.round_epochs(_plan(*args, configs=len(last)), resume=True)
    assert sum(t.trained for t in last) == expected_epochs


def test_sync_ties_go_to_the_lower_number() -> None:
    sim = _Sim(SyncSuccessiveHalving(2, 10, 2), lambda n, e: 0.5, workers=3, tickets=8).run()
    assert [sim.at_rung(list(sim.trials.values()), level) for level in (2, 4, 8, 10)] == [
        list(range(8)), [0, 1, 2, 3], [0, 1], [0]]


@pytest.mark.parametrize("minimize", [True, False], ids=["min", "max"])
def test_sync_nan_and_inf_rank_last(minimize: bool) -> None:
    bad = {0: NAN, 1: INF, 2: -INF}
    sim = _Sim(SyncSuccessiveHalving(1, 4, 2, prefact=2, minimize=minimize),
               lambda n, e: bad.get(n, float(n)), workers=2, tickets=8).run()
    best_first = [3, 4, 5, 6, 7] if minimize else [7, 6, 5, 4, 3]
    assert sim.at_rung(list(sim.trials.values()), 2) == sorted(best_first[:4])


@pytest.mark.parametrize("resume", [True, False], ids=["resume", "retrain"])
@pytest.mark.parametrize("lag", [0.0, 0.25], ids=["nolag", "lag"])
def test_sync_interrupted_trials_resume_first_and_cost_nothing(resume: bool, lag: float) -> None:
    quality = [5, 3, 7, 1, 6, 0, 4, 2]  # best first: 5, 3, 7, 1 (and 13, 11, 15, 9 in round 1)
    interrupt = {0: 1, 5: 3, 3: 6, 13: 9, 6: 1, 9: 3}  # each cuts a segment that will run
    sim = _Sim(SyncSuccessiveHalving(2, 10, 2, resume=resume),
               lambda n, e: quality[n % 8] + 1 / e, workers=3, tickets=16,
               duration=_duration(7), interrupt=interrupt, lag=lag,
               check=lambda sim, d: (_check_interrupted_first(sim, d), _check_sync(sim, d))).run()
    assert not sim.interrupt, "every planned interruption happened"
    for group in (0, 1):
        members = sim.in_group(group)
        assert sum(t.trained for t in members) == (34 if resume else 58)
        _assert_round(sim, group, [2, 4, 8, 10], 8, 2, True)


def _check_interrupted_first(sim: _Sim, decision: Decision) -> None:
    interrupted = sorted(t.number for t in sim.trials.values()
                         if t.state == "paused" and t.target is not None)
    if interrupted:
        first = sim.trials[interrupted[0]]
        assert decision.job == Job("resume", trial=first.number, to_epoch=first.target)


def test_sync_wait_and_done() -> None:
    schedule = SyncSuccessiveHalving(2, 10, 2)
    paused = [TrialView(n, "paused", 2, {2: float(n)}, group=0) for n in range(7)]
    running = TrialView(7, "running", 1, {1: 0.0}, group=0, target=2)
    assert schedule.decide(paused + [running], tickets=0, next_number=8).job.kind == "wait"
    assert schedule.decide(paused + [running], tickets=3, next_number=8).job.kind == "wait"
    assert schedule.decide(paused[:5], tickets=3, next_number=5).job == Job(
        "start", to_epoch=2, group=0)
    cut_short = schedule.decide(paused[:5], tickets=0, next_number=5)  # 5 held: 2 go on
    assert cut_short.job == Job("resume", trial=0, to_epoch=4) and cut_short.prune == (2, 3, 4)
    finished = [TrialView(0, "complete", 10, {2: 0.0, 4: 0.0, 8: 0.0, 10: 0.0}, group=0)] + [
        TrialView(n, "pruned", 2, {2: 1.0}, group=0) for n in range(1, 8)]
    assert schedule.decide(finished, tickets=0, next_number=8).job.kind == "done"
    assert schedule.decide(finished, tickets=1, next_number=8).job == Job(
        "start", to_epoch=2, group=1)
    # the top trial still reports (it is COMPLETE once the worker ends): done all the same
    reporting = [TrialView(0, "running", 10, {2: 0.0, 4: 0.0, 8: 0.0, 10: 0.0}, 0, 10)]
    assert schedule.decide(reporting + finished[1:], tickets=0, next_number=8).job.kind == "done"


def test_sync_a_promoted_trial_still_running_is_waited_for() -> None:
    schedule = SyncSuccessiveHalving(2, 10, 2)
    trials = [TrialView(n, "paused", 2, {2: float(n)}, group=0) for n in range(1, 8)]
    trials.append(TrialView(0, "running", 2, {2: -1.0}, group=0, target=2))  # best, not paused
    decision = schedule.decide(trials, tickets=0, next_number=8)
    assert decision.job == Job("resume", trial=1, to_epoch=4) and decision.prune == (4, 5, 6, 7)
    promoted = [TrialView(n, "running", 3, {2: float(n)}, group=0, target=4) for n in (1, 2, 3)]
    assert schedule.decide(trials[3:] + promoted, tickets=0, next_number=8).job.kind == "wait"


@pytest.mark.parametrize("args", [(2, 10, 2), (1, 27, 3), (1, 9, 3, 2)], ids=str)
def test_sync_hyperband_brackets_in_order(args: tuple[int, ...]) -> None:
    schedule = SyncHyperband(*args)
    rounds = rungs.hyperband_rounds(*args)
    tickets = sum(n for _, n in rounds) + rounds[0][1]  # a full cycle, then bracket 0 again
    sim = _Sim(schedule, _values(len(rounds)), workers=4, tickets=tickets,
               duration=_duration(3), check=_check_sync).run()
    for group, (ladder, n0) in enumerate(rounds + rounds[:1]):
        members = sim.in_group(group)
        assert [len(sim.at_rung(members, level)) for level in ladder] == [
            n for _, n in _plan(ladder[0], ladder[-1], args[2], configs=n0)]
        assert all(t.segments[0][1] == ladder[0] for t in members)  # started at its first rung
        _assert_round(sim, group, ladder, n0, args[2], True)
    assert sim.tickets == 0 and sim.decisions[-1].job.kind == "done"


# ---------------------------------------------------------------------------------------------
# Promotion-type ASHA against Li et al.'s Algorithm 2


def _paper_get_job(
    rung_values: list[dict[int, float]], promoted: list[set[int]], eta: int, minimize: bool
) -> tuple[int, int] | None:
    """Algorithm 2's ``get_job``, literally: (trial, rung index to train to) or None (grow)."""
    for k in reversed(range(len(rung_values) - 1)):
        candidates = _top(rung_values[k], len(rung_values[k]) // eta, minimize)
        promotable_k = [t for t in candidates if t not in promoted[k]]
        if promotable_k:
            return promotable_k[0], k + 1
    return None


def _rung_state(trials: Sequence[TrialView], ladder: list[int]
                ) -> tuple[list[dict[int, float]], list[set[int]]]:
    """The paper's rungs from trial views: 'promoted' = not waiting paused at that rung."""
    values = [{t.number: t.values[level] for t in trials if level in t.values} for level in ladder]
    promoted = [{n for n in values[k] if not _waiting_at(trials, n, ladder, k)}
                for k in range(len(ladder))]
    return values, promoted


def _waiting_at(trials: Sequence[TrialView], number: int, ladder: list[int], k: int) -> bool:
    trial = next(t for t in trials if t.number == number)
    return (trial.state == "paused" and trial.target is None and trial.epoch == ladder[k])


@pytest.mark.parametrize("seed", range(40))
def test_promotable_is_the_papers_rule(seed: int) -> None:
    rng = random.Random(seed)
    eta, minimize = rng.choice([2, 3, 4]), rng.random() < 0.5
    pool = [0.1, 0.2, 0.2, 0.3, 0.5, NAN, INF, -INF] if seed % 3 == 0 else [rng.random()]
    rung = {n: rng.choice(pool) if len(pool) > 1 else rng.random()
            for n in rng.sample(range(60), rng.randrange(0, 30))}
    paused = {n for n in rung if rng.random() < 0.6} | {999}  # 999: not at the rung at all
    expected = [n for n in _top(rung, len(rung) // eta, minimize) if n in paused]
    assert promotable(rung, paused, eta, minimize) == expected


def _random_asha_state(rng: random.Random, ladder: list[int], n: int) -> list[TrialView]:
    """Trials at random depths: paused at a rung, promoted and in flight, or complete."""
    trials = []
    for number in range(n):
        depth = rng.randrange(len(ladder))
        values = {level: rng.choice([0.1, 0.2, 0.3, 0.4, rng.random()])
                  for level in ladder[: depth + 1]}
        if depth == len(ladder) - 1:
            trials.append(TrialView(number, "complete", ladder[-1], values))
        elif rng.random() < 0.7:
            trials.append(TrialView(number, "paused", ladder[depth], values))
        else:
            trials.append(TrialView(number, "running", ladder[depth], values,
                                    target=ladder[depth + 1]))
    return trials


@pytest.mark.parametrize("seed", range(60))
def test_promotion_decide_is_the_papers_get_job(seed: int) -> None:
    rng = random.Random(seed)
    eta = rng.choice([2, 3])
    ladder = rungs.rung_levels(1, max_resource=rng.choice([9, 10, 27]), reduction_factor=eta)
    minimize, tickets = rng.random() < 0.5, rng.choice([None, 0, 3])
    trials = _random_asha_state(rng, ladder, rng.randrange(1, 40))
    decision = PromotionASHA(1, ladder[-1], eta, minimize).decide(
        trials, tickets=tickets, next_number=len(trials))
    paper = _paper_get_job(*_rung_state(trials, ladder), eta, minimize)
    if paper is not None:
        assert decision.job == Job("resume", trial=paper[0], to_epoch=ladder[paper[1]])
    elif tickets is None or tickets > 0:
        assert decision.job == Job("start", to_epoch=ladder[0])
    elif any(t.state == "running" for t in trials):
        assert decision.job.kind == "wait"
    else:
        assert decision.job.kind == "done"
        assert decision.prune == tuple(sorted(t.number for t in trials if t.state == "paused"))
    values, _ = _rung_state(trials, ladder)
    for number in decision.prune:  # whatever the job, no pruned trial is in its rung's top
        k = ladder.index(next(t.epoch for t in trials if t.number == number))
        assert number not in _top(values[k], len(values[k]) // eta, minimize)


@pytest.mark.parametrize("args", [(1, 9, 3, 30), (1, 27, 3, 60), (2, 10, 2, 25), (1, 16, 2, 40)],
                         ids=str)
@pytest.mark.parametrize("minimize", [True, False], ids=["min", "max"])
def test_promotion_one_slot_replays_the_paper(args: tuple[int, int, int, int],
                                              minimize: bool) -> None:
    """On one slot, promotion ASHA runs exactly Algorithm 2's job sequence."""
    min_resource, max_resource, eta, n_configs = args
    ladder = rungs.rung_levels(min_resource, max_resource=max_resource, reduction_factor=eta)
    value = _values(n_configs)
    rung_values: list[dict[int, float]] = [{} for _ in ladder]
    promoted: list[set[int]] = [set() for _ in ladder]
    paper, started = [], 0
    while True:
        job = _paper_get_job(rung_values, promoted, eta, minimize)
        if job is None:
            if started == n_configs:
                break
            job, started = (started, 0), started + 1
        else:
            promoted[job[1] - 1].add(job[0])
        paper.append((job[0], ladder[job[1]]))
        rung_values[job[1]][job[0]] = value(job[0], ladder[job[1]])
    sim = _Sim(PromotionASHA(min_resource, max_resource, eta, minimize), value, workers=1,
               tickets=n_configs).run()
    assert [(job.trial, job.to_epoch) for job in sim.jobs] == paper
    assert {t.state for t in sim.trials.values()} <= {"complete", "pruned"}


def _check_promotion(sim: _Sim, decision: Decision) -> None:
    """No promotable trial is left waiting; the pruned could never have been promoted."""
    views = sim.views()
    schedule = sim.schedule
    assert isinstance(schedule, (PromotionASHA, PromotionHyperband))
    ladders = schedule.ladders()
    brackets: dict[int, list[TrialView]] = {}
    for view in views:
        bracket = 0 if view.group is None else view.group
        brackets.setdefault(bracket, []).append(view)
    options = []  # (level, -bracket, trial, rung index): the paper's choice in each bracket
    pruned = set(sim.pruned_by) | set(decision.prune)  # values at a rung stay: check them all
    for bracket, members in brackets.items():
        values, promoted = _rung_state(members, ladders[bracket])
        job = _paper_get_job(values, promoted, schedule.reduction_factor, schedule.minimize)
        if job is not None:
            options.append((ladders[bracket][job[1] - 1], -bracket, job[0], job[1], bracket))
        for trial in members:
            if trial.number in pruned:
                k = ladders[bracket].index(trial.epoch)
                top = _top(values[k], len(values[k]) // schedule.reduction_factor,
                           schedule.minimize)
                assert trial.number not in top, f"pruned trial {trial.number} is promotable"
    finishing = _finisher_of(views, schedule, sim.tickets)  # (its rung, the job) or None
    if finishing is not None:
        assert finishing[1].trial not in decision.prune, "the trial finish_best keeps was pruned"
    if any(t.state == "paused" and t.target is not None for t in views):
        return
    if options:
        _, _, trial, k, bracket = max(options)
        assert decision.job == Job("resume", trial=trial, to_epoch=ladders[bracket][k])
    elif sim.tickets == 0 and finishing is not None and not any(
            t.state == "running" and (t.target is None or t.target >= finishing[0])
            for t in views):  # nothing running may pause at its rung or above
        assert decision.job == finishing[1]
    else:
        assert decision.job.kind != "resume"


def _finisher_of(views: Sequence[TrialView], schedule: PromotionASHA | PromotionHyperband,
                 tickets: int | None) -> tuple[int, Job] | None:
    """finish_best's resume, transcribed: with bounded tickets, while no trial has reached the
    top (a value there or COMPLETE), the trial paused at the highest rung below its top, best
    there (finite first, then value, then lower number), to its next rung: (that rung, the
    job); ``None`` when off or there is none."""
    if not schedule.finish_best or tickets is None or any(
            t.state == "complete" or schedule.max_resource in t.values for t in views):
        return None
    ladders = schedule.ladders()
    best: tuple[int, int, float, Job] | None = None  # (level, number, value, job)
    for view in views:
        if view.state != "paused" or view.target is not None:
            continue
        ladder = ladders[0 if view.group is None else view.group]
        if view.epoch not in ladder[:-1]:
            continue
        k = ladder.index(view.epoch)
        value = view.values.get(view.epoch, NAN)
        if best is None or view.epoch > best[0] or (view.epoch == best[0] and _better(
                (view.number, value), (best[1], best[2]), schedule.minimize)):
            best = (view.epoch, view.number, value,
                    Job("resume", trial=view.number, to_epoch=ladder[k + 1]))
    return None if best is None else (best[0], best[3])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("minimize", [True, False], ids=["min", "max"])
def test_promotion_asha_many_slots(seed: int, minimize: bool) -> None:
    rng = random.Random(seed)
    eta = rng.choice([2, 3])
    max_resource = rng.choice([9, 10, 16, 27])
    tickets = rng.randrange(10, 50)
    interrupt = {n: rng.randrange(1, 8) for n in rng.sample(range(tickets), 3)}
    sim = _Sim(PromotionASHA(1, max_resource, eta, minimize), _values(seed, ties=seed % 2 == 1),
               workers=rng.choice([2, 4, 7]), tickets=tickets, duration=_duration(seed),
               interrupt=interrupt, lag=rng.choice([0.0, 0.1]), check=_check_promotion).run()
    assert {t.state for t in sim.trials.values()} <= {"complete", "pruned"}
    assert len(sim.trials) == tickets and sim.decisions[-1].job.kind == "done"
    _check_promotion_histories(sim)


def _check_promotion_histories(sim: _Sim) -> None:
    """Every curve is whole; each trial's segments run from rung to rung without a gap."""
    for trial in sim.trials.values():
        assert sorted(trial.values) == list(range(1, trial.epoch + 1))
        starts = [start for start, _ in trial.segments]
        ends = [end for _, end in trial.segments]
        assert starts == [0] + ends[:-1]


@pytest.mark.parametrize("seed", range(8))
def test_prune_only_what_can_never_be_promoted(seed: int) -> None:
    """Pruning at once changes no job: the same run, pruning only at the end, is identical."""
    rng = random.Random(seed)
    eta, tickets, workers = rng.choice([2, 3]), rng.randrange(15, 60), rng.choice([1, 3, 5])
    schedule: Schedule = (PromotionASHA(1, 27, eta) if seed % 2 else
                          PromotionHyperband(1, 27, eta, study_name=f"s{seed}"))
    runs = [_Sim(schedule, _values(seed), workers=workers, tickets=tickets,
                 duration=_duration(seed), honor_prune=honor, check=_check_promotion).run()
            for honor in (True, False)]
    early = [n for n, why in runs[0].pruned_by.items() if why.startswith("cannot be promoted")]
    assert early, "the bounded-disk rule pruned nothing: the test proves nothing"
    assert runs[0].jobs == runs[1].jobs
    assert {n: t.state for n, t in runs[0].trials.items()} == {
        n: t.state for n, t in runs[1].trials.items()}
    assert runs[0].peak_paused <= runs[1].peak_paused


@pytest.mark.parametrize(("tickets", "others", "pruned"), [
    (0, [], {2, 3}),  # 4 values at rung 2, eta 2: 2 go on; trials 2, 3 rank 3rd and 4th
    (2, [], {3}),  # 6 may reach the rung: 3 go on
    (0, [("running", 0, None)] * 2, {3}),  # trials below the rung may still arrive: 6 -> 3 go on
    (0, [("running", 0, None)], {2, 3}),  # 5 -> 2 go on
    (0, [("paused", 1, 0.0)] * 2, {3}),  # so may trials paused below it, promoted later
    # ... unless they cannot be promoted themselves (pruned at rung 1: 3 of 6 go on)
    (0, [("paused", 1, 9.0)] * 2, {2, 3, 10, 11}),
    (40, [], set()),
])
def test_bounded_disk_rule(tickets: int, others: list[tuple[str, int, float | None]],
                           pruned: set[int]) -> None:
    ladder = [1, 2, 4]
    trials = [TrialView(0, "running", 2, {1: 0.1, 2: 0.1}, target=4)]  # promoted already
    trials += [TrialView(n, "paused", 2, {1: 0.1 * n, 2: 0.1 * n}) for n in (1, 2, 3)]
    trials += [TrialView(10 + i, state, epoch, {} if value is None else {1: value},  # type: ignore[arg-type]
                         target=2 if state == "running" else None)
               for i, (state, epoch, value) in enumerate(others)]
    decision = PromotionASHA(ladder[0], ladder[-1], 2).decide(trials, tickets=tickets,
                                                              next_number=20)
    assert set(decision.prune) == pruned
    assert 1 not in decision.prune  # second best of at least 4: always goes on


def test_max_paused_prunes_the_trials_needing_the_most_newcomers() -> None:
    # rung 1 of 1, 3, 9 (eta 3): trial n has value 0.1 * n, six values: the top 2 go on.
    trials = [TrialView(n, "paused", 1, {1: 0.1 * n}) for n in range(6)]
    decision = PromotionASHA(1, 9, 3, max_paused=2).decide(trials, tickets=None, next_number=6)
    assert decision.job == Job("resume", trial=0, to_epoch=3)  # the promotion comes first
    # trial k needs 3 * (k + 1) - 6 more trials below it: 0 (trial 1), 3, 6, 9, 12 (trial 5);
    # five wait beside the resumed one, two may: the three needing the most go
    assert decision.prune == (3, 4, 5)
    assert decision.reasons[5] == (
        "not promoted at rung 1: 5 of 6 rank above it, 12 more trials must reach the rung below "
        "it first; at most 2 paused trials are kept (max_paused)")
    unbounded = PromotionASHA(1, 9, 3).decide(trials, tickets=None, next_number=6)
    assert unbounded.job == decision.job and unbounded.prune == ()
    # equal need: the lower rung goes first; then the newer trial
    two_rungs = [TrialView(0, "paused", 3, {1: 0.1, 3: 0.1}), TrialView(1, "paused", 1, {1: 0.5}),
                 TrialView(2, "paused", 1, {1: 0.6})]
    # rung 3: trial 0 alone, needs 3 * 1 - 1 = 2; rung 1: trials 1, 2 rank 2nd, 3rd of 3 and
    # need 3 and 6: trial 2 goes first, then trial 1
    schedule = PromotionASHA(1, 9, 3, max_paused=1)
    assert schedule.decide(two_rungs, tickets=None, next_number=3).prune == (1, 2)
    tied = [TrialView(0, "paused", 3, {1: 0.1, 3: 0.1}), TrialView(1, "paused", 1, {1: 0.5}),
            TrialView(2, "paused", 1, {1: 0.1})]  # rung 1: 0 and 2 tie (0 first), 1 is 3rd
    assert PromotionASHA(1, 9, 3, max_paused=2).decide(
        tied, tickets=None, next_number=3).prune == (1,)
    assert "max_paused=1" in repr(schedule)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("max_paused", [1, 4])
def test_max_paused_bounds_what_waits_at_the_rungs(seed: int, max_paused: int) -> None:
    rng = random.Random(seed)
    eta = rng.choice([2, 3])
    schedule: Schedule = (PromotionASHA(1, 27, eta, max_paused=max_paused) if seed % 2 else
                          PromotionHyperband(1, 27, eta, study_name=f"s{seed}",
                                             max_paused=max_paused))

    def check(sim: _Sim, decision: Decision) -> None:
        # (not _check_promotion: under a tight bound even a promotable trial may be pruned)
        if decision.job.kind == "done":
            return
        waiting = {t.number for t in sim.trials.values()
                   if t.state == "paused" and t.target is None}
        waiting -= set(decision.prune) | {decision.job.trial}
        assert len(waiting) <= max_paused

    sim = _Sim(schedule, _values(seed), workers=rng.choice([1, 3, 5]), tickets=80,
               duration=_duration(seed), check=check).run()
    assert any("(max_paused)" in why for why in sim.pruned_by.values())
    assert {t.state for t in sim.trials.values()} <= {"complete", "pruned"}
    assert any(t.state == "complete" for t in sim.trials.values())
    _check_promotion_histories(sim)


def test_promotion_wait_and_done() -> None:
    schedule = PromotionASHA(1, 9, 3, finish_best=False)  # the paper's: done, nothing at 9
    low = [TrialView(n, "paused", 1, {1: float(n)}) for n in range(2)]
    running = TrialView(2, "running", 0, {}, target=1)
    assert schedule.decide(low, tickets=1, next_number=3).job.kind == "start"
    assert schedule.decide(low + [running], tickets=0, next_number=3).job.kind == "wait"
    done = schedule.decide(low, tickets=0, next_number=3)
    assert done.job.kind == "done" and done.prune == (0, 1)
    assert done.reasons[0] == ("cannot be promoted at rung 1: 0 rank above it, and at most 2 "
                               "trials reach the rung (0 go on)")
    assert schedule.decide(low, tickets=None, next_number=3).job.kind == "start"
    assert schedule.decide(low, tickets=None, next_number=3).prune == ()  # unbounded: keep


def test_promotion_interrupted_first_and_highest_rung_first() -> None:
    schedule = PromotionASHA(1, 9, 3)
    rung1 = [TrialView(n, "paused", 1, {1: float(n)}) for n in range(6)]
    rung3 = [TrialView(10 + n, "paused", 3, {1: 0.0, 3: float(n)}) for n in range(3)]
    assert schedule.decide(rung1 + rung3, tickets=0, next_number=20).job == Job(
        "resume", trial=10, to_epoch=9)
    interrupted = [TrialView(15, "paused", 2, {1: 0.0, 2: 0.0}, target=3),
                   TrialView(14, "paused", 5, {1: 0.0, 3: 0.0}, target=9)]
    assert schedule.decide(rung1 + rung3 + interrupted, tickets=0, next_number=20).job == Job(
        "resume", trial=14, to_epoch=9)


# ---------------------------------------------------------------------------------------------
# Promotion-type Hyperband


@pytest.mark.parametrize("args", [(1, 27, 3), (2, 10, 2), (1, 9, 3)], ids=str)
def test_promotion_hyperband_brackets_are_the_pruners(args: tuple[int, int, int]) -> None:
    min_resource, max_resource, eta = args
    schedule = PromotionHyperband(*args, study_name="study-x")
    budgets = rungs.trial_allocation_budgets(*args)
    assert schedule.budgets == budgets
    assert schedule.ladders() == [
        rungs.rung_levels(rungs.bracket_min_resource(min_resource, eta, b),
                          max_resource=max_resource, reduction_factor=eta)
        for b in range(rungs.hyperband_brackets(*args))]
    for number in range(50):
        job = schedule.decide([], tickets=None, next_number=number).job
        bracket = rungs.bracket_of("study-x", number, budgets)
        assert job == Job("start", to_epoch=schedule.ladders()[bracket][0], group=bracket)


def test_promotion_hyperband_highest_level_first_across_brackets() -> None:
    schedule = PromotionHyperband(1, 27, 3, study_name="s")
    bracket0 = [TrialView(n, "paused", 1, {1: float(n)}, group=0) for n in range(3)]
    bracket1 = [TrialView(10 + n, "paused", 3, {3: float(n)}, group=1) for n in range(3)]
    bracket2 = [TrialView(20 + n, "paused", 9, {9: float(n)}, group=2) for n in range(2)]
    decide = functools.partial(schedule.decide, tickets=0, next_number=30)
    assert decide(bracket0 + bracket1).job == Job("resume", trial=10, to_epoch=9)
    assert decide(bracket0).job == Job("resume", trial=0, to_epoch=3)
    assert decide(bracket0 + bracket1 + bracket2).job == Job("resume", trial=10, to_epoch=9)
    # same level, two brackets: bracket 0's rung 3 goes before bracket 1's
    level3 = [TrialView(30 + n, "paused", 3, {1: 0.0, 3: float(n)}, group=0) for n in range(3)]
    assert decide(bracket1 + level3).job == Job("resume", trial=30, to_epoch=9)


@pytest.mark.parametrize("seed", range(4))
def test_promotion_hyperband_many_slots(seed: int) -> None:
    rng = random.Random(seed)
    schedule = PromotionHyperband(1, 27, 3, minimize=seed % 2 == 0, study_name=f"hb{seed}")
    sim = _Sim(schedule, _values(seed), workers=rng.choice([2, 5]),
               tickets=rng.randrange(20, 60), duration=_duration(seed),
               interrupt={rng.randrange(20): 2}, check=_check_promotion).run()
    assert {t.state for t in sim.trials.values()} <= {"complete", "pruned"}
    for trial in sim.trials.values():
        bracket = rungs.bracket_of(f"hb{seed}", trial.number, schedule.budgets)
        assert trial.group == bracket
        assert trial.segments[0][1] in (schedule.ladders()[bracket][0], 2)  # 2: interrupted
    _check_promotion_histories(sim)


# ---------------------------------------------------------------------------------------------
# Finishing the best (finish_best): a finite study trains its best to max_resource


def _at_top(sim: _Sim) -> list[int]:
    return sorted(n for n, t in sim.trials.items() if sim.top in t.values)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("minimize", [True, False], ids=["min", "max"])
def test_finish_best_promotion_asha_the_issues_case(seed: int, workers: int,
                                                     minimize: bool) -> None:
    """n_trials 16 on rungs 1, 3, 9, 27 (eta 3): Algorithm 2 stops at 9 (floor(1 / 3) = 0);
    finish_best trains the best paused trial of rung 9 on to 27, and starts no extra trial."""
    runs = {finish: _Sim(PromotionASHA(1, 27, 3, minimize, finish_best=finish), _values(seed),
                         workers=workers, tickets=16, duration=_duration(seed),
                         check=_check_promotion).run()
            for finish in (False, True)}
    off, on = runs[False], runs[True]
    assert _at_top(off) == [] and max(t.epoch for t in off.trials.values()) == 9
    assert len(_at_top(on)) == 1
    (finished,) = _at_top(on)
    assert on.trials[finished].state == "complete"
    assert on.trials[finished].segments[-1] == (9, 27)  # resumed from its rung-9 checkpoint
    for sim in (off, on):
        assert len(sim.trials) == 16 and sim.tickets == 0  # the tickets, and not one more
        assert sim.decisions[-1].job.kind == "done"
        assert {t.state for t in sim.trials.values()} <= {"complete", "pruned"}
        _check_promotion_histories(sim)
    # the best of rung 9 when finishing began (_check_promotion checked every choice)
    rung9 = {n: t.values[9] for n, t in on.trials.items() if 9 in t.values}
    assert _top(rung9, 1, minimize) == [finished]
    # checkpoints as before: every other trial is pruned, at most one more paused at a time
    assert set(off.pruned_by) - {finished} <= set(on.pruned_by)
    assert any(why.startswith("cannot be promoted") for why in on.pruned_by.values())
    assert on.peak_paused <= off.peak_paused + 1
    if workers == 1:  # one slot: the same jobs until Algorithm 2 is done, then the finishing
        assert on.jobs[: len(off.jobs)] == off.jobs
        assert on.jobs[len(off.jobs):] == [Job("resume", trial=finished, to_epoch=27)]


@pytest.mark.parametrize("study_name", ["s0", "s9"])
@pytest.mark.parametrize("minimize", [True, False], ids=["min", "max"])
def test_finish_best_promotion_hyperband(study_name: str, minimize: bool) -> None:
    """The same across brackets (none of these 16 trials is in the bracket starting at 27)."""
    schedule = PromotionHyperband(1, 27, 3, minimize, study_name=study_name)
    assert all(rungs.bracket_of(study_name, n, schedule.budgets) < 3 for n in range(16))
    runs = {finish: _Sim(PromotionHyperband(1, 27, 3, minimize, study_name=study_name,
                                            finish_best=finish),
                         _values(1), workers=2, tickets=16, duration=_duration(1),
                         check=_check_promotion).run()
            for finish in (False, True)}
    assert _at_top(runs[False]) == [] and len(_at_top(runs[True])) == 1
    for sim in runs.values():
        assert len(sim.trials) == 16 and sim.tickets == 0
        assert {t.state for t in sim.trials.values()} <= {"complete", "pruned"}
        _check_promotion_histories(sim)


@pytest.mark.parametrize("minimize", [True, False], ids=["min", "max"])
def test_finish_best_resumes_the_best_of_the_highest_rung(minimize: bool) -> None:
    sign = 1.0 if minimize else -1.0  # the same order either way
    rung3 = [TrialView(n, "paused", 3, {3: sign * 0.01 * n}) for n in range(2)]  # better values
    rung9 = [TrialView(n, "paused", 9, {9: sign * v}) for n, v in [(5, 0.4), (7, 0.1)]]
    schedule = PromotionASHA(1, 27, 3, minimize)
    decision = schedule.decide(rung3 + rung9, tickets=0, next_number=9)
    # floor(2 / 3) = 0 at both rungs; rung 9 first, and trial 7 is its best (not the lowest)
    assert decision.job == Job("resume", trial=7, to_epoch=27)
    assert decision.prune == (0, 1, 5)  # the others, as before
    paper = PromotionASHA(1, 27, 3, minimize, finish_best=False).decide(
        rung3 + rung9, tickets=0, next_number=9)
    assert paper.job.kind == "done" and paper.prune == (0, 1, 5, 7)
    # ties go to the lower number, NaN ranks last
    tied = [TrialView(n, "paused", 9, {9: v}) for n, v in [(3, 0.2), (2, 0.2)]]
    nan = [TrialView(n, "paused", 9, {9: v}) for n, v in [(2, NAN), (3, 0.7)]]
    assert schedule.decide(tied, tickets=0, next_number=5).job.trial == 2
    assert schedule.decide(nan, tickets=0, next_number=5).job.trial == 3
    # a trial already at 27 (reporting, or COMPLETE): the paper's schedule again
    for top in (TrialView(9, "complete", 27, {27: 0.5}),
                TrialView(9, "running", 27, {27: 0.5}, target=27)):
        trials = rung3 + rung9 + [top]
        assert schedule.decide(trials, tickets=0, next_number=10) == PromotionASHA(
            1, 27, 3, minimize, finish_best=False).decide(trials, tickets=0, next_number=10)


def test_finish_best_across_hyperband_brackets() -> None:
    """The highest rung level over all brackets, then the best value there."""
    schedule = PromotionHyperband(1, 27, 3, study_name="s")  # brackets start at 1, 3, 9, 27
    trials = [TrialView(0, "paused", 3, {1: 0.0, 3: 0.0}, group=0),  # best value, lower rung
              TrialView(1, "paused", 9, {9: 0.5}, group=2),
              TrialView(2, "paused", 9, {3: 0.3, 9: 0.2}, group=1)]
    decision = schedule.decide(trials, tickets=0, next_number=3)
    assert decision.job == Job("resume", trial=2, to_epoch=27) and decision.prune == (0, 1)


def test_finish_best_waits_for_a_trial_that_may_overtake() -> None:
    schedule = PromotionASHA(1, 27, 3)
    rung9 = [TrialView(0, "paused", 9, {9: 0.3})]
    low = TrialView(1, "running", 0, {}, target=1)
    to9 = TrialView(2, "running", 3, {3: 0.1}, target=9)
    to27 = TrialView(3, "running", 9, {9: 0.5}, target=27)
    finish = Job("resume", trial=0, to_epoch=27)
    assert schedule.decide(rung9 + [low], tickets=0, next_number=4).job == finish  # a free slot
    for running in (to9, to27):  # may pause at 9 (better there) or reach 27 itself
        decision = schedule.decide(rung9 + [low, running], tickets=0, next_number=4)
        assert decision.job.kind == "wait" and decision.prune == ()
    # tickets left: a new configuration first, the finisher kept all the same
    decision = schedule.decide(rung9, tickets=1, next_number=4)
    assert decision.job == Job("start", to_epoch=1) and decision.prune == ()
    assert PromotionASHA(1, 27, 3, finish_best=False).decide(
        rung9, tickets=1, next_number=4).prune == (0,)


def test_finish_best_keeps_the_finisher_within_max_paused() -> None:
    # rungs 1, 3, 9 (eta 3). Rung 1: trials 0, 1 best of 8 (both promotable), 2 sixth;
    # rung 3: four pruned trials rank above trial 10, which needs 3 * 5 - 5 = 10 newcomers
    trials = [TrialView(n, "paused", 1, {1: 0.1 * n}) for n in range(3)]
    trials += [TrialView(n, "pruned", 3, {1: 0.15, 3: 0.1}) for n in range(30, 34)]
    trials.append(TrialView(10, "paused", 3, {1: 0.5, 3: 0.9}))
    paper = PromotionASHA(1, 9, 3, max_paused=1, finish_best=False).decide(
        trials, tickets=40, next_number=40)
    assert paper.job == Job("resume", trial=0, to_epoch=3) and paper.prune == (2, 10)
    finish = PromotionASHA(1, 9, 3, max_paused=1).decide(trials, tickets=40, next_number=40)
    assert finish.job == paper.job and finish.prune == (1, 2)  # the finisher counts, stays


@pytest.mark.parametrize("seed", range(20))
def test_finish_best_changes_nothing_without_a_ticket_bound(seed: int) -> None:
    """With a wall-clock budget only (tickets=None), every decision is the paper's."""
    rng = random.Random(seed)
    eta = rng.choice([2, 3])
    ladder = rungs.rung_levels(1, max_resource=27, reduction_factor=eta)
    trials = [t for t in _random_asha_state(rng, ladder, rng.randrange(1, 30))
              if t.state != "complete"]
    max_paused = rng.choice([None, 1, 3])
    promotion = [PromotionASHA(1, 27, eta, max_paused=max_paused, finish_best=finish)
                 for finish in (True, False)]
    decisions = [schedule.decide(trials, tickets=None, next_number=40) for schedule in promotion]
    assert decisions[0] == decisions[1]
    rounds = [dataclasses.replace(t, group=t.number % 2) for t in trials]  # two rounds
    sync = [SyncSuccessiveHalving(1, 27, eta, finish_best=finish) for finish in (True, False)]
    decisions = [schedule.decide(rounds, tickets=None, next_number=40) for schedule in sync]
    assert decisions[0] == decisions[1]


@pytest.mark.parametrize(("make", "tickets"), [
    (lambda finish, minimize: SyncSuccessiveHalving(1, 27, 3, minimize=minimize,
                                                    finish_best=finish), 5),
    (lambda finish, minimize: SyncSuccessiveHalving(2, 10, 2, resume=False, minimize=minimize,
                                                    finish_best=finish), 3),
    (lambda finish, minimize: SyncHyperband(1, 27, 3, minimize=minimize, finish_best=finish), 10),
], ids=["sh-1-27-3", "sh-2-10-2-retrain", "hyperband-1-27-3"])
@pytest.mark.parametrize("minimize", [True, False], ids=["min", "max"])
def test_finish_best_sync_round_cut_short(make: Callable[[bool, bool], Schedule], tickets: int,
                                          minimize: bool) -> None:
    """A lone round cut short keeps floor(held / eta), 0 before the top; finish_best keeps at
    least its best at each rung, which reaches max_resource. No extra trial starts."""
    runs = {finish: _Sim(make(finish, minimize), _values(3), workers=3, tickets=tickets,
                         duration=_duration(3), check=_check_sync).run()
            for finish in (False, True)}
    off, on = runs[False], runs[True]
    schedule = on.schedule
    assert isinstance(schedule, (SyncSuccessiveHalving, SyncHyperband))
    ladder, _ = schedule.round_plan(0)
    assert _at_top(off) == []
    admitted = sorted(on.trials)
    for level in ladder:  # at each rung: the best max(1, floor(held / eta)) of those held
        assert on.at_rung(list(on.trials.values()), level) == admitted, level
        rung = {n: on.trials[n].values[level] for n in admitted}
        kept = max(1, len(admitted) // schedule.reduction_factor)
        admitted = sorted(_top(rung, kept, minimize))
    (finished,) = _at_top(on)
    assert on.trials[finished].state == "complete"
    for sim in (off, on):
        assert len(sim.trials) == tickets and sim.tickets == 0
        assert {t.state for t in sim.trials.values()} <= {"complete", "pruned"}
        assert sim.decisions[-1].job.kind == "done"


# ---------------------------------------------------------------------------------------------
# Stop


def test_stop_schedule() -> None:
    sim = _Sim(StopSchedule(5), _values(0), workers=3, tickets=7, duration=_duration(0),
               interrupt={1: 2, 4: 4}, check=_check_interrupted_first).run()
    assert len(sim.trials) == 7 and all(t.state == "complete" for t in sim.trials.values())
    assert sum(t.trained for t in sim.trials.values()) == 35
    assert [len(sim.trials[n].segments) for n in range(7)] == [1, 2, 1, 1, 2, 1, 1]
    schedule = StopSchedule(5)
    left = [TrialView(0, "paused", 3, {1: 0.0, 2: 0.0, 3: 0.0})]  # paused at a rung before
    assert schedule.decide(left, tickets=0, next_number=1).job == Job("resume", trial=0,
                                                                       to_epoch=5)
    assert schedule.decide([TrialView(0, "running", 1)], tickets=0,
                           next_number=1).job.kind == "done"


def test_the_module_imports_no_ml_library() -> None:
    code = ("import sys, lightning_hpo.schedules\n"
            "heavy = ('torch', 'lightning', 'optuna', 'numpy')\n"
            "print(sorted(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
