"""What lightning_hpo assumes of Optuna's internals, checked against the installed Optuna.

Every assumption that ``lightning_hpo._optuna`` names is tested here by its behaviour where it
has one (a sampler really sees one bracket; a claim really succeeds once), so that an Optuna
release that changes one fails here, by name, rather than deep in a pruning decision. The code
raises :class:`~lightning_hpo._optuna.OptunaContractError` where it can tell at run time; the
tests of those errors are at the end.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
import pytest
import sqlalchemy as sa
from conftest import StorageSpec
from optuna.storages import InMemoryStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from lightning_hpo._optuna import (
    BRACKET_HOOK,
    STUDIES_TABLE,
    STUDY_ID_COLUMN,
    HyperbandBase,
    OptunaContractError,
    appends_study_system_attrs,
    backend_of,
    check_studies_table,
    claim_waiting_trial,
    enqueue_trials,
    set_trial_user_attrs,
    set_user_attrs,
    storage_of,
    study_id_of,
    trial_id_of,
)
from lightning_hpo.pruners import ASHAPruner, HyperbandPruner

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_supported_optuna_major() -> None:
    # pyproject pins optuna>=4.0,<6: the versions this contract was written against.
    assert 4 <= int(optuna.__version__.split(".")[0]) < 6


# -- Study._storage, Study._study_id, Trial._trial_id ---------------------------------------


def test_ids_and_storage_are_the_ones_optuna_uses(storage: StorageSpec) -> None:
    study = optuna.create_study(storage=storage.make(), study_name="ids")
    first, second = study.ask(), study.ask()
    assert storage_of(study).get_study_id_from_name("ids") == study_id_of(study)
    for trial in (first, second):
        frozen = storage_of(study).get_trial(trial_id_of(trial))
        assert (frozen.number, trial_id_of(frozen)) == (trial.number, trial_id_of(trial))
    assert trial_id_of(first) != trial_id_of(second)
    # what is written through them is what the public API reads
    storage_of(study).set_trial_user_attr(trial_id_of(second), "k", 1)
    assert study.get_trials()[1].user_attrs == {"k": 1}


class _Probe(HyperbandBase):
    """A HyperbandBase with two brackets by parity, recording what Optuna hands it."""

    def __init__(self) -> None:
        super().__init__(1, 9, 3)
        self.hook_calls: list[tuple[str, int]] = []
        self.seen: list[dict[str, Any]] = []

    def bracket_of(self, study_name: str, trial_number: int) -> int:
        self.hook_calls.append((study_name, trial_number))
        return trial_number % 2

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        self.seen.append({
            "storage": storage_of(study), "study_id": study_id_of(study),
            "trial_id": trial_id_of(trial), "name": study.study_name,
            "direction": study.direction, "n_directions": len(study.directions),
        })
        return False


def test_a_hyperband_pruner_is_handed_a_study_our_helpers_can_read(storage: StorageSpec) -> None:
    # Trial.should_prune hands a HyperbandPruner Optuna's bracket study, which must still
    # expose what the pruners read: storage, study id, name and direction.
    probe = _Probe()
    study = optuna.create_study(storage=storage.make(), study_name="probe", pruner=probe,
                                direction="maximize")
    trial = study.ask()
    trial.report(1.0, 1)
    assert trial.should_prune() is False
    (seen,) = probe.seen
    assert seen == {
        "storage": storage_of(study), "study_id": study_id_of(study),
        "trial_id": trial_id_of(trial), "name": "probe",
        "direction": optuna.study.StudyDirection.MAXIMIZE, "n_directions": 1,
    }


# -- HyperbandPruner._get_bracket_id: how samplers see one bracket ----------------------------


class _RecordingSampler(optuna.samplers.RandomSampler):
    def __init__(self) -> None:
        super().__init__(seed=0)
        self.views: list[tuple[int, list[int]]] = []

    def sample_independent(
        self, study: optuna.Study, trial: optuna.trial.FrozenTrial, name: str,
        distribution: optuna.distributions.BaseDistribution,
    ) -> Any:
        self.views.append((trial.number, [t.number for t in study.get_trials(deepcopy=False)]))
        return super().sample_independent(study, trial, name, distribution)


def test_samplers_see_the_bracket_our_hook_names() -> None:
    assert callable(getattr(optuna.pruners.HyperbandPruner, BRACKET_HOOK))
    probe, sampler = _Probe(), _RecordingSampler()
    study = optuna.create_study(study_name="parity", pruner=probe, sampler=sampler)
    for _ in range(8):
        trial = study.ask()
        trial.suggest_float("x", 0.0, 1.0)
        study.tell(trial, 0.0)
    assert len(sampler.views) == 8
    for number, seen in sampler.views:  # only trials of the same parity: our hook decided
        assert seen and all(other % 2 == number % 2 for other in seen), (number, seen)
    assert {name for name, _ in probe.hook_calls} == {"parity"}  # read on the bracket study


def test_our_hyperband_pruner_is_optunas_and_answers_the_hook() -> None:
    pruner = HyperbandPruner(1, 27, 3)
    assert isinstance(pruner, optuna.pruners.HyperbandPruner)
    study = optuna.create_study(study_name="hb", pruner=pruner)
    trial = study.ask()
    frozen = study.get_trials()[0]
    hook = getattr(pruner, BRACKET_HOOK)
    assert hook(study, frozen) == pruner.bracket_of("hb", trial.number)


# -- _CachedStorage._backend --------------------------------------------------------------


def test_backend_is_the_rdb_storage_under_optunas_cache(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    study = optuna.create_study(storage=url)
    front, backend = storage_of(study), backend_of(study)
    assert isinstance(backend, RDBStorage) and not isinstance(front, RDBStorage)
    assert str(backend.engine.url) == url
    # the cache really forwards to it: a write through the cache is in the backend
    front.set_study_system_attr(study_id_of(study), "k", 1)
    assert backend.get_study_system_attrs(study_id_of(study)) == {"k": 1}
    rdb = RDBStorage(f"sqlite:///{tmp_path / 'b.db'}")  # an RDBStorage object is wrapped too
    assert backend_of(optuna.create_study(storage=rdb)) is rdb


def test_backend_of_other_storages_is_the_storage(tmp_path: Path) -> None:
    for made in (InMemoryStorage(), JournalStorage(JournalFileBackend(str(tmp_path / "j")))):
        study = optuna.create_study(storage=made)
        assert storage_of(study) is made and backend_of(study) is made


# -- Optuna's RDB table of studies ----------------------------------------------------------


def test_studies_table_and_its_key(tmp_path: Path) -> None:
    from optuna.storages._rdb import models

    assert models.StudyModel.__tablename__ == STUDIES_TABLE
    assert [c.name for c in models.StudyModel.__table__.primary_key] == [STUDY_ID_COLUMN]
    storage = RDBStorage(f"sqlite:///{tmp_path / 'a.db'}")
    check_studies_table(storage.engine)  # as made in a real database
    kept = optuna.create_study(storage=storage, study_name="kept")
    gone = optuna.create_study(storage=storage, study_name="gone")
    query = sa.text(f"SELECT {STUDY_ID_COLUMN} FROM {STUDIES_TABLE} ORDER BY 1")
    with storage.engine.connect() as conn:
        assert [row[0] for row in conn.execute(query)] == [study_id_of(kept), study_id_of(gone)]
    # deleting a study deletes its row, which fires our records' cascade and trigger
    optuna.delete_study(study_name="gone", storage=storage)
    with storage.engine.connect() as conn:
        assert [row[0] for row in conn.execute(query)] == [study_id_of(kept)]


# -- study system attributes: insertion order, new keys last ----------------------------------


def _ordered_storages(tmp_path: Path) -> list[tuple[Any, Any]]:
    """(writer, reader) pairs: in-memory (one object), a journal file read by a second handle."""
    memory = InMemoryStorage()
    path = str(tmp_path / "order.journal")
    return [(memory, memory),
            (JournalStorage(JournalFileBackend(path)), JournalStorage(JournalFileBackend(path)))]


def test_study_system_attrs_keep_insertion_order_new_keys_last(tmp_path: Path) -> None:
    for writer, reader in _ordered_storages(tmp_path):
        assert appends_study_system_attrs(writer) and appends_study_system_attrs(reader)
        study_id = writer.create_new_study([optuna.study.StudyDirection.MINIMIZE], "order")
        for key in ("z", "a", "m"):
            writer.set_study_system_attr(study_id, key, key)
        assert list(reader.get_study_system_attrs(study_id)) == ["z", "a", "m"]
        writer.set_study_system_attr(study_id, "a", "again")  # an update keeps its place
        writer.set_study_system_attr(study_id, "b", "b")  # a new key goes last
        attrs = reader.get_study_system_attrs(study_id)
        assert list(attrs.items()) == [("z", "z"), ("a", "again"), ("m", "m"), ("b", "b")]


def test_study_system_attrs_are_a_snapshot_replaced_on_write(tmp_path: Path) -> None:
    # Not needed for correctness (the rung store retries a dict changed under it) but for
    # speed: a read hands out the storage's own dict, and a write replaces it, never edits it.
    for writer, reader in _ordered_storages(tmp_path):
        study_id = writer.create_new_study([optuna.study.StudyDirection.MINIMIZE], "snap")
        writer.set_study_system_attr(study_id, "a", 1)
        before = reader.get_study_system_attrs(study_id)
        assert reader.get_study_system_attrs(study_id) is before  # no copy per read
        writer.set_study_system_attr(study_id, "b", 2)
        assert before == {"a": 1} and reader.get_study_system_attrs(study_id) == {"a": 1, "b": 2}


def test_other_storages_are_not_assumed_ordered(tmp_path: Path) -> None:
    assert not appends_study_system_attrs(RDBStorage(f"sqlite:///{tmp_path / 'a.db'}"))


# -- claiming a WAITING trial ---------------------------------------------------------------


def test_a_waiting_trial_is_claimed_once(storage: StorageSpec) -> None:
    study = optuna.create_study(storage=storage.make(), study_name="claims")
    study.enqueue_trial({"x": 0.25})
    (ticket,) = study.get_trials()
    assert ticket.state == TrialState.WAITING
    other = storage.make()  # another handle: another process, for shareable storages
    assert storage_of(study).set_trial_state_values(trial_id_of(ticket), TrialState.RUNNING)
    assert not other.set_trial_state_values(trial_id_of(ticket), TrialState.RUNNING)
    storage_of(study).set_trial_state_values(trial_id_of(ticket), TrialState.COMPLETE, [1.0])
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        other.set_trial_state_values(trial_id_of(ticket), TrialState.RUNNING)


def test_claim_waiting_trial_is_ask_without_a_new_trial(storage: StorageSpec) -> None:
    study = optuna.create_study(storage=storage.make(), study_name="tickets")
    study.enqueue_trial({"x": 0.25})
    study.enqueue_trial({})
    first = claim_waiting_trial(study)
    assert first is not None and first.number == 0
    assert first.suggest_float("x", 0.0, 1.0) == 0.25  # the enqueued value, as ask() gives it
    second = claim_waiting_trial(study)
    assert second is not None and second.number == 1
    assert 0.0 <= second.suggest_float("x", 0.0, 1.0) <= 1.0
    assert claim_waiting_trial(study) is None  # nothing waits: no new trial either
    states = [t.state for t in study.get_trials()]
    assert states == [TrialState.RUNNING, TrialState.RUNNING]
    study.tell(first, 1.0)
    study.tell(second, 2.0)
    assert [t.params for t in study.get_trials()][0] == {"x": 0.25}


@pytest.mark.parametrize("kind", ["inmemory", "journal"])
def test_racing_claims_take_each_ticket_once(kind: str, tmp_path: Path) -> None:
    path = str(tmp_path / "race.journal")

    def open_storage() -> Any:
        return memory if kind == "inmemory" else JournalStorage(JournalFileBackend(path))

    memory = InMemoryStorage()
    study = optuna.create_study(storage=open_storage(), study_name="race")
    for _ in range(6):
        study.enqueue_trial({})
    studies = [optuna.load_study(study_name="race", storage=open_storage()) for _ in range(6)]
    claimed: list[int] = []
    lock, start = threading.Lock(), threading.Barrier(len(studies))

    def claim(handle: optuna.Study) -> None:
        start.wait()
        while (trial := claim_waiting_trial(handle)) is not None:
            with lock:
                claimed.append(trial.number)

    threads = [threading.Thread(target=claim, args=(s,)) for s in studies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(claimed) == list(range(6)), Counter(claimed)
    assert len(study.get_trials()) == 6


# -- several user attributes in one write --------------------------------------------------

ATTRS = {"launcher_pid": 41, "host": "node-1", "slot": 0, "segments": [{"start": 1.5}],
         "paused": None, "slot_again": {"nested": [1, 2]}}


def test_attributes_set_at_once_read_as_if_set_one_by_one(storage: StorageSpec) -> None:
    study = optuna.create_study(storage=storage.make(), study_name="attrs")
    batched, single = study.ask(), study.ask()
    single.set_user_attr("slot", 5)  # a key written before keeps its place and gets the new value
    batched.set_user_attr("slot", 5)
    set_trial_user_attrs(storage_of(study), trial_id_of(batched), ATTRS)
    for key, value in ATTRS.items():
        single.set_user_attr(key, value)
    other = optuna.load_study(study_name="attrs", storage=storage.make())  # another process
    for handle in (study, other):
        first, second = handle.get_trials(deepcopy=False)
        assert first.user_attrs == second.user_attrs == {"slot": 0, **ATTRS}
        assert list(first.user_attrs) == list(second.user_attrs)


def test_a_live_trial_holds_the_attributes_set_at_once(storage: StorageSpec) -> None:
    study = optuna.create_study(storage=storage.make(), study_name="live")
    trial = study.ask()
    set_user_attrs(trial, {"seed": 3, "log_dir": "runs/s/trial_00000"})
    set_user_attrs(trial, {})  # nothing to write
    assert trial.user_attrs == {"seed": 3, "log_dir": "runs/s/trial_00000"}
    assert study.get_trials()[0].user_attrs == trial.user_attrs


def test_a_finished_trial_refuses_attributes_set_at_once(storage: StorageSpec) -> None:
    study = optuna.create_study(storage=storage.make(), study_name="finished")
    trial = study.ask()
    study.tell(trial, 1.0)
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        set_trial_user_attrs(storage_of(study), trial_id_of(trial), {"end_time": 2.0, "x": 1})
    assert optuna.load_study(study_name="finished", storage=storage.make()).trials[0] \
        .user_attrs == {}


def test_a_journal_gets_one_append_for_all_the_attributes(tmp_path: Path) -> None:
    path = tmp_path / "one.journal"
    study = optuna.create_study(storage=JournalStorage(JournalFileBackend(str(path))))
    trial = study.ask()
    backend = storage_of(study)._backend  # type: ignore[attr-defined]
    appends: list[int] = []
    append = backend.append_logs
    backend.append_logs = lambda logs: (appends.append(len(logs)), append(logs))[1]
    lines = path.read_text().count("\n")
    set_user_attrs(trial, ATTRS)
    assert appends == [len(ATTRS)]
    assert path.read_text().count("\n") == lines + len(ATTRS)  # Optuna's own line per key


def test_rdb_writes_all_the_attributes_in_one_transaction(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'one.db'}"
    study = optuna.create_study(storage=url)
    trial = study.ask()
    engine = backend_of(study).engine  # type: ignore[attr-defined]
    commits: list[int] = []
    sa.event.listen(engine, "commit", lambda connection: commits.append(1))
    set_user_attrs(trial, ATTRS)
    assert len(commits) == 1
    one_by_one = study.ask()
    commits.clear()
    for key, value in ATTRS.items():
        one_by_one.set_user_attr(key, value)
    assert len(commits) == len(ATTRS)  # what it saves: a commit (an fsync on SQLite) a key


def test_a_trial_stand_in_gets_its_attributes_one_by_one() -> None:
    class StandIn:  # a DDP follower's trial: it has set_user_attr, no storage
        def __init__(self) -> None:
            self.calls: list[tuple[str, Any]] = []

        def set_user_attr(self, key: str, value: Any) -> None:
            self.calls.append((key, value))

    stand_in = StandIn()
    set_user_attrs(stand_in, {"a": 1, "b": 2})
    assert stand_in.calls == [("a", 1), ("b", 2)]


# -- a failed assumption is a clear error ---------------------------------------------------


def test_a_missing_private_attribute_names_optuna_and_what_is_gone() -> None:
    with pytest.raises(OptunaContractError) as error:
        storage_of(object())  # type: ignore[arg-type]
    message = str(error.value)
    assert f"optuna {optuna.__version__}" in message and "`Study._storage` is gone" in message
    with pytest.raises(OptunaContractError, match="_trial_id"):
        trial_id_of(object())  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["_replay_result", "_sync_with_backend", "_backend"])
def test_a_journal_without_what_batched_writes_use_is_an_error(tmp_path: Path, name: str) -> None:
    storage = JournalStorage(JournalFileBackend(str(tmp_path / "gone.journal")))
    trial = optuna.create_study(storage=storage).ask()
    storage.__dict__.pop(name, None)
    if name == "_sync_with_backend":  # a method: hide it on the instance's class
        broken = type("Broken", (JournalStorage,), {name: property(_gone)})
        storage.__class__ = broken
    with pytest.raises(OptunaContractError, match=f"JournalStorage.{name}` is gone"):
        set_user_attrs(trial, {"a": 1})


def _gone(self: object) -> None:
    raise AttributeError("gone")


def test_a_cache_without_its_backend_is_an_error(tmp_path: Path) -> None:
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'a.db'}")
    cache = storage_of(study)
    del cache._backend  # type: ignore[attr-defined]  # as if Optuna renamed it
    with pytest.raises(OptunaContractError, match="_CachedStorage._backend"):
        backend_of(study)


def test_a_database_without_optunas_studies_table_is_an_error(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    with pytest.raises(OptunaContractError, match="no table 'studies'"):
        check_studies_table(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {STUDIES_TABLE} (id INTEGER PRIMARY KEY)")
    with pytest.raises(OptunaContractError, match=r"keyed by \['id'\]"):
        check_studies_table(engine)


def test_a_hyperband_pruner_without_the_hook_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(optuna.pruners.HyperbandPruner, BRACKET_HOOK)
    # our subclass still defines the hook, but Optuna would no longer call it
    with pytest.raises(OptunaContractError, match=BRACKET_HOOK):
        HyperbandPruner(1, 27, 3)


class _ShuffledStorage(InMemoryStorage):
    """An in-memory storage whose system attributes come back newest first."""

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        return dict(reversed(super().get_study_system_attrs(study_id).items()))


def test_attrs_out_of_insertion_order_are_an_error_not_a_wrong_count() -> None:
    study = optuna.create_study(storage=_ShuffledStorage(),
                                pruner=ASHAPruner(1, max_resource=8, reduction_factor=2))
    decisions = []
    with pytest.raises(OptunaContractError, match="insertion order"):
        for value in (1.0, 2.0, 3.0, 4.0):
            trial = study.ask()
            trial.report(value, 1)
            decisions.append(trial.should_prune())
    assert decisions  # the first decisions, before a second record was read, went through


def test_the_grpc_proxy_pieces_we_build_on_are_there(tmp_path: Path) -> None:
    """``lightning_hpo.proxy`` builds Optuna's servicer into its own server, and the client side
    calls our service on ``GrpcStorageProxy._channel`` and finds the address in ``_host`` and
    ``_port``; Optuna's servicer maps a finished trial's update to FAILED_PRECONDITION, which
    its client raises as ``UpdateFinishedTrialError`` (what a claim relies on)."""
    pytest.importorskip("grpc")
    import grpc
    from optuna.storages import GrpcStorageProxy
    from optuna.storages._grpc.auto_generated import api_pb2_grpc
    from optuna.storages._grpc.servicer import OptunaStorageProxyService

    from lightning_hpo.proxy import serve

    assert callable(api_pb2_grpc.add_StorageServiceServicer_to_server)
    assert callable(OptunaStorageProxyService)
    server, port = serve(f"sqlite:///{tmp_path / 'p.db'}", host="127.0.0.1", port=0)
    try:
        client = GrpcStorageProxy(host="127.0.0.1", port=port)
        assert isinstance(client._channel, grpc.Channel)
        assert (client._host, client._port) == ("127.0.0.1", port)
        study = optuna.create_study(storage=client)
        trial = study.ask()
        study.tell(trial, 1.0)
        with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
            client.set_trial_state_values(trial._trial_id, state=TrialState.RUNNING)
        client.close()
    finally:
        server.stop(None)


def test_the_grpc_client_pieces_proxy_storage_replaces_are_there() -> None:
    """``ProxyStorage`` (a proxy's token and TLS) is Optuna's ``GrpcStorageProxy`` whose
    ``_setup`` builds the channel on ours: Optuna's ``__init__`` must call ``_setup`` (also on
    unpickling: ``__setstate__``), which sets ``_channel``, ``_stub`` and ``_cache`` from
    ``api_pb2_grpc.StorageServiceStub`` and ``client.GrpcClientCache``; and ``close``,
    ``wait_server_ready`` read only ``_channel``."""
    pytest.importorskip("grpc")
    import inspect

    from optuna.storages import GrpcStorageProxy
    from optuna.storages._grpc.auto_generated import api_pb2_grpc
    from optuna.storages._grpc.client import GrpcClientCache

    assert callable(api_pb2_grpc.StorageServiceStub) and callable(GrpcClientCache)
    setup = inspect.getsource(GrpcStorageProxy._setup)
    assert all(name in setup for name in ("self._channel", "self._stub", "self._cache")), setup
    assert "self._setup()" in inspect.getsource(GrpcStorageProxy.__init__)
    assert "self._setup()" in inspect.getsource(GrpcStorageProxy.__setstate__)
    assert "_channel" in inspect.getsource(GrpcStorageProxy.close)


# -- enqueue_trials: what enqueue_trial makes, in one write ---------------------------------


def test_enqueue_trials_makes_the_trials_enqueue_trial_makes(storage: StorageSpec) -> None:
    queue: list[dict[str, Any]] = [{"x": 0.25}, {}, {}]
    made = []
    for name, batch in (("one", False), ("all", True)):
        study = optuna.create_study(storage=storage.make(), study_name=name)
        if batch:
            enqueue_trials(storage_of(study), study_id_of(study), queue)
        else:
            for params in queue:
                study.enqueue_trial(params)
        made.append([(t.number, t.state, t.params, t.system_attrs, t.user_attrs,
                      t.datetime_start) for t in study.get_trials(deepcopy=False)])
        trial = study.ask()  # the first ticket, its parameter fixed
        assert (trial.number, trial.suggest_float("x", 0.0, 1.0)) == (0, 0.25)
    assert made[0] == made[1]
    with pytest.raises(KeyError):
        enqueue_trials(storage_of(study), study_id_of(study) + 99, queue)
