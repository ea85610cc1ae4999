"""A new actor system never attaches to an admin another run started on its port (``actors/_driver/admin_start.py``).

Thespian's ``ActorSystem(..., {"Admin Port": P})`` attaches to whatever admin answers on P. In CI two multi-host
tests' leaders drew the same port: the second attached to the first's system, its worker joined the first's
leader, and both tests timed out. Here: a leader on a taken port is refused with the reason and the run that
holds the port goes on untouched; a port audition chose itself is drawn again; and the check after the start
(another start took the port between the check before it and Thespian's start) catches what the check before
cannot.
"""

from __future__ import annotations

import glob
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner
from actors._driver import admin_start
from actors._driver.errors import ConfigError
from actors._driver.system import actor_system
from actors.search import grid_search
from tests import _trainables as T
from tests._cluster import ROOT, fit_in_thread, listening, wait_for
from tests._ports import leader_port


def _answers(asys: Any) -> dict[str, Any]:
    """The capabilities of the admin ``asys`` talks to (it still runs and answers)."""
    from thespian.system.messages.status import Thespian_StatusReq

    reply = asys.ask(asys._systemBase.adminAddr, Thespian_StatusReq(), 20)
    assert reply is not None, "the admin no longer answers"
    return dict(reply.capabilities)


@pytest.fixture
def held() -> Iterator[tuple[Any, int]]:
    """A leader's system on a port of its own: (the system, the port)."""
    port = leader_port()
    with actor_system(f"tcp://127.0.0.1:{port}") as asys:
        yield asys, port


def test_a_leader_on_a_port_another_system_holds_is_refused_and_that_system_goes_on(held, no_leaks) -> None:
    asys, port = held
    mine = _answers(asys)[admin_start.START_CAP]
    with pytest.raises(ConfigError, match=f"port {port} on 127.0.0.1 is already in use by another process"):
        with actor_system(f"tcp://127.0.0.1:{port}"):
            pytest.fail("started on a taken port")
    assert _answers(asys)[admin_start.START_CAP] == mine  # not shut down, not replaced


def test_a_port_another_program_listens_on_is_refused_at_once(tmp_path, no_leaks) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", leader_port()))
        busy.listen()
        port = busy.getsockname()[1]
        tuner = Tuner(T.fn_trainable, param_space={"steps": 2},
                      run_config=RunConfig(name="busy", storage=str(tmp_path / "results"), verbose=0,
                                           system=f"tcp://127.0.0.1:{port}"))
        with pytest.raises(ConfigError, match=f"port {port} on 127.0.0.1 is already in use by another process"):
            tuner.fit()
    assert not os.path.exists(tmp_path / "results" / "busy" / ".state")


def test_the_check_after_the_start_refuses_an_admin_that_took_the_port_meanwhile(held, monkeypatch, no_leaks) -> None:
    """The check before the start passes (the port looked free), then Thespian attaches to the admin there."""
    asys, port = held
    mine = _answers(asys)[admin_start.START_CAP]
    real_bound = admin_start._bound
    monkeypatch.setattr(admin_start, "_bound", lambda h, p, t: False if t == 0.0 else real_bound(h, p, t))
    with pytest.raises(admin_start.PortTaken, match=f"port {port} on 127.0.0.1 is already in use"):
        with actor_system(f"tcp://127.0.0.1:{port}"):
            pytest.fail("attached to another run's admin")
    assert _answers(asys)[admin_start.START_CAP] == mine


@pytest.mark.parametrize("check_before", [True, False], ids=["caught-before", "caught-after"])
def test_a_port_audition_chose_is_drawn_again_when_taken(held, monkeypatch, no_leaks, check_before: bool) -> None:
    asys, port = held
    mine = _answers(asys)[admin_start.START_CAP]
    draws = iter([port])
    real_free, real_bound = admin_start.free_port, admin_start._bound
    monkeypatch.setattr(admin_start, "free_port", lambda host="127.0.0.1": next(draws, None) or real_free(host))
    if not check_before:
        monkeypatch.setattr(admin_start, "_bound", lambda h, p, t: False if t == 0.0 else real_bound(h, p, t))
    with actor_system("multiproc") as other:
        assert other.audition_admin_port != port
        theirs = _answers(other)[admin_start.START_CAP]
        assert theirs != mine
    assert _answers(asys)[admin_start.START_CAP] == mine


def test_a_fit_on_a_port_another_fit_leads_on_fails_at_once_and_the_first_ends_as_usual(tmp_path, no_leaks) -> None:
    port = leader_port()
    gate = str(tmp_path / "gate")

    def tuner(name: str, trainable: Any, space: dict[str, Any]) -> Tuner:
        return Tuner(trainable, param_space=space, tune_config=TuneConfig(metric="loss", mode="min"),
                     run_config=RunConfig(name=name, storage=str(tmp_path / "results"), verbose=0,
                                          system=f"tcp://127.0.0.1:{port}"))

    out: dict[str, Any] = {}
    first = fit_in_thread(tuner("first", T.gated_trainable, {"x": grid_search([1.0, 2.0]), "gate": gate}), out)
    try:
        wait_for(lambda: listening(port), 30, "the first fit's leader to listen")
        with pytest.raises(ConfigError, match=f"port {port} on 127.0.0.1 is already in use by another process"):
            tuner("second", T.fn_trainable, {"steps": 2}).fit()
        results = lambda: glob.glob(str(tmp_path / "results" / "first" / "*" / "result.json"))  # noqa: E731
        wait_for(lambda: len([f for f in results() if os.path.getsize(f)]) == 2, 60, "both trials to report")
    finally:
        open(gate, "w").close()
        first.join(timeout=90)
    assert not first.is_alive() and "error" not in out, out.get("error")
    grid = out["grid"]
    assert len(grid) == 2 and not grid.errors
    assert all(r.metrics["step"] >= 0 for r in grid)
    assert not os.path.exists(tmp_path / "results" / "second" / ".state")  # the refused run wrote no state


def test_a_worker_on_a_taken_port_exits_with_the_reason(held, no_leaks) -> None:
    """``audition worker --port P`` where P is taken (here: by the leader it joins)."""
    _asys, port = held
    tag = f"taken-{uuid.uuid4().hex[:8]}"
    res = subprocess.run([sys.executable, "-m", "actors._cli", "worker", "--leader", f"127.0.0.1:{port}",
                          "--bind", "127.0.0.1", "--port", str(port), "--id", tag],
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT, AUDITION_ALLOW_UNAUTHENTICATED="1"),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, (res.returncode, res.stdout[-1000:], res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    assert f"port {port} on 127.0.0.1 is already in use by another process" in res.stderr, res.stderr[-2000:]
