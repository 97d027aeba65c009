import pytest

from data_prep.contract.config_error import ConfigError
from data_prep.ingest import IngestFailed
from data_prep.reading.sources import SourceError
from pipeline import exit_codes
from pipeline.cli import main
from pipeline.cli.failures import describe_failure
from pipeline.run_guard import RunBusy


def test_every_outcome_has_its_own_status():
    statuses = [
        exit_codes.OK,
        exit_codes.COMPONENT_FAILED,
        exit_codes.BAD_INPUT,
        exit_codes.NOT_PUSHED,
        exit_codes.GATE_STOPPED,
        exit_codes.BUSY,
        exit_codes.INTERRUPTED,
    ]
    assert len(set(statuses)) == len(statuses)
    assert sorted(exit_codes.IN_WORDS) == sorted(statuses)


def test_run_help_lists_every_status_in_words(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for code, words in exit_codes.IN_WORDS.items():
        assert f"{code} {words}" in text


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (KeyboardInterrupt(), exit_codes.INTERRUPTED),
        (RunBusy("imgpipe", None), exit_codes.BUSY),
        (ConfigError("trainer.epochs", "must be positive"), exit_codes.BAD_INPUT),
        (SourceError("no class folders under /data"), exit_codes.BAD_INPUT),
        (IngestFailed("60% of the files were rejected"), exit_codes.BAD_INPUT),
        (RuntimeError("Beam job failed"), exit_codes.COMPONENT_FAILED),
    ],
)
def test_a_raised_error_gets_the_status_of_its_kind(error, code):
    assert exit_codes.of_error(error) == code
    assert describe_failure(error, "Trainer")[0] == code


def test_the_error_line_names_the_component_and_the_last_line_of_the_cause():
    error = RuntimeError("Traceback (most recent call last):\n  ...\nValueError: bad shard\n")
    assert describe_failure(error, "Transform") == (
        exit_codes.COMPONENT_FAILED,
        "Transform: RuntimeError: ValueError: bad shard",
    )
    assert describe_failure(KeyboardInterrupt(), "Trainer")[1] == "interrupted in Trainer"
    busy = describe_failure(RunBusy("imgpipe", None), None)[1]
    assert busy.endswith("(another process); leave out --no-wait to wait for it")


@pytest.mark.parametrize(
    ("pushed", "stopped_by", "failed", "code"),
    [
        (True, None, False, exit_codes.OK),
        (False, None, False, exit_codes.OK),  # nothing to evaluate
        (False, exit_codes.STOPPED_BY_GATE, True, exit_codes.GATE_STOPPED),
        (False, exit_codes.STOPPED_BY_EVALUATOR, False, exit_codes.NOT_PUSHED),
        (False, exit_codes.STOPPED_BY_SERVING_CHECK, False, exit_codes.NOT_PUSHED),
        (False, "Transform", True, exit_codes.COMPONENT_FAILED),
        (False, None, True, exit_codes.COMPONENT_FAILED),
    ],
)
def test_a_finished_run_gets_the_status_of_what_stopped_it(pushed, stopped_by, failed, code):
    assert exit_codes.of_run(pushed, stopped_by, failed) == code
