"""Which lost SDK workers explain a failed job: a worker stopped because its job finished is no
loss, one that vanished while its job ran and the job then failed or was cancelled is."""

from apache_beam.portability.api import beam_job_api_pb2

from pipeline.runners.local_cluster import lost_while_running

State = beam_job_api_pb2.JobState


def test_a_worker_stopped_at_the_end_of_a_done_job_is_no_loss():
    assert lost_while_running([({11}, {"job-1"})], {"job-1": State.DONE}) == set()


def test_a_worker_gone_while_its_job_ran_explains_the_job_failing():
    vanished = [({11}, {"job-1"}), ({12}, {"job-2"})]
    states = {"job-1": State.DONE, "job-2": State.FAILED}
    assert lost_while_running(vanished, states) == {12}


def test_a_cancelled_or_still_running_job_counts_as_not_done():
    vanished = [({11}, {"job-1"}), ({12}, {"job-2"})]
    states = {"job-1": State.CANCELLED, "job-2": State.RUNNING}
    assert lost_while_running(vanished, states) == {11, 12}


def test_a_worker_gone_between_jobs_is_no_loss():
    assert lost_while_running([({11}, set())], {"job-1": State.FAILED}) == set()
