import numpy as np

from components import metadata_keys
from components.evaluation.evaluation_report import EvalScores
from components.validation import data_health


def test_health_joins_the_ingest_findings_and_the_label_suspects():
    ingest = {
        "near_duplicates": [["a/1.jpg", "a/1_small.jpg"]],
        "near_duplicate_share": {"clusters": 1, "images": 2, "fraction": 0.1},
        "odd_images": {
            "per_class": {"a": {"dark": 1}, "b": {"dark": 0}},
            "images": [{"path": "a/night.jpg", "flags": ["dark"]}],
        },
    }
    probabilities = np.tile([[0.9, 0.1]], (40, 1)).astype(np.float32)
    probabilities[20:] = probabilities[20:, ::-1]
    labels = np.array([0] * 20 + [1] * 20)
    labels[5] = 1  # a "b" that the model is sure is an "a"
    scores = EvalScores(labels, probabilities, [f"x/{i}.jpg" for i in range(40)])

    health = data_health.build_health(ingest, scores, ["a", "b"])

    assert health["near_duplicates"]["members"] == [["a/1.jpg", "a/1_small.jpg"]]
    assert [(i["path"], i["given"], i["predicted"]) for i in health["label_issues"]] == [
        ("x/5.jpg", "b", "a")
    ]
    assert data_health.counts(health) == {
        "near_duplicate_clusters": 1,
        "near_duplicate_images": 2,
        "odd_images": 1,
        "label_issues": 1,
        "eval_images_checked": 40,
    }
    assert tuple(data_health.counts(health)) == metadata_keys.DATA_HEALTH_COUNTS
