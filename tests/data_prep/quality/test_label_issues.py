import numpy as np

from data_prep.quality.label_issues import find_label_issues

NAMES = ["cat", "dog", "fox"]


def scored(count: int, flipped: list[int], seed: int = 0):
    """A confident model's probabilities; the images in `flipped` carry another class's label."""
    rng = np.random.default_rng(seed)
    truth = np.arange(count) % len(NAMES)
    probabilities = rng.dirichlet(np.ones(len(NAMES)), count) * 0.2
    probabilities[np.arange(count), truth] += 0.8
    labels = truth.copy()
    labels[flipped] = (truth[flipped] + 1) % len(NAMES)
    return labels, probabilities, [f"{NAMES[t]}/{i}.jpg" for i, t in enumerate(truth)]


def test_flipped_labels_are_the_suspects_with_given_and_predicted_class():
    flipped = [3, 17, 40, 41, 88]
    labels, probabilities, paths = scored(120, flipped)
    issues = find_label_issues(labels, probabilities, paths, NAMES)
    assert sorted(paths.index(issue["path"]) for issue in issues) == flipped
    first = issues[0]
    index = paths.index(first["path"])
    assert first["given"] == NAMES[labels[index]]
    assert first["predicted"] == NAMES[probabilities[index].argmax()] != first["given"]
    assert first["confidence"] == probabilities[index].max()
    given = [issue["given_label_probability"] for issue in issues]
    assert given == sorted(given)  # least likely given label first


def test_clean_labels_and_no_images_give_no_suspects():
    labels, probabilities, paths = scored(60, [])
    assert find_label_issues(labels, probabilities, paths, NAMES) == []
    empty = np.zeros((0, 3))
    assert find_label_issues(np.zeros(0, int), empty, [], NAMES) == []
