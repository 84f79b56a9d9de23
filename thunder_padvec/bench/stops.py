"""Ending a pytest run that a time limit interrupts.

The GPU machine's calls run the suite and the GPU tests under ``timeout -s INT``, so that pytest stops
and pytest-benchmark still writes the records of the tests that finished. But Thunder's interpreter
turns a KeyboardInterrupt raised while it traces into an ``InterpreterError``: the test fails and the
run goes on past its limit. With this hook in a conftest, such a failure ends the run as the interrupt
would have.
"""

from __future__ import annotations


def interrupted(err: BaseException | None) -> bool:
    """Whether ``err`` is a KeyboardInterrupt or was raised from one (its causes and contexts)."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def pytest_runtest_makereport(item, call) -> None:
    if call.excinfo is not None and interrupted(call.excinfo.value):
        item.session.shouldstop = "interrupted: a KeyboardInterrupt that Thunder's tracing wrapped"
