"""A system program some tests drive (Chromium, MariaDB): when it is missing they fail, saying
what to install, unless IMGPIPE_TESTS_SKIP_MISSING=1 asks to skip them (a machine that cannot
have it), so a suite never quietly proves less than it says."""

import os

import pytest

SKIP_MISSING = "IMGPIPE_TESTS_SKIP_MISSING"


def require(found: object, what: str, package: str) -> None:
    """Fails (or, with SKIP_MISSING=1, skips) the calling test when found is None."""
    if found is not None:
        return
    message = f"needs {what}: `make test` installs it (Debian/Ubuntu: apt-get install {package})"
    if os.environ.get(SKIP_MISSING) == "1":
        pytest.skip(message)
    pytest.fail(f"{message}; {SKIP_MISSING}=1 skips these tests instead", pytrace=False)
