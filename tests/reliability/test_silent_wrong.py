"""Silent wrong answers of the patch machinery under threads (issue 32): the behaviour canaries and
apply/revert run under one lock, and the canaries never leave a library module's globals
replaced.

The real-TRL check (two threads applying and reverting at once, 100 trials) is
``tests/adapters/trl/test_threads.py`` in the TRL session; these cases check the same
machinery without TRL, on stand-in modules, in the core session.
"""

from __future__ import annotations

import sys
import threading
import time
import types
from typing import Any

import pytest

CASES: list[tuple[str, str]] = [
    ("silent-wrong", "canary-probe-never-leaves-module-globals-replaced"),
    ("silent-wrong", "canaries-never-overlap-across-threads"),
    ("silent-wrong", "registry-patch-from-two-threads-patches-once"),
    ("silent-wrong", "apply-and-revert-share-one-lock"),
]
"""Every case of this module as (category, name); the test parameter id is the name."""


def _stand_in_module(name: str) -> types.ModuleType:
    """A module with TRL's gather names and a method-like function that calls them."""
    module = types.ModuleType(name)
    source = (
        "def gather(x):\n    raise RuntimeError('the real gather ran')\n"
        "def gather_object(x):\n    raise RuntimeError('the real gather_object ran')\n"
        "def method(self, x):\n    return gather(x) + gather_object(x)\n"
    )
    exec(compile(source, name, "exec"), module.__dict__)  # a module's code, as an import runs it
    sys.modules[name] = module
    return module


@pytest.mark.parametrize("name", ["canary-probe-never-leaves-module-globals-replaced"])
def test_two_threads_probing_at_once_leave_the_gathers_restored(name: str) -> None:
    """Before: the second thread's probe saved the first one's identity stand-in as "the
    original" and restored it for good (a multi-rank run then gathered nothing). A probe that
    raises restores them too."""
    from kl_patches.adapters.trl import canaries

    module = _stand_in_module("kl_patches_test_fake_trainer")
    try:
        real = (module.gather, module.gather_object)
        seen: list[int] = []

        def probe(fail: bool) -> None:
            try:
                with canaries._identity_gathers(module.method):
                    seen.append(module.method(None, 2))  # 4: the identity gathers ran
                    time.sleep(0.2)  # a window for the other thread (never asserted on)
                    if fail:
                        raise RuntimeError("probe failed")
            except RuntimeError:
                pass

        threads = [threading.Thread(target=probe, args=(fail,)) for fail in (False, True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert seen == [4, 4]
        assert (module.gather, module.gather_object) == real
        with pytest.raises(RuntimeError, match="the real gather ran"):
            module.method(None, 2)
    finally:
        del sys.modules["kl_patches_test_fake_trainer"]


@pytest.mark.parametrize("name", ["canaries-never-overlap-across-threads"])
def test_canaries_of_two_threads_never_run_at_once(name: str) -> None:
    """Two threads' canaries (one raising) run one after the other, never interleaved."""
    from kl_patches.adapters.support import Canary, run_canaries

    inside = [0]
    most = [0]
    guard = threading.Lock()

    def probe(fail: bool) -> str | None:
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.2)  # a window for the other thread (the assertion never depends on it)
        with guard:
            inside[0] -= 1
        if fail:
            raise RuntimeError("probe failed")
        return None

    results: list[list[str]] = []

    def run(fail: bool) -> None:
        results.append(run_canaries([Canary("f", "nothing", lambda: probe(fail))] * 2))

    threads = [threading.Thread(target=run, args=(fail,)) for fail in (False, True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1
    assert sorted(len(r) for r in results) == [0, 2]


@pytest.mark.parametrize("name", ["registry-patch-from-two-threads-patches-once"])
def test_two_threads_patching_one_target_patch_it_once(name: str) -> None:
    """Before: both threads saw the target unpatched, both wrapped it, and the registry kept
    one thread's wrapper while the module held the other's (or refused it as "patched outside
    the registry")."""
    from kl_patches.adapters.patching import PatchRegistry, Target, is_replacement

    module = _stand_in_module("kl_patches_test_fake_patched")
    try:
        original = module.method
        registry = PatchRegistry("test")
        target = Target(module.__name__, "method")
        made: list[Any] = []

        def factory(orig: Any) -> Any:
            time.sleep(0.2)  # a window for the other thread (the assertion never depends on it)

            def wrapper(*args: Any) -> Any:
                return orig(*args)

            made.append(wrapper)
            return wrapper

        raised: list[BaseException] = []

        def patch() -> None:
            try:
                registry.patch(target, factory)
            except BaseException as err:  # checked below
                raised.append(err)

        threads = [threading.Thread(target=patch) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert raised == [] and len(made) == 1
        assert module.method is made[0] and is_replacement(module.method, "test")
        assert registry.applied() == [target.name]
        assert registry.revert() == [target.name]
        assert module.method is original
    finally:
        del sys.modules["kl_patches_test_fake_patched"]


@pytest.mark.parametrize("name", ["apply-and-revert-share-one-lock"])
def test_every_adapter_verb_waits_for_the_patch_lock(name: str) -> None:
    """Each adapter's revert and applied (and apply, by the same decorator) wait while another
    thread holds the patch lock (none of the libraries is needed: nothing is patched)."""
    from kl_patches.adapters import patching
    from kl_patches.adapters.openrlhf import patch as openrlhf_patch
    from kl_patches.adapters.trl import patch as trl_patch
    from kl_patches.adapters.verl import patch as verl_patch

    for module in (trl_patch, verl_patch, openrlhf_patch):
        assert module.apply.__code__ is patching.serialized(len).__code__, module.__name__
        for verb in (module.revert, module.applied):
            done = threading.Event()
            with patching.LOCK:
                worker = threading.Thread(target=lambda v=verb, d=done: (v(), d.set()))
                worker.start()
                assert not done.wait(0.2), (module.__name__, verb.__name__)  # waits for the lock
            worker.join(timeout=30)
            assert done.is_set(), (module.__name__, verb.__name__)
