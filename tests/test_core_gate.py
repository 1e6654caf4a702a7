"""The host's core gate: at most one model run per core at a time, across threads and processes
(real threads and a real child process; ordering is checked with events, never with timing)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from fault_tools import python_child

from flux_chroma.embedding import core_gate
from flux_chroma.embedding.core_gate import CoreGate

HANG_GUARD = 60


def test_a_run_waits_for_a_free_core_then_takes_it(tmp_path: Path) -> None:
    gate = CoreGate(tmp_path, cores=1)
    first_holds, first_may_go, second_holds = threading.Event(), threading.Event(), threading.Event()
    order: list[str] = []

    def first() -> None:
        with gate.hold(1) as got:
            assert got == 1
            order.append("first in")
            first_holds.set()
            assert first_may_go.wait(HANG_GUARD)
            order.append("first out")

    def second() -> None:
        assert first_holds.wait(HANG_GUARD)
        with gate.hold(1) as got:
            assert got == 1
            order.append("second in")
            second_holds.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    assert first_holds.wait(HANG_GUARD)
    assert not second_holds.wait(0.5)  # the only core is held: the second run waits
    first_may_go.set()
    for t in threads:
        t.join(HANG_GUARD)
    assert order == ["first in", "first out", "second in"]


def test_a_run_takes_up_to_its_threads_and_at_least_one(tmp_path: Path) -> None:
    gate = CoreGate(tmp_path, cores=3)
    with gate.hold(2) as two:
        assert two == 2
        with gate.hold(4) as rest:
            assert rest == 1  # one core left: the run goes ahead with what is free
    with gate.hold(8) as every:
        assert every == 3  # all released


def test_a_core_held_by_another_process_is_released_when_it_dies(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from flux_chroma.embedding.core_gate import CoreGate\n"
        f"with CoreGate(Path({str(tmp_path)!r}), 1).hold(1) as got:\n"
        "    print(got, flush=True)\n"
        "    sys.stdin.read()\n"
    )
    proc = python_child(code)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "1"
        gate = CoreGate(tmp_path, cores=1)
        got: list[int] = []

        def wait_for_the_core() -> None:
            with gate.hold(1) as n:
                got.append(n)

        waiter = threading.Thread(target=wait_for_the_core)
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive() and not got  # the other process holds the only core
        proc.kill()
        proc.wait(HANG_GUARD)
        waiter.join(HANG_GUARD)
        assert got == [1]  # its flock went with it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(HANG_GUARD)


def test_a_hung_holder_delays_a_run_but_never_blocks_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(core_gate, "PATIENCE_SECONDS", 0.3)
    gate = CoreGate(tmp_path, cores=1)
    with gate.hold(1) as held, gate.hold(1) as late:
        assert (held, late) == (1, 0)  # ran out of patience: goes ahead without a core


def test_an_unusable_folder_runs_ungated(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with CoreGate(blocker / "gate", cores=2).hold(2) as got:
        assert got == 0
