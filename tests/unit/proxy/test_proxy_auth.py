"""The gRPC proxy on a shared network: its token (``--token-file``; clients'
``?token_file=``, ``LIGHTNING_HPO_PROXY_TOKEN``, ``LIGHTNING_HPO_PROXY_TOKEN_FILE``) and TLS
(``--tls-cert``/``--tls-key``; clients' ``?tls_ca=``, ``LIGHTNING_HPO_PROXY_TLS_CA``), with real
proxy processes on 127.0.0.1: no token, a wrong token and the right one on both services; TLS
with and without the certificate; the refusals of the proxy's CLI; the token never printed,
never in a URL, never pickled."""

from __future__ import annotations

import pickle
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest
from helpers.support import config_file, env

from lightning_hpo.errors import ConfigError
from lightning_hpo.proxy import __main__ as proxy_cli
from lightning_hpo.proxy import serve
from lightning_hpo.proxy._auth import is_loopback
from lightning_hpo.storage import StorageSpec, mask, storage_outage
from lightning_hpo.storage._proxy_client import (
    TLS_CA_ENV,
    TOKEN_ENV,
    TOKEN_FILE_ENV,
    ProxyAuth,
    ProxyStorage,
    proxy_client,
)

grpc = pytest.importorskip("grpc")

TOKEN = "7f3a9c2e51d84b06a1e2c3d4e5f60718"  # the proxies' token: no output may show it
WRONG = "0123456789abcdef0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_token_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (TOKEN_ENV, TOKEN_FILE_ENV, TLS_CA_ENV):
        monkeypatch.delenv(name, raising=False)


def secret_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


# ------------------------------------------------------------------------------------------
# Pure: which hosts are loopback, what a grpc:// spec may carry, masks.


@pytest.mark.parametrize(("host", "loopback"), [
    ("localhost", True), ("127.0.0.1", True), ("127.8.0.1", True), ("::1", True),
    ("[::1]", True), ("0.0.0.0", False), ("::", False), ("10.0.0.5", False),
    ("node07.cluster", False),
], ids=lambda value: str(value))
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_grpc_spec_names_its_token_file_and_certificate() -> None:
    spec = StorageSpec("grpc://proxy:13001?token_file=~/.hpo-token&tls_ca=/etc/ca.pem")
    assert spec.address == ("proxy", 13001) and spec.kind == "grpc"
    assert spec.proxy_auth == ProxyAuth(token_file="~/.hpo-token", tls_ca="/etc/ca.pem")
    assert StorageSpec("grpc://proxy:13001").proxy_auth == ProxyAuth()


@pytest.mark.parametrize(("query", "why"), [
    ("x=1", "option 'x': unknown"),
    ("token_file=a&token_file=b", "option 'token_file': given twice"),
    ("tls_ca=", "option 'tls_ca': empty"),
], ids=["unknown", "twice", "empty"])
def test_a_grpc_spec_with_other_options_is_refused(query: str, why: str) -> None:
    with pytest.raises(ConfigError, match=r"^storage: .*must be grpc://HOST:PORT") as caught:
        _ = StorageSpec(f"grpc://h:1?{query}").address
    assert why in str(caught.value)


def test_a_token_in_the_url_is_refused_and_masked() -> None:
    with pytest.raises(ConfigError, match="a token does not go in the URL") as caught:
        _ = StorageSpec(f"grpc://h:1?token={TOKEN}").address
    assert TOKEN not in str(caught.value) and "token=***" in str(caught.value)
    assert mask(f"grpc://h:1?tls_ca=c.pem&token={TOKEN}") == "grpc://h:1?tls_ca=c.pem&token=***"


def test_the_token_comes_from_the_url_then_the_environment(tmp_path: Path) -> None:
    file = secret_file(tmp_path / "tok", f"{TOKEN}\n")
    other = secret_file(tmp_path / "other", WRONG)
    environ = {TOKEN_ENV: WRONG, TOKEN_FILE_ENV: str(other)}
    assert ProxyAuth(token_file=str(file)).token(environ) == (TOKEN, f"token_file {file}")
    assert ProxyAuth().token(environ) == (WRONG, TOKEN_ENV)
    assert ProxyAuth().token({TOKEN_FILE_ENV: str(file)}) == (TOKEN, f"{TOKEN_FILE_ENV} {file}")
    assert ProxyAuth().token({}) == (None, None)


