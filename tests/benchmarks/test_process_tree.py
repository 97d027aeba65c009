"""A contender's process tree is measured whole: descendants orphaned before they end are
re-parented to the contender, which waits for them before it exits."""

import os
import sys
import textwrap

import pytest

from benchmarks.process_tree import run_measured

# The contender forks a child that forks a grandchild and exits at once; the grandchild, once
# orphaned, writes the pid of the process it was re-parented to, then ends.
CONTENDER = textwrap.dedent(
    """
    import os, sys, time
    from benchmarks.process_tree import reap_orphans_at_exit

    reap_orphans_at_exit()
    child = os.fork()
    if child == 0:
        parent = os.getpid()  # read before the fork: the child may be gone when it runs
        if os.fork() == 0:
            while os.getppid() == parent:
                time.sleep(0.01)
            with open(sys.argv[1], "w") as handle:
                handle.write(str(os.getppid()))
        os._exit(0)
    os.waitpid(child, 0)
    print(os.getpid())
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER")
def test_orphaned_descendants_are_reaped_by_the_contender_before_it_exits(tmp_path):
    written = tmp_path / "reaper"
    finished = run_measured([sys.executable, "-c", CONTENDER, str(written)])
    assert finished.returncode == 0
    contender = finished.stdout.strip()
    # Written before run_measured returned: the contender waited for the grandchild.
    assert written.read_text() == contender
    assert int(contender) != os.getpid()


def test_sampled_memory_comes_with_the_time_of_each_sample():
    finished = run_measured(
        [sys.executable, "-c", "import time; time.sleep(0.5)"], sample_every_s=0.05
    )
    assert finished.pss_samples
    times = [at for at, _ in finished.pss_samples]
    assert times == sorted(times)
    assert max(pss for _, pss in finished.pss_samples) == finished.peak_pss_bytes > 0
