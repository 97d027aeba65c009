"""The run console: component lines, plain progress lines (no terminal) with rates and ETAs, and
the capture that sends this process's and its children's output to the run log."""

import io
import logging
import subprocess
import sys
import textwrap

from data_prep.runtime import progress
from pipeline import console


def _handler():
    out = io.StringIO()
    shown = console.Console(out)
    return shown, console._ConsoleHandler(shown), out


def _log(handler, message, *args):
    handler.handle(logging.LogRecord("absl", logging.INFO, __file__, 1, message, args, None))


def test_component_lines_say_started_and_ran_cached_or_failed():
    shown, handler, out = _handler()
    for node, outcome in (("StatisticsGen", None), ("SchemaGen", "cached"), ("Trainer", "failed")):
        _log(handler, "Component %s is running.", node)
        assert shown.component == node
        if outcome == "cached":
            _log(handler, "A cached execution %d is used.", 7)
        if outcome == "failed":
            _log(handler, "Execution %d failed.", 8)
        _log(handler, "Component %s is finished.", node)
    _log(handler, "Going to run a new execution 9")  # TFX's other lines show nothing
    lines = [line.split() for line in out.getvalue().splitlines()]
    assert [line[:2] for line in lines] == [
        ["StatisticsGen", "started"],
        ["StatisticsGen", "ran"],
        ["SchemaGen", "started"],
        ["SchemaGen", "cached"],
        ["Trainer", "started"],
        ["Trainer", "failed"],
    ]
    assert shown.component is None


def test_ingest_progress_adds_up_the_workers_and_gives_rate_and_eta():
    shown, handler, out = _handler()
    logger = logging.getLogger("data_prep.ingest")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        progress.report(logger, "ingest", done=64, total=1800, seconds=2, worker=11)
        # A worker process's line arrives as text, forwarded by Beam's job service.
        forwarded = 'message: "progress ingest done=128 total=1800 seconds=4 worker=12" x: "y"'
        _log(handler, "Worker: %s", forwarded)
        progress.report(logger, "ingest", done=1672, total=1800, seconds=50, worker=11)
    finally:
        logger.removeHandler(handler)
    lines = out.getvalue().splitlines()
    # 64 files in 2 s: 32 images/s; the 1736 left take 54 s.
    assert lines[0] == "  ingest: 64 of 1800 files inspected, 32 images/s, ETA 54 s"
    # The second line is throttled (seconds later); the last one (all done) always shows.
    assert lines[1:] == ["  ingest: 1800 of 1800 files inspected, 65 images/s, ETA 0 s"]


def test_training_progress_shows_each_epoch_with_its_validation():
    shown, handler, out = _handler()
    _log(handler, "Component %s is running.", "Trainer")
    for step, epoch in ((2, 1), (4, 1), (6, 2), (8, 2)):
        validation = " val_loss=0.71 val_accuracy=0.45" if step % 4 == 0 else ""
        _log(
            handler,
            "progress training done=%d total=8 seconds=%d epoch=%d epochs=2 "
            "images_per_second=31.5 loss=0.693 accuracy=0.5%s",
            step,
            step,  # one step a second
            epoch,
            validation,
        )
    shown = "31.5 images/s, loss 0.6930, accuracy 0.5000"
    validated = f"{shown}, val_loss 0.7100, val_accuracy 0.4500"
    assert out.getvalue().splitlines()[1:] == [
        f"  Trainer: epoch 1 of 2, step 2 of 8, {shown}, ETA 6 s",  # the first line
        f"  Trainer: epoch 1 of 2, step 4 of 8, {validated}, ETA 4 s",  # an epoch's end
        f"  Trainer: epoch 2 of 2, step 8 of 8, {validated}, ETA 0 s",
    ]


_CAPTURED = textwrap.dedent(
    """
    import logging, subprocess, sys
    from pipeline import console
    with console.capture(sys.argv[1], verbose=False) as shown:
        print("python print")
        logging.getLogger("tfx").warning("library warning")
        subprocess.run(["sh", "-c", "echo child stdout; echo child stderr >&2"], check=True)
        shown.say("shown line")
    print("after the run")
    """
)


def test_capture_sends_output_of_the_process_and_its_children_to_the_log(tmp_path):
    log = tmp_path / "logs" / "run.log"
    result = subprocess.run(
        [sys.executable, "-c", _CAPTURED, str(log)], capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines() == ["shown line", "after the run"]
    assert result.stderr == ""
    text = log.read_text()
    for line in ("python print", "library warning", "child stdout", "child stderr"):
        assert line in text


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_on_a_terminal_training_progress_is_a_live_bar():
    out = _Terminal()
    shown = console.Console(out)
    handler = console._ConsoleHandler(shown)
    _log(handler, "Component %s is running.", "Trainer")
    for step in (2, 4):
        _log(
            handler,
            "progress training done=%d total=8 seconds=%d epoch=1 epochs=2 "
            "images_per_second=31.5 loss=0.693 accuracy=0.5",
            step,
            step,
        )
    _log(handler, "Component %s is finished.", "Trainer")
    text = out.getvalue()
    assert "\r" in text and "4/8" in text  # redrawn in place
    assert "epoch 1/2, 31.5 images/s, loss 0.6930, accuracy 0.5000" in text
    assert text.rstrip().splitlines()[-1].split() == ["Trainer", "ran", *text.split()[-2:]]


def test_a_line_naming_a_file_shows_its_escape_codes_instead_of_obeying_them(capsys):
    import io

    from pipeline.cli.failures import report_failure

    out = io.StringIO()
    console.Console(out).say("removed /serving/\x1b[2Jx")
    assert out.getvalue() == "removed /serving/\\x1b[2Jx\n"
    report_failure("run", (1, "cannot read cat\x1b]0;title\x07/a.jpg"), "/log")
    assert capsys.readouterr().err == (
        "imgpipe run: error: cannot read cat\\x1b]0;title\\x07/a.jpg (full log: /log)\n"
    )


def test_a_notice_is_shown_under_the_running_component():
    shown, handler, out = _handler()
    _log(handler, "Component %s is running.", "Trainer")
    record = logging.LogRecord("trainer", logging.INFO, __file__, 1, "notice: %s", ("x",), None)
    handler.handle(record)
    _log(handler, "worker 3: notice: %s", "forwarded from a worker")
    lines = out.getvalue().splitlines()[1:]
    assert [line.strip() for line in lines] == ["Trainer: x", "Trainer: forwarded from a worker"]
