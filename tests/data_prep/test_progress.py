"""Progress lines: what report() logs, parse() reads back, also inside a forwarded log line."""

import logging

from data_prep import progress


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