@pytest.mark.parametrize(("content", "mode", "expected"), [
    (TOKEN, 0o644, "is open to other users (mode 0644): chmod 600"),
    (TOKEN, 0o640, "is open to other users (mode 0640): chmod 600"),
    ("\n", 0o600, "is empty: put a token in it"),
    ("two words", 0o600, "must hold one line of printable ASCII without spaces"),
], ids=["world-readable", "group-readable", "empty", "spaces"])
def test_a_client_token_file_that_cannot_be_used_is_one_line(
    tmp_path: Path, content: str, mode: int, expected: str
) -> None:
    file = secret_file(tmp_path / "tok", content, mode)
    with pytest.raises(ConfigError, match="^storage: token_file ") as caught:
        ProxyAuth(token_file=str(file)).token({})
    assert expected in str(caught.value) and "\n" not in str(caught.value)
    assert TOKEN not in str(caught.value) and "two words" not in str(caught.value)


# ------------------------------------------------------------------------------------------
# Proxy processes with a token, without and with TLS.


@dataclass
class Secrets:
    """The files of a proxy with a token and TLS, and a certificate that is not its."""

    token: Path
    wrong_token: Path
    cert: Path
    key: Path
    other_cert: Path


def make_certificate(
    folder: Path, name: str, names: str = "DNS:localhost,IP:127.0.0.1"
) -> tuple[Path, Path]:
    """A self-signed certificate for ``names`` (its subjectAltName), and its key (mode 600)."""
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", f"/CN={name}", "-addext", f"subjectAltName={names}",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )
    key.chmod(0o600)
    return cert, key


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> Secrets:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("secrets")
    cert, key = make_certificate(folder, "proxy")
    other_cert, _ = make_certificate(folder, "other")
    return Secrets(secret_file(folder / "token", f"{TOKEN}\n"),
                   secret_file(folder / "wrong-token", WRONG), cert, key, other_cert)


