"""Model card pieces that do not need a pipeline run: the input spec read from saved_model.pb,
the trainer's reports read whatever they hold, package versions. The whole card is checked on a
pipeline run in tests/e2e/test_local_run.py."""

import os

import pytest

from components import model_card


def test_trainer_reports_reads_every_json_file_and_tolerates_a_broken_one(tmp_path):
    (tmp_path / "training_metrics.json").write_text('{"eval_accuracy": 0.5}')
    (tmp_path / "performance.json").write_text('{"images_per_second": 10')  # cut short
    (tmp_path / "notes.txt").write_text("not a report")
    (tmp_path / "logs").mkdir()

    reports = model_card.trainer_reports(str(tmp_path))

    assert list(reports) == ["performance.json", "training_metrics.json"]
    assert reports["training_metrics.json"] == {"eval_accuracy": 0.5}
    assert "unreadable" in reports["performance.json"]


def test_package_versions_name_the_stack():
    versions = model_card.package_versions()
    assert versions["tfx"] == "1.16.0"
    assert versions["tensorflow"].startswith("2.16")


@pytest.mark.slow
def test_signature_spec_reads_both_signatures_from_the_saved_model(model_artifact):
    spec = model_card.signature_spec(os.path.join(model_artifact.uri, "Format-Serving"))

    assert spec["serving_default"]["inputs"] == {"examples": {"dtype": "string", "shape": [None]}}
    assert spec["serving_images"]["inputs"] == {"images": {"dtype": "string", "shape": [None]}}
    for signature in spec.values():
        assert signature["outputs"]["probabilities"] == {"dtype": "float32", "shape": [None, 3]}
        assert signature["outputs"]["class_names"]["dtype"] == "string"


def test_class_names_in_the_markdown_card_show_html_and_control_characters_as_text():
    from components.model_card import markdown_text

    assert markdown_text("<img src=x onerror=alert(1)>") == "&lt;img src=x onerror=alert(1)&gt;"
    assert markdown_text("cat\x1b[31m|dog") == "cat\\x1b[31m\\|dog"
    assert markdown_text("plain owl") == "plain owl"
