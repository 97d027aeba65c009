"""`imgpipe audit` from the command line: its console, its exit status and its record in ML
Metadata."""

import numpy as np
import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2
from PIL import Image

from components import metadata_keys
from components.validation.data_health import read_health
from pipeline import exit_codes
from pipeline.cli import main
from pipeline.lineage import examples_lineage
from pipeline.lineage.formatting import format_examples_lineage
from pipeline.mlmd_connection import metadata_path_under

IN_PROCESS = ["--", "--direct_running_mode=in_memory", "--direct_num_workers=1"]


def write_images(folder, per_class: int) -> None:
    """Two classes of noisy colour squares, distinct enough never to be near-duplicates."""
    for c, name in enumerate(("blue", "red")):
        for i in range(per_class):
            rng = np.random.default_rng(c * 1000 + i)
            pixels = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
            path = folder / name / f"{i}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(pixels).save(path)


@pytest.mark.slow
def test_audit_of_a_folder_reports_and_records_a_data_health_of_its_examples(tmp_path, capfd):
    write_images(tmp_path / "images", 10)
    build = tmp_path / "build"
    code = main(
        [
            "audit",
            "--data",
            str(tmp_path / "images"),
            "--build-dir",
            str(build),
            "--preset",
            "runlocal",
            "--folds",
            "2",
            "--method",
            "training",
            *IN_PROCESS,
        ]
    )
    out, err = capfd.readouterr()
    assert code == exit_codes.OK, err
    assert err == ""
    assert "error" not in out.lower() and "Traceback" not in out
    assert "  rejected 0" in out
    assert "  fold 1 of 2: 10 images held out, the others to train on" in out
    assert "  fold 2 of 2" in out and " ran " in out
    # The runlocal models learn nothing: the audit says so and names no suspect.
    assert "likely mislabelled images: none listed of 20: the audit's models score at " in out
    report = next(line for line in out.splitlines() if line.startswith("report: "))
    health = read_health(report.removeprefix("report: ").rsplit("/", 1)[0])
    assert health["eval_images_checked"] == 20 and health["audit"]["folds"] == 2
    assert health["audit"]["at_chance"] and health["label_issues"] == []

    store = metadata_store.MetadataStore(_sqlite(metadata_path_under(str(build))))
    [audit] = store.get_executions_by_type(metadata_keys.AUDIT_EXECUTION_TYPE)
    events = store.get_events_by_execution_ids([audit.id])
    by_key = {(event.type, event.path.steps[0].key): event.artifact_id for event in events}
    examples_id = by_key[(mlmd_pb2.Event.INPUT, "examples")]
    health_id = by_key[(mlmd_pb2.Event.OUTPUT, metadata_keys.DATA_HEALTH_OUTPUT_KEY)]
    [examples] = store.get_artifacts_by_id([examples_id])
    [recorded] = store.get_artifacts_by_id([health_id])
    assert examples.custom_properties[metadata_keys.LABEL_MAP_PROPERTY].string_value == (
        '{"blue": 0, "red": 1}'
    )
    assert recorded.custom_properties["eval_images_checked"].int_value == 20
    assert recorded.custom_properties[metadata_keys.AUDIT_FOLDS_PROPERTY].int_value == 2
    properties = recorded.custom_properties
    assert properties[metadata_keys.AUDIT_METHOD_PROPERTY].string_value == "training"
    assert properties[metadata_keys.AUDIT_AT_CHANCE_PROPERTY].int_value == 1
    assert (
        properties[metadata_keys.AUDIT_ACCURACY_PROPERTY].double_value
        == (health["audit"]["held_out_accuracy_overall"])
    )
    assert properties["label_issues"].int_value == 0
    # The lineage reads the audit's ingest as it reads a run's.
    dataset = examples_lineage(store, examples_id).dataset
    assert dataset.input == str(tmp_path / "images") and dataset.totals["accepted"] == 20
    assert "AuditIngest" in format_examples_lineage(examples_lineage(store, examples_id))


def test_an_audit_at_chance_level_says_so_and_lists_no_suspect():
    from pipeline.cli.audit import summary_lines

    health = {
        "label_issues": [],
        "eval_images_checked": 120,
        "near_duplicates": {"clusters": 0, "images": 0, "fraction": 0.0},
        "odd_images": {"count": 0},
        "audit": {
            "method": "training",
            "folds": 3,
            "held_out_accuracy": [0.18, 0.2, 0.22],
            "held_out_accuracy_overall": 0.2,
            "chance_accuracy": 1 / 6,
            "at_chance": True,
        },
    }
    lines = summary_lines(health, "/r")
    assert lines[0] == "found 0"
    assert lines[1].startswith("likely mislabelled images: none listed of 120: the audit's ")
    assert "held-out accuracy 0.200, always answering the most common class 0.167" in lines[1]
    assert lines[1].endswith("train them longer or on more images")
    assert not any(line.startswith("  ") for line in lines)