class Proxy:
    """A running ``python -m lightning_hpo.proxy`` with a token (and maybe TLS)."""

    def __init__(self, process: subprocess.Popen[str], url: str, line: str, tls: bool) -> None:
        self.process, self.url, self.line, self.tls = process, url, line, tls

    def spec(self, secrets: Secrets, **options: str) -> str:
        """The URL a client uses: with ``tls_ca`` (the right certificate) when the proxy has
        TLS, and ``options`` (``token_file``, or ``tls_ca`` to replace it)."""
        query = ({"tls_ca": str(secrets.cert)} if self.tls else {}) | options
        return self.url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")

    def stop(self) -> str:
        """SIGTERM; its whole output, once it stopped cleanly."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=30)
        assert self.process.returncode == 0, out
        return self.line + out


def start_proxy(folder: Path, secrets: Secrets, *, tls: bool) -> Proxy:
    args = ["--token-file", str(secrets.token)]
    if tls:
        args += ["--tls-cert", str(secrets.cert), "--tls-key", str(secrets.key)]
    process = subprocess.Popen(
        [sys.executable, "-m", "lightning_hpo.proxy", f"sqlite:///{folder / 'behind.db'}",
         "--host", "127.0.0.1", "--port", "0", *args],
        env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"listening on (grpc://127\.0\.0\.1:\d+)$", line.strip())
    if found is None:
        process.kill()
        raise AssertionError(f"the proxy did not start: {line}{process.communicate()[0]}")
    return Proxy(process, found.group(1), line, tls)


def running_proxy(folder: Path, secrets: Secrets, *, tls: bool) -> Iterator[Proxy]:
    """A proxy process for a test module; at its end, its output holds no token."""
    running = start_proxy(folder, secrets, tls=tls)
    try:
        yield running
    finally:
        out = running.stop()
        assert f"(token required, TLS {'on' if tls else 'off'}) listening on" in out
        assert TOKEN not in out and WRONG not in out, "a token in the proxy's output"
        assert "Traceback" not in out, out


@pytest.fixture(scope="module")
def plain_proxy(secrets: Secrets, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    """A proxy process with a token, without TLS."""
    yield from running_proxy(tmp_path_factory.mktemp("plain"), secrets, tls=False)


@pytest.fixture(scope="module")
def tls_proxy(secrets: Secrets, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    """A proxy process with a token and TLS."""
    yield from running_proxy(tmp_path_factory.mktemp("tls"), secrets, tls=True)


@pytest.fixture(params=["plain_proxy", "tls_proxy"], ids=["token", "token+tls"])
def proxy(request: pytest.FixtureRequest) -> Proxy:
    """Each of the proxies with a token: without TLS and with it."""
    running: Proxy = request.getfixturevalue(request.param)
    return running


def test_no_token_is_refused_in_one_line(proxy: Proxy, secrets: Secrets) -> None:
    with pytest.raises(ConfigError) as caught:
        StorageSpec(proxy.spec(secrets)).open()
    assert str(caught.value) == (
        f"storage: {proxy.spec(secrets)} requires a token and none was given (UNAUTHENTICATED): "
        f"set {TOKEN_ENV} or {TOKEN_FILE_ENV}, or add ?token_file=PATH to the storage URL (the "
        "token in the proxy's --token-file)"
    )


@pytest.mark.parametrize("source", ["env", "token_file", "env_file"])
def test_a_wrong_token_is_refused_in_one_line(
    proxy: Proxy, secrets: Secrets, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, where = proxy.spec(secrets), TOKEN_ENV
    if source == "env":
        monkeypatch.setenv(TOKEN_ENV, WRONG)
    elif source == "token_file":
        spec = proxy.spec(secrets, token_file=str(secrets.wrong_token))
        where = f"token_file {secrets.wrong_token}"
    else:
        monkeypatch.setenv(TOKEN_FILE_ENV, str(secrets.wrong_token))
        where = f"{TOKEN_FILE_ENV} {secrets.wrong_token}"
    with pytest.raises(ConfigError) as caught:
        StorageSpec(spec).check()
    assert str(caught.value) == (
        f"storage: {spec} refused the token from {where} (UNAUTHENTICATED): it must be the "
        "token in the proxy's --token-file"
    )
    assert WRONG not in str(caught.value) and TOKEN not in str(caught.value)


@pytest.mark.parametrize("sent", ["none", "wrong"])
def test_every_service_refuses_a_call_without_the_token(
    proxy: Proxy, secrets: Secrets, sent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Optuna's service and lightning_hpo's (unary calls, and a streaming one: the lock) all
    refuse, and a refusal mid-run is the launcher's one line, with no token in it."""
    if sent == "wrong":
        monkeypatch.setenv(TOKEN_ENV, WRONG)
    why = {"none": "no token was sent", "wrong": "the token sent is not this proxy's"}[sent]
    line = {"none": "requires a token and none was given",
            "wrong": "refused the token from LIGHTNING_HPO_PROXY_TOKEN"}[sent]
    host, port = StorageSpec(proxy.url).address
    storage = ProxyStorage(host=host, port=port, auth=StorageSpec(proxy.spec(secrets)).proxy_auth)
    try:  # not opened through StorageSpec: no check before the calls
        with pytest.raises(grpc.RpcError) as caught:
            storage.get_all_studies()
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        outage = storage_outage(caught.value, proxy.url)
        assert outage == f"UNAUTHENTICATED: lightning_hpo proxy: {why}"
        client = proxy_client(storage)
        for call in (client.hello, lambda: client.claim(1),
                     lambda: client.lock("setup", "s").__enter__()):
            with pytest.raises(ConfigError, match=line):
                call()
    finally:
        storage.close()


