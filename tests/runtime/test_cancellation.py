"""Every blocking wait honours cancellation: Session.run(timeout=), Session.close() from another
thread and Ctrl-C stop an endless while_loop, on the caller's thread or on a pool thread."""

from __future__ import annotations

import _thread
import threading
import time

import numpy as np
import pytest

from opsdk.runtime.control_flow.builders import while_loop
from opsdk.runtime.exec.executor import CancelledError
from opsdk.runtime.exec.session import Session
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.ir.graph import Graph, placeholder


def _endless(registry, wide: bool):
    """An endless loop; with `wide`, beside an independent node, so the plan runs on the pool."""
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [2], name="x")
        _, y = while_loop(lambda i, v: i >= 0, lambda i, v: (i + 1, v + 1.0), [0, x],
                          name="forever")
        fetch = [y]
        if wide:
            fetch.append(apply_op(registry, "exp", [x], {}, name="side"))
    return g, x, fetch


def test_a_timeout_stops_an_endless_loop_on_the_callers_thread(registry):
    g, x, fetch = _endless(registry, wide=False)
    with Session(g) as sess:
        start = time.monotonic()
        with pytest.raises(CancelledError, match=r"^while_loop \(node 'forever'\), after \d+ "
                                                 r"iteration\(s\): stopped because its timeout "
                                                 r"passed"):
            sess.run(fetch, {x: np.zeros(2)}, timeout=0.3)
        assert time.monotonic() - start < 5
        # The session still works afterwards.
        assert sess.run(fetch[0].op.inputs[1], {x: np.ones(2)}).tolist() == [1.0, 1.0]


def test_a_timeout_stops_an_endless_loop_on_a_pool_thread(registry):
    g, x, fetch = _endless(registry, wide=True)
    with Session(g) as sess:
        assert not sess.plan_for(fetch, (x,)).serial
        with pytest.raises(CancelledError, match="stopped because its timeout passed"):
            sess.run(fetch, {x: np.zeros(2)}, timeout=0.3)


def test_close_from_another_thread_stops_the_run_and_returns(registry):
    g, x, fetch = _endless(registry, wide=True)
    sess = Session(g)
    # The plan first: building it (on a GPU machine, CuPy's start too) once took longer than the
    # wait below, and close() came before the run began.
    sess.plan_for(fetch, (x,))
    errors: list = []

    def run():
        try:
            sess.run(fetch, {x: np.zeros(2)})
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            errors.append(exc)
    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(0.3)
    start = time.monotonic()
    sess.close()
    worker.join(5)
    assert not worker.is_alive() and time.monotonic() - start < 5
    assert isinstance(errors[0], CancelledError) and "the session was closed" in str(errors[0])


def test_ctrl_c_returns_to_the_caller_and_stops_the_loop_on_the_pool(registry, ctrl_c_raises):
    g, x, fetch = _endless(registry, wide=True)
    sess = Session(g)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            sess.run(fetch, {x: np.zeros(2)})
    finally:
        timer.cancel()
    start = time.monotonic()
    sess.close()  # returns: the loop on the pool thread saw the cancellation
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0, -1.0, "1", True])
def test_a_timeout_that_is_not_a_positive_finite_number_is_refused(registry, bad):
    # A NaN deadline never passes: the run must be refused, not loop forever (a thread, so a
    # regression fails here instead of hanging the suite).
    from opsdk.registry.errors import OpsdkError
    g, x, fetch = _endless(registry, wide=False)
    errors = []
    with Session(g) as sess:
        def run():
            try:
                sess.run(fetch, {x: np.zeros(2)}, timeout=bad)
            except Exception as exc:  # noqa: BLE001 - the test inspects it
                errors.append(exc)
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(10)
        hung = thread.is_alive()
    thread.join(10)
    assert not hung, f"timeout={bad!r}: the run did not return"
    assert len(errors) == 1 and type(errors[0]) is OpsdkError, errors
    assert str(errors[0]) == ("Session.run: timeout must be a positive finite number of seconds "
                              f"or None, got {bad!r}")
