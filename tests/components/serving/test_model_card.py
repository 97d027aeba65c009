"""Model card pieces that do not need a pipeline run: the input spec read from saved_model.pb,
the trainer's reports read whatever they hold, package versions, the files placed beside the
card for the push. The whole card is checked on a
pipeline run in tests/e2e/test_local_run.py."""

import os

import pytest

from components.evaluation.evaluation_report import CONFUSION_PNG, MISCLASSIFIED_CSV, REPORT_FILE
from components.serving import model_card, tflite_export


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
    from components.serving.model_card import markdown_text

    assert markdown_text("<img src=x onerror=alert(1)>") == "&lt;img src=x onerror=alert(1)&gt;"
    assert markdown_text("cat\x1b[31m|dog") == "cat\\x1b[31m\\|dog"
    assert markdown_text("plain owl") == "plain owl"


def test_the_tflite_table_gives_each_models_gap_size_latency_and_file_or_refusal():
    tflite = {
        "files": {"float32": "model_float32.tflite"},
        "bytes": {"float32": 2**20, "int8": 2**18},
        "latency_ms": {"float32": {"p50": 1.1, "p99": 2.0}, "int8": {"p50": 0.3, "p99": 0.5}},
        "eval": {
            "examples": 100,
            "accuracy": {"saved_model": 0.95, "float32": 0.95, "int8": 0.92},
            "accuracy_gap_points": {"float32": 0.0, "int8": 3.0},
        },
    }

    lines = model_card.tflite_table(tflite)

    assert "SavedModel accuracy 0.9500" in lines[1]
    assert lines[-2:] == [
        "| float32 | 0.9500 | +0.00 | 1.00 | 1.10 / 2.00 | `tflite/model_float32.tflite` |",
        "| int8 | 0.9200 | +3.00 | 0.25 | 0.30 / 0.50 | refused |",
    ]


def test_the_card_shows_a_held_out_test_split_and_says_no_decision_uses_it():
    test = {"accuracy": 0.875, "examples": 40, "macro_f1": 0.86}
    assert model_card.held_out_lines(test) == [
        "- test accuracy: 0.8750 on 40 held-out test images (macro F1 0.8600); reported only, "
        "the blessing is decided on the eval split"
    ]
    assert model_card.held_out_lines(None) == []


def test_every_line_of_the_markdown_card_shows_html_and_control_characters_as_text():
    hostile = "<script>alert(1)</script>\x1b[31m"
    card = {
        "model": {"mlmd_artifact_id": 3, "uri": f"/srv/{hostile}"},
        "created": "2026-01-01",
        "training_data": {"examples_mlmd_artifact_id": 2, "train_examples_per_class": {}},
        "blessings": {"evaluator": True, "serving_check": True},
        "input_spec": {
            "signatures": {},
            "tflite": {"input": {"name": "images", "shape": [1], "meaning": "pixels"}},
        },
        "metrics": {
            "per_class": [],
            "tfma": {
                "candidate": {},
                "baseline": None,
                "thresholds": [],
                "validation_ok": True,
            },
            "macro_f1": None,
            "eval_warning": f"caution {hostile}",
            "most_confused": [],
            "misclassified_count": 0,
        },
        "data_health": {
            "odd_images_per_class": {},
            "near_duplicate_clusters": 0,
            "near_duplicate_images": 0,
            "near_duplicate_fraction": 0.0,
            "odd_images": 0,
            "eval_images_checked": 1,
            "label_issues": [{"path": hostile, "given": "a", "predicted": "b", "confidence": 0.9}],
        },
        "serving_check": {"problems": [f"problem {hostile}"]},
        "tflite": {
            "eval": {"examples": 1, "accuracy": {"saved_model": 1.0}, "accuracy_gap_points": {}},
            "not_convertible": {"ops": [], "note": hostile},
            "conversion_failed": {"int8": [hostile]},
            "refused": {"int8": hostile},
        },
        "package_versions": {"tfx": hostile},
    }

    text = model_card.card_markdown(card)

    assert "<" not in text and ">" not in text.replace("&gt;", "")
    assert "\x1b" not in text and "\\x1b[31m" in text
    assert text.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 8


def test_the_card_folder_holds_what_goes_beside_a_pushed_model(tmp_path):
    """The Pusher pushes the card's folder beside the model: the TFLite models kept, their
    report and the readable evaluation, under the names a version folder gives them."""
    tflite_dir, report_dir, card_dir = tmp_path / "tflite", tmp_path / "report", tmp_path / "card"
    tflite_dir.mkdir()
    report_dir.mkdir()
    card_dir.mkdir()
    for name in ("model_float32.tflite", "model_int8.tflite", tflite_export.REPORT_FILE):
        (tflite_dir / name).write_bytes(name.encode())
    for name in (REPORT_FILE, CONFUSION_PNG, MISCLASSIFIED_CSV):
        (report_dir / name).write_bytes(name.encode())

    model_card.copy_pushed_beside(
        str(tflite_dir), ["model_float32.tflite"], str(report_dir), str(card_dir)
    )

    found = sorted(str(p.relative_to(card_dir)) for p in card_dir.rglob("*") if p.is_file())
    assert found == [
        f"evaluation/{CONFUSION_PNG}",
        f"evaluation/{REPORT_FILE}",
        f"evaluation/{MISCLASSIFIED_CSV}",
        "tflite/model_float32.tflite",  # the refused int8 model is not pushed
        f"tflite/{tflite_export.REPORT_FILE}",
    ]
    assert (card_dir / "tflite" / "model_float32.tflite").read_bytes() == b"model_float32.tflite"
