import os

from data_prep.runtime import cores


def test_counts_the_cores_this_process_may_run_on():
    assert cores.usable_cores() == len(os.sched_getaffinity(0))


def test_counts_the_machines_cores_where_the_os_has_no_affinity(monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert cores.usable_cores() == 6
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert cores.usable_cores() == 1
