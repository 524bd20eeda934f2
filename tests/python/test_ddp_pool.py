"""Real DDP's rank pool when a rank process dies: the PoolError names the rank, how it died
(the signal's name) and the case, quotes faulthandler's gist when the rank left one, and
comes at once (no wait for the pool's timeout, no hang), and the runtime recovers."""

import os
import signal
import time

import pytest

from strategy_key_cases import clip_case
from infonce_sim.adapters import load_adapter
from infonce_sim.cases.case_families import parse_case
from infonce_sim.runtime.ddp import DdpRuntime, PoolError
from infonce_sim.runtime.rank_deaths import exit_description, last_words

TIMEOUT = 120.0  # the pool's own timeout: the death must be reported long before it


def _case():
    return parse_case(clip_case(3, 0, equal=True, bias=False, strategy=False, meshes=[(2, 2)]))


@pytest.mark.parametrize("signum, gist", [
    (signal.SIGSEGV, "; rank 1: Fatal Python error: Segmentation fault, in "),
    (signal.SIGKILL, None),  # the OOM killer's way: no handler runs, no last words
], ids=["SIGSEGV", "SIGKILL"])
def test_a_killed_rank_is_named_with_its_signal_and_the_runtime_recovers(signum, gist,
                                                                        capfd):
    adapter = load_adapter({"kind": "conformance"})
    runtime = DdpRuntime({"kind": "conformance"}, timeout=TIMEOUT, max_pools=1)
    try:
        healthy = runtime.run(adapter, _case())
        os.kill(runtime.pools[2].procs[1].pid, signum)
        start = time.monotonic()
        with pytest.raises(PoolError) as caught:
            runtime.run(adapter, _case())
        seconds = time.monotonic() - start
        message = str(caught.value)
        name = signal.Signals(signum).name
        assert message.startswith(f"world 2: rank 1 died ({name}) during case 2"), message
        assert "\n" not in message
        if gist:  # the thread the signal landed on, or the main thread's frame
            assert gist in message and ' File "' in message, message
        else:
            assert ";" not in message, message
        assert seconds < TIMEOUT / 4, seconds
        assert 2 not in runtime.pools  # the broken pool is discarded; a new one serves
        assert runtime.run(adapter, _case())["losses"] == healthy["losses"]
    finally:
        runtime.close()
    # the whole faulthandler output is on stderr, once (not again when the pool closes)
    echoes = capfd.readouterr().err.count("infonce-sim: rank 1 of world 2: faulthandler:\n"
                                          "Fatal Python error: Segmentation fault")
    assert echoes == (1 if gist else 0), echoes


def test_exit_descriptions():
    assert exit_description(-11) == "SIGSEGV"
    assert exit_description(-6) == "SIGABRT"
    assert exit_description(-9) == "SIGKILL"
    assert exit_description(3) == "exit code 3"


def test_last_words_are_faulthandlers_first_line_and_innermost_frame():
    text = ("Fatal Python error: Aborted\n\nThread 0x02 (most recent call first):\n"
            '  File "/x/queues.py", line 231 in _feed\n\n'
            "Current thread 0x01 (most recent call first):\n"
            '  File "/x/loss.py", line 25 in _all_gather_with_grad\n'
            '  File "/x/rank.py", line 9 in step\n')
    assert last_words(text) == ('Fatal Python error: Aborted, in File "/x/loss.py", line 25 '
                                "in _all_gather_with_grad")
    assert last_words("") == ""


def test_last_words_of_a_crash_in_a_native_thread_name_the_main_thread():
    """A SIGSEGV in gloo's loop thread: no 'Current thread' (it has no Python state); the
    main thread is the last one listed (faulthandler's format in CPython 3.11)."""
    text = ("Fatal Python error: Segmentation fault\n\n"
            "Thread 0x00007fecab3bc6c0 (most recent call first):\n"
            '  File "/x/queues.py", line 231 in _feed\n'
            '  File "/x/threading.py", line 982 in run\n\n'
            "Thread 0x00007fecac286b80 (most recent call first):\n"
            '  File "/x/functional_collectives.py", line 142 in wait_tensor\n'
            '  File "/x/ddp.py", line 9 in rank_step\n\n'
            "Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)\n")
    assert last_words(text) == ("Fatal Python error: Segmentation fault, in a native thread; "
                                'the main thread in File "/x/functional_collectives.py", '
                                "line 142 in wait_tensor")


def test_ddp_reduces_on_a_group_of_its_own(tmp_path):
    """DDP's bucket all-reduces never share the default group with the adapter's own
    collectives (open_clip gathers on the default group, and its gather's backward runs in
    the same backward as DDP's hooks): wrap_and_seed puts DDP on RankGroups.ddp."""
    import torch
    import torch.distributed as dist
    from infonce_sim.runtime.ddp import RankGroups, wrap_and_seed
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    try:
        groups = RankGroups(1)
        case = _case()
        model = wrap_and_seed(torch.nn.Linear(2, 2, bias=False).double(), case, 0,
                              groups.dp_group(0, 1), groups.ddp)
        assert model.process_group is groups.ddp
        assert groups.ddp is not dist.group.WORLD
        assert dist.get_world_size(groups.ddp) == 1
    finally:
        dist.destroy_process_group()