def test_an_audit_prints_its_findings_on_one_line_by_kind():
    from pipeline.cli.audit import summary_lines

    suspect = {"path": "cat/3.jpg", "given": "cat", "predicted": "dog", "confidence": 0.9}
    health = {
        "label_issues": [suspect] * 5,
        "eval_images_checked": 120,
        "near_duplicates": {"clusters": 3, "images": 7, "fraction": 0.06},
        "odd_images": {"count": 2},
        "audit": {
            "method": "embeddings",
            "folds": 3,
            "held_out_accuracy": [0.9, 0.92, 0.94],
            "held_out_accuracy_overall": 0.92,
            "chance_accuracy": 1 / 6,
            "at_chance": False,
        },
    }
    lines = summary_lines(health, "/r")
    assert lines[0] == "found 14: likely_mislabelled 5, near_duplicate_images 7, odd_images 2"
    assert lines[1].startswith("likely mislabelled images: 5 of 120")
    assert "(embeddings, 3 folds, held-out accuracy 0.900 to 0.940)" in lines[1]


@pytest.mark.slow
def test_the_default_audit_fits_embeddings_and_records_its_method(tmp_path, capfd):
    write_images(tmp_path / "images", 10)
    build = tmp_path / "build"
    argv = ["audit", "--data", str(tmp_path / "images"), "--build-dir", str(build)]
    code = main([*argv, "--folds", "2", *IN_PROCESS])
    out, err = capfd.readouterr()
    assert code == exit_codes.OK, err
    assert err == "" and "error" not in out.lower()
    assert "  embeddings " in out and "fold 1 of 2" not in out
    # Noise in both classes: the embeddings cannot tell them apart either, and say what to try.
    assert "so they cannot tell a wrong label; try --method training, or more images" in out
    store = metadata_store.MetadataStore(_sqlite(metadata_path_under(str(build))))
    [recorded] = store.get_artifacts_by_type(metadata_keys.DATA_HEALTH_TYPE)
    properties = recorded.custom_properties
    assert properties[metadata_keys.AUDIT_METHOD_PROPERTY].string_value == "embeddings"
    assert properties["eval_images_checked"].int_value == 20


def test_chance_is_the_most_common_class_and_clearly_above_it_beats_its_noise():
    from components.validation.label_audit import chance_accuracy, clearly_above_chance

    assert chance_accuracy(np.array([0, 1, 1, 2, 1, 0])) == 0.5
    assert not clearly_above_chance(0.20, 1 / 6, 120)  # the chance-level audit
    assert not clearly_above_chance(0.23, 1 / 6, 120)
    assert clearly_above_chance(0.40, 1 / 6, 120)
    assert clearly_above_chance(0.9, 0.5, 40)


def _sqlite(path: str) -> mlmd_pb2.ConnectionConfig:
    config = mlmd_pb2.ConnectionConfig()
    config.sqlite.filename_uri = path
    return config


@pytest.mark.slow
def test_too_little_data_for_the_folds_is_one_error_line(tmp_path, capfd):
    write_images(tmp_path / "images", 2)
    build = tmp_path / "build"
    argv = ["audit", "--data", str(tmp_path / "images"), "--build-dir", str(build)]
    code = main(
        [*argv, "--preset", "runlocal", "--folds", "3", "--method", "training", *IN_PROCESS]
    )
    err = capfd.readouterr().err.strip().splitlines()
    assert code == exit_codes.BAD_INPUT
    assert len(err) == 1
    assert err[0].startswith("imgpipe audit: error: 4 images in 3 folds leave 2 training ")


def test_a_store_without_an_ingest_and_a_single_fold_are_one_error_line(tmp_path, capfd):
    build = str(tmp_path / "build")
    assert main(["audit", "--build-dir", build, "--folds", "1"]) == exit_codes.BAD_INPUT
    assert capfd.readouterr().err == "imgpipe audit: error: --folds: 1 is below 2\n"
    assert main(["audit", "--build-dir", build]) == exit_codes.BAD_INPUT
    [line] = capfd.readouterr().err.splitlines()
    assert line.startswith("imgpipe audit: error: ")
