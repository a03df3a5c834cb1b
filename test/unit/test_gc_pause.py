"""Compiles pause Python's cyclic collector (`pipeline.gc_paused`) and restore it."""

from __future__ import annotations

import gc
import threading

from dlc.pipeline import gc_paused


def test_paused_inside_restored_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested: still off, and still off after the inner one
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_concurrent_pauses_end_with_the_last() -> None:
    inside, release = threading.Event(), threading.Event()

    def compile_elsewhere() -> None:
        with gc_paused():
            inside.set()
            release.wait(10)

    other = threading.Thread(target=compile_elsewhere)
    other.start()
    inside.wait(10)
    with gc_paused():
        pass
    assert not gc.isenabled()  # the other compile is still running
    release.set()
    other.join()
    assert gc.isenabled()


def test_an_error_restores_it() -> None:
    try:
        with gc_paused():
            raise ValueError("a failed compile")
    except ValueError:
        pass
    assert gc.isenabled()
