"""How `make test` spreads the suite over worker processes (pytest-xdist, `--dist loadgroup`):
a module's tests stay on one worker, so a module-scoped pipeline run is made once; every test that
uses the shared two-run store (tests/pipeline/conftest.py) joins one group, so it is made once."""

import pytest

SHARED_STORE_FIXTURE = "two_runs"


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the test ids
def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        group = SHARED_STORE_FIXTURE if SHARED_STORE_FIXTURE in item.fixturenames else None
        item.add_marker(pytest.mark.xdist_group(group or item.module.__name__))
