"""How rank 0 tells the other DDP ranks which trial runs, what it suggested, and how it ended.

Lightning starts ranks 1..N-1 at the first ``fit`` by re-running the user's script, and keeps
them. The values of the trial whose ``fit`` launched them reach them through their environment
(:data:`TRIAL_ENV`), which also carries the path of rank 0's mailbox (a
``torch.distributed.FileStore`` in a private temporary folder: JSON messages, never pickles, no
port). Rank 0 posts there, numbered:

* ``["trial", study_name, number, index]`` when a trial begins, then ``["param", name, value]``
  for each suggested value (so suggest every hyperparameter before ``trainer.fit``);
* ``["end", index]`` once rank 0's objective returned or raised; every other rank answers how
  the trial ended on it, and rank 0 waits for them (:meth:`LeaderChannel.end_trial`): a trial
  that failed on any rank inside ``fit`` ends ``optimize`` on every rank;
* ``["stop"]`` when an ``optimize`` call ends (rank 0 waits up to :data:`STOP_ACK_S` seconds for
  every rank to take it), so a script may call ``optimize`` again;
* ``["error", {...}]`` when rank 0's ``optimize`` raises: the other ranks raise the same
  exception (or :class:`LeaderError` with its text).

A mailbox, not ``broadcast_object_list``: posting never blocks rank 0, and when rank 0 raises
inside ``fit`` the others wait in an all-reduce it will never join, where a broadcast would hang
both sides. Rank 0 then gives them :data:`ERROR_ACK_S` seconds to take the error, else destroys
its process group, which breaks them out of the collective to read it.
"""

from __future__ import annotations

import atexit
import builtins
import importlib
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from lightning_hpo._scratch import scratch_prefix

__all__ = ["END_WAIT_S", "ERROR_ACK_S", "TRIAL_ENV", "EndOfTrial", "FollowerChannel",
           "LeaderChannel", "LeaderError"]

_logger = logging.getLogger(__name__)

#: Environment variable through which rank 0 hands the current trial to the ranks it launches.
TRIAL_ENV = "LIGHTNING_HPO_DDP_TRIAL"
#: Seconds rank 0 waits for the other ranks to take an error before breaking the process group.
ERROR_ACK_S = 5.0
#: Seconds rank 0 waits, at the end of an ``optimize`` call, for the other ranks to take it (they
#: leave their last ``fit`` with it; a rank gone meanwhile only costs this wait, with a warning).
STOP_ACK_S = 60.0
#: Seconds rank 0 waits, after its objective returned, for the other ranks to end the same
#: trial (they leave the same ``fit``; one that does not is stuck, and ``optimize`` ends).
END_WAIT_S = 60.0
_KEY = "lightning_hpo/ddp/{}/{}"  # kind ("msg" or "ack"), sequence number


class LeaderError(RuntimeError):
    """Rank 0's ``optimize`` ended with an exception this rank cannot rebuild; this is its text."""