@pytest.mark.parametrize("source", ["env", "token_file", "env_file"])
def test_the_right_token_serves_both_services(
    proxy: Proxy, secrets: Secrets, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = proxy.spec(secrets)
    if source == "env":
        monkeypatch.setenv(TOKEN_ENV, TOKEN)
    elif source == "token_file":
        spec = proxy.spec(secrets, token_file=str(secrets.token))
    else:
        monkeypatch.setenv(TOKEN_FILE_ENV, str(secrets.token))
    assert StorageSpec(spec).check() == "gRPC proxy reachable (an SQLite database behind it)"
    storage = StorageSpec(spec).open()
    try:
        study = optuna.create_study(storage=storage, study_name=f"s-{source}",
                                    load_if_exists=True)
        trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
        study.tell(trial, 0.5)
        study.enqueue_trial({"x": 0.25})
        client = proxy_client(storage)
        study_id = storage.get_study_id_from_name(f"s-{source}")
        assert client.add_and_rank(study_id, 0, [1], trial.number, 0.5, False) == (1, 0)
        assert client.records(study_id) == [(0, 1, trial.number, 0.5)]
        assert client.claim(study_id) is not None
        with client.lock("setup", f"s-{source}"):
            pass
        assert [t.state.name for t in study.get_trials()] == ["COMPLETE", "RUNNING"]
    finally:
        storage.close()  # type: ignore[attr-defined]


def test_a_storage_pickles_without_its_token(
    proxy: Proxy, secrets: Secrets, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    storage = StorageSpec(proxy.spec(secrets)).open()
    state = pickle.dumps(storage)
    assert TOKEN.encode() not in state
    again = pickle.loads(state)  # reads the token again, from the environment here
    assert again.get_all_studies() is not None
    storage.close()  # type: ignore[attr-defined]
    again.close()


def test_a_launcher_with_a_wrong_token_says_so_in_one_line(
    plain_proxy: Proxy, secrets: Secrets, tmp_path: Path
) -> None:
    spec = plain_proxy.spec(secrets)
    config = config_file(tmp_path, storage=spec)
    environ = env() | {TOKEN_ENV: WRONG}
    process = subprocess.run(
        [sys.executable, "-m", "lightning_hpo.launch", str(config), "--check"], cwd=tmp_path,
        env=environ, capture_output=True, text=True, timeout=240,
    )
    assert process.returncode == 2, process.stdout[-2000:] + process.stderr[-2000:]
    lines = process.stderr.strip().splitlines()
    assert lines == [f"error: storage: {spec} refused the token from {TOKEN_ENV} "
                     "(UNAUTHENTICATED): it must be the token in the proxy's --token-file"]
    assert WRONG not in process.stdout + process.stderr
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------------------------
# TLS that does not match: one line each, at once.


def test_tls_without_the_certificate_is_refused(proxy: Proxy, secrets: Secrets,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    if proxy.tls:  # no tls_ca, then the wrong one
        expected = [
            (proxy.url, "the proxy closed the connection (Socket closed); a proxy started "
             "with --tls-cert needs ?tls_ca=PATH"),
            (proxy.spec(secrets, tls_ca=str(secrets.other_cert)), "TLS handshake failed "
             f"(CERTIFICATE_VERIFY_FAILED: self signed certificate); tls_ca {secrets.other_cert} "
             "must be the proxy's --tls-cert or the CA that signed it"),
        ]
    else:  # a certificate for a proxy without TLS
        expected = [(proxy.spec(secrets, tls_ca=str(secrets.cert)),
                     f"the proxy does not speak TLS (started without --tls-cert?), but tls_ca "
                     f"{secrets.cert} asks for it")]
    for spec, words in expected:
        with pytest.raises(ConfigError) as caught:
            StorageSpec(spec).open()
        message = str(caught.value)
        assert message.startswith(f"storage: cannot open {spec}: {words}"), message
        assert "\n" not in message and TOKEN not in message


def test_a_certificate_for_another_host_is_refused(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path, "elsewhere", "DNS:elsewhere.example")
    server, port = serve(f"sqlite:///{tmp_path / 'b.db'}", host="127.0.0.1", port=0,
                         tls_cert=cert, tls_key=key)
    try:
        spec = f"grpc://127.0.0.1:{port}?tls_ca={cert}"
        with pytest.raises(ConfigError) as caught:
            StorageSpec(spec).open()
        assert str(caught.value) == (
            f"storage: cannot open {spec}: the proxy's certificate does not name 127.0.0.1 "
            "(Hostname Verification Check failed); use a host name the certificate holds (its "
            "subjectAltName), or make one that holds it"
        )
    finally:
        server.stop(None)


def test_the_certificate_may_come_from_the_environment(
    tls_proxy: Proxy, secrets: Secrets, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    monkeypatch.setenv(TLS_CA_ENV, str(secrets.cert))
    storage = StorageSpec(tls_proxy.url).open()
    assert isinstance(storage, ProxyStorage)
    assert storage.tls_source == f"{TLS_CA_ENV} {secrets.cert}"
    assert storage.token_source == TOKEN_ENV
    storage.close()


# ------------------------------------------------------------------------------------------
# The proxy's CLI: refusals in one line, exit 2, before anything is opened or served.


@pytest.mark.parametrize(("args", "expected"), [
    (["--host", "0.0.0.0"], "error: token_file: listening on 0.0.0.0 lets anyone who reaches "
     "the port read, change and delete every study behind the proxy: give --token-file PATH"),
    (["--host", "node07.cluster"], "error: token_file: listening on node07.cluster lets anyone"),
    (["--token-file", "{open}"], "is open to other users (mode 0644): chmod 600 "),
    (["--token-file", "{empty}"], "is empty: put a token in it"),
    (["--token-file", "{short}"], "has 6 characters; use at least 16"),
    (["--token-file", "{missing}"], "error: token_file: cannot read token file "),
    (["--tls-cert", "{cert}"], "error: tls_key: --tls-cert and --tls-key go together"),
    (["--tls-cert", "{cert}", "--tls-key", "{open_key}"],
     "error: tls_key: key file {open_key} is open to other users (mode 0644): chmod 600"),
    (["--tls-cert", "{token}", "--tls-key", "{key}"], "error: tls_cert: {token} is not a PEM "
     "certificate"),
    (["--tls-cert", "{other_cert}", "--tls-key", "{key}"], "error: tls_key: {key} is not the "
     "private key of {other_cert}, or one of them does not parse ("),
], ids=["any-host", "host-name", "open", "empty", "short", "missing", "cert-only", "open-key",
        "not-a-cert", "not-its-key"])
def test_the_cli_refuses_in_one_line_before_serving(
    tmp_path: Path, secrets: Secrets, args: list[str], expected: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = {
        "open": secret_file(tmp_path / "open", TOKEN, 0o644),
        "empty": secret_file(tmp_path / "empty", ""),
        "short": secret_file(tmp_path / "short", "abc123"),
        "missing": tmp_path / "missing",
        "cert": secrets.cert, "key": secrets.key, "token": secrets.token,
        "other_cert": secrets.other_cert,
        "open_key": tmp_path / "open.key",
    }
    shutil.copy(secrets.key, files["open_key"])
    files["open_key"].chmod(0o644)
    argv = [arg.format(**files) for arg in args]
    database = tmp_path / "behind.db"
    assert proxy_cli.main([f"sqlite:///{database}", "--port", "0", *argv]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert expected.format(**files) in lines[0], lines[0]
    assert TOKEN not in out + err and not out
    assert not database.exists(), "the storage was opened before the refusal"


def test_a_proxy_on_loopback_needs_no_token(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "lightning_hpo.proxy", f"sqlite:///{tmp_path / 'b.db'}",
         "--host", "127.0.0.1", "--port", "0"],
        env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=30)
    assert "(token off, TLS off) listening on grpc://127.0.0.1:" in line, line


def test_the_cli_help_names_the_token_and_tls_options() -> None:
    result = subprocess.run([sys.executable, "-m", "lightning_hpo.proxy", "--help"],
                            env=env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for option in ("--token-file", "--tls-cert", "--tls-key", "LIGHTNING_HPO_PROXY_TOKEN"):
        assert option in result.stdout, option
