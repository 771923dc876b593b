from __future__ import annotations

import threading

from gitsync.reconcile.keylock import KeyLocks


def test_one_key_is_held_by_one_thread_and_the_entry_goes_with_the_last_user() -> None:
    locks = KeyLocks()
    entered = threading.Event()
    release = threading.Event()
    second_in = threading.Event()

    def first() -> None:
        with locks.hold("k"):
            entered.set()
            release.wait(5)

    def second() -> None:
        with locks.hold("k"):
            second_in.set()

    a = threading.Thread(target=first)
    a.start()
    assert entered.wait(5)
    b = threading.Thread(target=second)
    b.start()
    assert not second_in.wait(0.2)  # waits while the first holds the key
    assert len(locks) == 1  # both use one entry
    release.set()
    a.join(5)
    b.join(5)
    assert second_in.is_set()
    assert len(locks) == 0


def test_different_keys_do_not_wait_for_each_other() -> None:
    locks = KeyLocks()
    with locks.hold("a"):
        done = threading.Event()

        def other() -> None:
            with locks.hold("b"):
                done.set()

        t = threading.Thread(target=other)
        t.start()
        assert done.wait(5)
        t.join(5)
        assert len(locks) == 1
    assert len(locks) == 0


def test_the_entry_is_released_when_the_holder_raises() -> None:
    locks = KeyLocks()
    try:
        with locks.hold("k"):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert len(locks) == 0
    with locks.hold("k"):  # not left locked
        pass