def process_group_up() -> bool:
    """True when a ``torch.distributed`` process group of more than one rank is initialised."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


@dataclass(frozen=True)
class EndOfTrial:
    """How the other ranks ended a trial, as rank 0 learned it (:meth:`LeaderChannel.end_trial`).

    ``ended``: every other rank said it ended the trial (none is left in a collective);
    ``failed_rank`` and ``error``: the first rank on which it raised, and what.
    """

    ended: bool = True
    failed_rank: int | None = None
    error: BaseException | None = None


# --------------------------------------------------------------------------------------------
# Exceptions as JSON: rebuilt on the other ranks when their class can be imported there.
# --------------------------------------------------------------------------------------------
def encode_error(error: BaseException) -> dict[str, Any]:
    """The exception's class path, arguments (when JSON can hold them) and text.

    Example::

        >>> encode_error(ValueError("boom"))
        {'type': 'builtins:ValueError', 'args': ['boom'], 'text': 'boom'}
    """
    cls = type(error)
    try:
        args: list[Any] | None = json.loads(json.dumps(list(error.args)))
    except (TypeError, ValueError):
        args = None
    return {"type": f"{cls.__module__}:{cls.__qualname__}", "args": args, "text": str(error)}


def decode_error(data: dict[str, Any]) -> BaseException:
    """The exception :func:`encode_error` described, or a :class:`LeaderError` with its text.

    Example::

        >>> decode_error({"type": "builtins:ValueError", "args": ["boom"], "text": "boom"})
        ValueError('boom')
        >>> decode_error({"type": "nowhere:Gone", "args": None, "text": "lost"})
        LeaderError('nowhere:Gone: lost')
    """
    module_name, _, qualname = str(data.get("type", "")).partition(":")
    text = f"{data.get('type')}: {data.get('text')}"
    try:
        target: Any = builtins if module_name == "builtins" else importlib.import_module(
            module_name
        )
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError, ValueError):
        return LeaderError(text)
    args = data.get("args")
    if not (isinstance(target, type) and issubclass(target, BaseException)) or args is None:
        return LeaderError(text)
    try:
        error = target(*args)
    except Exception:  # a constructor that wants other arguments than its .args
        return LeaderError(text)
    return error if str(error) == data.get("text") else LeaderError(text)


# --------------------------------------------------------------------------------------------
# The mailbox: numbered JSON messages in a FileStore kept by rank 0.
# --------------------------------------------------------------------------------------------
class _Mailbox:
    def __init__(self, store: Any, path: str) -> None:
        self.store = store
        self.path = path

    def post(self, seq: int, message: list[Any]) -> None:
        self.store.set(_KEY.format("msg", seq), json.dumps(message))

    def poll(self, seq: int) -> list[Any] | None:
        key = _KEY.format("msg", seq)
        if not self.store.check([key]):
            return None
        message = json.loads(self.store.get(key))
        self.store.add(_KEY.format("ack", seq), 1)
        return list(message)

    def peek(self, seq: int) -> list[Any] | None:
        """Message ``seq`` if posted, without taking it (no ack)."""
        key = _KEY.format("msg", seq)
        return list(json.loads(self.store.get(key))) if self.store.check([key]) else None

    def acks(self, seq: int) -> int:
        return int(self.store.add(_KEY.format("ack", seq), 0))

    def report_end(self, index: int, rank: int, error: BaseException | None) -> None:
        """Rank ``rank`` ended trial ``index`` (failed with ``error``: kept, first of all)."""
        if error is not None:
            record = json.dumps({"rank": rank, "error": encode_error(error)})
            self.store.compare_set(_KEY.format("failed", index), "", record)
        self.store.add(_KEY.format("ended", index), 1)

    def leave(self) -> None:
        """A rank other than 0 leaves the job (its trial failed): it takes no more messages."""
        self.store.add(_KEY.format("left", 0), 1)

    def left(self) -> int:
        return int(self.store.add(_KEY.format("left", 0), 0))

    def ended(self, index: int) -> int:
        return int(self.store.add(_KEY.format("ended", index), 0))

    def failure(self, index: int) -> tuple[int, BaseException] | None:
        key = _KEY.format("failed", index)
        if not self.store.check([key]):
            return None
        record = json.loads(self.store.get(key))
        return int(record["rank"]), decode_error(record["error"])


def _host_mailbox() -> _Mailbox:
    """A mailbox in a private temporary folder, removed when this process exits.

    A ``FileStore``, not a ``TCPStore``: Lightning's launcher starts the other ranks on this
    machine, so no port needs to listen.
    """
    from torch.distributed import FileStore

    folder = tempfile.mkdtemp(prefix=scratch_prefix("ddp"))  # mode 0700
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = os.path.join(folder, "mailbox")
    return _Mailbox(FileStore(path, -1), path)


def _join_mailbox(path: str) -> _Mailbox:
    from torch.distributed import FileStore

    if not os.path.exists(path):
        raise RuntimeError(f"lightning_hpo: rank 0's mailbox {path} is gone; did rank 0 exit?")
    return _Mailbox(FileStore(path, -1), path)


# --------------------------------------------------------------------------------------------
# Rank 0.
# --------------------------------------------------------------------------------------------
class LeaderChannel:
    """Rank 0's side for one ``optimize`` call.

    The mailbox and its sequence numbers belong to the process, so that every ``optimize`` call
    of a script (on one study or several) continues the one stream the other ranks read. A trial
    that begins before the other ranks exist travels in the environment; once the process group
    is up, trials travel through the mailbox.
    """

    _mailbox: _Mailbox | None = None  # one per process, made at the first trial
    _sent = 0  # messages posted by this process so far
    _begun = 0  # trials begun by this process so far: each one's index

    def __init__(self) -> None:
        self._env: dict[str, Any] | None = None
        self._index: int | None = None  # the trial in progress

    @classmethod
    def _post(cls, message: list[Any]) -> int:
        if cls._mailbox is None:
            raise RuntimeError(
                "lightning_hpo: the DDP ranks were started before the first trial of a study made "
                "with lightning_hpo.create_study; run no DDP fit before study.optimize"
            )
        seq = cls._sent
        cls._mailbox.post(seq, message)
        cls._sent += 1
        return seq

    def begin_trial(self, number: int, study_name: str | None = None) -> None:
        """Announce trial ``number`` of ``study_name`` to the other ranks."""
        self._index = LeaderChannel._begun
        LeaderChannel._begun += 1
        if process_group_up():
            self._env = None
            self._post(["trial", study_name, number, self._index])
            return
        if LeaderChannel._mailbox is None:
            LeaderChannel._mailbox = _host_mailbox()
        self._env = {"mailbox": LeaderChannel._mailbox.path, "next": LeaderChannel._sent,
                     "study": study_name, "number": number, "index": self._index, "params": {}}
        os.environ[TRIAL_ENV] = json.dumps(self._env)

    def end_trial(self, failed: bool) -> EndOfTrial:
        """After rank 0's objective returned (or raised: ``failed``), end the trial on every
        rank and learn how it ended there.

        Posts ``["end", index]`` (a rank still waiting for a suggested value leaves the trial),
        then waits until every other rank has said it ended the trial: :data:`END_WAIT_S`
        seconds when rank 0's objective returned (they leave the same ``fit``), only
        :data:`ERROR_ACK_S` when it raised (a rank that does not answer by then waits in a
        collective rank 0 left). Nothing to wait for where the other ranks were never
        started (no process group: the trial ended before its ``fit``).
        """
        index, self._index = self._index, None
        mailbox = LeaderChannel._mailbox
        if index is None or mailbox is None or not process_group_up():
            return EndOfTrial()
        import torch.distributed as dist

        others = dist.get_world_size() - 1
        self._post(["end", index])
        deadline = time.monotonic() + (ERROR_ACK_S if failed else END_WAIT_S)
        while mailbox.ended(index) < others and time.monotonic() < deadline:
            time.sleep(0.01)
        failure = mailbox.failure(index)
        ended = mailbox.ended(index) >= others
        if failure is None:
            return EndOfTrial(ended)
        return EndOfTrial(ended, failure[0], failure[1])

    def share_param(self, name: str, value: Any) -> None:
        """Hand a suggested value to the other ranks."""
        if self._env is None:
            self._post(["param", name, value])
        else:
            self._env["params"][name] = value
            os.environ[TRIAL_ENV] = json.dumps(self._env)

    def finish(self, error: BaseException | None = None, *, wait: bool = True) -> None:
        """End an ``optimize`` call: the other ranks return from theirs, or raise ``error``.

        Without an error, waits (``wait``) until every other rank has taken the end, at most
        :data:`STOP_ACK_S` seconds. The launcher's worker does not wait: it kills its other
        ranks itself when it leaves, and one of them may be stuck in a collective of an
        interrupted trial.

        With an error, waits until every other rank has taken it (or has left the job, after
        its trial failed: :meth:`FollowerChannel.leave`); a rank that does not within
        :data:`ERROR_ACK_S` seconds waits in a collective that this rank left, so the process
        group is destroyed to free it, and the wait is repeated once.
        """
        os.environ.pop(TRIAL_ENV, None)
        if not process_group_up():
            return
        if error is None:
            # Wait until every rank took it: once this process exits, its mailbox folder is
            # deleted, and a rank still to read it would wait on the deleted file for ever.
            import torch.distributed as dist

            others = dist.get_world_size() - 1
            seq = self._post(["stop"])
            if wait and not self._wait_acks(seq, others, STOP_ACK_S):
                _logger.warning("other ranks did not take the end of optimize within %.0f s",
                                STOP_ACK_S)
            return
        import torch.distributed as dist

        others = dist.get_world_size() - 1
        seq = self._post(["error", encode_error(error)])
        if self._wait_acks(seq, others):
            return
        _logger.warning("other ranks did not take rank 0's error within %.0f s (stuck in a "
                        "collective); destroying the process group to release them", ERROR_ACK_S)
        dist.destroy_process_group()
        self._wait_acks(seq, others)

    @classmethod
    def _wait_acks(cls, seq: int, expected: int, seconds: float = ERROR_ACK_S) -> bool:
        if cls._mailbox is None:
            return False
        deadline = time.monotonic() + seconds
        while cls._mailbox.acks(seq) + cls._mailbox.left() < expected:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True


# --------------------------------------------------------------------------------------------
# Ranks 1..N-1.
# --------------------------------------------------------------------------------------------
class FollowerChannel:
    """A follower rank's side: one per process, reading rank 0's messages in order."""

    _current: FollowerChannel | None = None

    def __init__(self, mailbox: _Mailbox, next_seq: int) -> None:
        self._mailbox = mailbox
        self._next = next_seq
        self._leader_pid = os.getppid()  # Lightning starts this rank from rank 0's process

    @classmethod
    def first_message(cls) -> tuple[list[Any], dict[str, Any] | None]:
        """The message that begins an ``optimize`` call, and preset values when it came by env.

        The first call in a process reads the trial whose ``fit`` launched this rank from the
        environment. Every later call (a second ``optimize`` on the same or another study)
        reads the mailbox: the environment still holds that first trial and must not be replayed.
        """
        if cls._current is not None:
            return cls._current.receive(), None
        raw = os.environ.get(TRIAL_ENV)
        if raw is None:
            raise RuntimeError(
                f"lightning_hpo: this process is a DDP rank other than 0 but {TRIAL_ENV} is not "
                "set; follower ranks must be started by rank 0's Lightning launcher "
                '(Trainer(strategy="ddp")) from a study made with lightning_hpo.create_study'
            )
        first = json.loads(raw)
        cls._current = cls(_join_mailbox(first["mailbox"]), int(first["next"]))
        return (["trial", first.get("study"), first["number"], first.get("index")],
                dict(first["params"]))

    @classmethod
    def current(cls) -> FollowerChannel:
        if cls._current is None:
            raise RuntimeError("lightning_hpo: no trial has reached this rank yet")
        return cls._current

    def leader_error(self) -> BaseException | None:
        """Rank 0's error, when rank 0 has already ended ``optimize`` with one (its next
        messages are ``end`` then ``error``, or ``error``): a trial that raised here because
        rank 0 left the collective (it destroys its process group to free this rank) failed
        there first. None, reading nothing, otherwise."""
        if not self._leader_here():
            return None
        seq = self._next
        peeked = self._mailbox.peek(seq)
        if peeked is not None and peeked[0] == "end":
            seq += 1
            peeked = self._mailbox.peek(seq)
        if peeked is None or peeked[0] != "error":
            return None
        while self._next <= seq:  # take them, as receive() would
            self.receive()
        return decode_error(peeked[1])

    def await_leader_error(self, seconds: float) -> BaseException | None:
        """:meth:`leader_error`, waiting for it at most ``seconds``: after this rank's trial
        raised and it told rank 0, rank 0 ends ``optimize`` with an error at once unless it
        waits for this rank in a collective (then only this rank's exit frees it)."""
        deadline = time.monotonic() + seconds
        while True:
            error = self.leader_error()
            if error is not None or time.monotonic() >= deadline:
                return error
            time.sleep(0.02)

    def report_end(self, index: int | None, error: BaseException | None) -> None:
        """Tell rank 0 that this rank ended trial ``index`` (failed, with ``error``); None
        (a rank 0 older than the trial index): nothing to say."""
        if index is None or not self._leader_here():
            return
        rank = int(os.environ.get("RANK") or os.environ.get("LOCAL_RANK") or 0)
        self._mailbox.report_end(index, rank, error)

    def leave(self) -> None:
        """This rank leaves the job (its trial failed): rank 0 waits for it no more."""
        if self._leader_here():
            self._mailbox.leave()

    def _leader_here(self) -> bool:
        """Rank 0 and its mailbox are still there: a FileStore whose file is gone waits for
        ever, so every read checks first."""
        return os.getppid() == self._leader_pid and os.path.exists(self._mailbox.path)

    def receive(self) -> list[Any]:
        """The next message from rank 0, waiting as long as rank 0 lives."""
        pause = 0.001
        while True:
            if not self._leader_here():
                raise RuntimeError("lightning_hpo: rank 0 exited; this rank stops too")
            message = self._mailbox.poll(self._next)
            if message is not None:
                break
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        self._next += 1
        return message
