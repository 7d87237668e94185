"""`relayjit serve`: arguments reach runtime.serving.start, the URL is printed, Ctrl-C stops the
server (the serving itself is tested on a real Ray instance in tests/serving)."""
from __future__ import annotations

import signal

import pytest

from compiler.tools import cli
from compiler.tools.cli import serve as cli_serve
from compiler.tools.session import load_model
from runtime import serving


class _Server:
    url = "http://127.0.0.1:8123/"
    stopped = False

    def stop(self):
        self.stopped = True


def test_serve_prints_the_url_and_stops_on_ctrl_c(monkeypatch, capsys):
    pytest.importorskip("ray")
    calls, server = [], _Server()

    def start(path, **kwargs):
        calls.append((path, kwargs))
        return server

    def interrupted(_seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(serving, "start", start)
    monkeypatch.setattr(cli_serve.time, "sleep", interrupted)
    old = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        code = cli.main(["serve", "model.rjit", "--replicas", "3", "--port", "8123",
                         "--threads", "2", "--address", "auto"])
    finally:
        signal.signal(signal.SIGINT, old[0])
        signal.signal(signal.SIGTERM, old[1])
    assert code == 0 and server.stopped
    assert calls == [("model.rjit", {"replicas": 3, "port": 8123, "threads": 2,
                                     "address": "auto", "host": "127.0.0.1",
                                     "loader": load_model})]
    assert "at http://127.0.0.1:8123/" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--replicas", "0"], "expected a whole number >= 1"),
    (["--threads", "x"], "expected a whole number >= 1, got 'x'"),
])
def test_serve_rejects_bad_counts(argv, message, capsys):
    with pytest.raises(SystemExit):
        cli.main(["serve", "model.rjit", *argv])
    assert message in capsys.readouterr().err


def test_serve_refuses_a_missing_module(tmp_path, capsys):
    pytest.importorskip("ray")
    missing = str(tmp_path / "absent.rjit")
    assert cli.main(["serve", missing]) == 1
    assert f"{missing}: no such model file" in capsys.readouterr().err
