"""Progress lines: what report() logs, parse() reads back, also inside a forwarded log line."""

import logging
import threading
import time

from data_prep.runtime import progress


def test_progress_lines_parse_back():
    record = []
    logger = logging.getLogger("test_progress_lines_parse_back")
    logger.addHandler(logging.Handler())
    logger.handlers[-1].emit = lambda r: record.append(r.getMessage())
    logger.setLevel(logging.INFO)
    progress.report(logger, "training", done=3, total=10, loss=0.25)
    assert progress.parse(record[0]) == progress.ProgressEvent(
        "training", {"done": 3.0, "total": 10.0, "loss": 0.25}
    )
    forwarded = f'message: "{record[0]}" instruction_id: "7"'
    assert progress.parse(forwarded) == progress.parse(record[0])
    assert progress.parse("a progress bar is nice") is None


def test_counter_adds_up_every_thread_of_a_run():
    counter = progress.ProgressCounter(every_s=0)
    now = time.monotonic()
    threads = [threading.Thread(target=counter.add, args=("run-a", 1, now)) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter.add("run-a", 5, now)[0] == 25
    assert counter.add("run-b", 2, now)[0] == 2  # another run counts on its own


def test_counter_says_a_line_is_due_at_a_runs_first_add_then_every_few_seconds():
    counter = progress.ProgressCounter(every_s=3600)
    now = time.monotonic()
    first, again, other = (counter.add(run, 5, now) for run in ("run-a", "run-a", "run-b"))
    since = time.monotonic() - now  # seconds a line can report, however slow this machine is
    assert first[0] == 5 and 0 <= first[1] <= since
    assert again is None
    assert other[0] == 5 and 0 <= other[1] <= since


def test_counter_times_a_run_from_when_its_first_work_began():
    """The first line has a rate: its seconds include the first bundle's own work."""
    counter = progress.ProgressCounter(every_s=3600)
    began = time.monotonic() - 2.0
    done, seconds = counter.add("run-a", 64, began)
    assert done == 64 and 2.0 <= seconds <= time.monotonic() - began


def test_notice_lines_parse_back(caplog):
    with caplog.at_level(logging.INFO):
        progress.notice(logging.getLogger("trainer"), "epochs stretched to 40")
    assert progress.parse_notice(caplog.records[0].getMessage()) == "epochs stretched to 40"
    assert progress.parse_notice("nothing to see") is None
