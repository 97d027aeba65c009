"""A hash of the project's own source, part of every code-running component's settings.

Transform and the Trainer import their code by name (no module_file, so TFX fingerprints no
code of ours); folding this hash into their settings makes an edit anywhere in data_prep/ or
components/ invalidate their cache, and records in ML Metadata which code made each artifact.
"""

import hashlib
import pathlib

import components
import data_prep

PACKAGES = (data_prep, components)


def code_fingerprint() -> str:
    digest = hashlib.sha256()
    for package in PACKAGES:
        root = pathlib.Path(package.__file__).parent
        for path in sorted(root.rglob("*.py")):
            digest.update(f"{path.relative_to(root.parent)}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()
