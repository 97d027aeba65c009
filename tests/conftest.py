"""How `make test` spreads the suite over worker processes (pytest-xdist, `--dist loadgroup`):
a module's tests stay on one worker, so a module-scoped pipeline run is made once; every test that
uses the shared two-run store (tests/pipeline/conftest.py) joins one group, so it is made once.
Modules with slow tests are handed out first, end-to-end ones (pipeline runs) first of all, so no
worker is left with a long one at the end."""

import pytest

SHARED_STORE_FIXTURE = "two_runs"
END_TO_END = ("tests/pipeline/", "tests/notebooks/")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the test ids
def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist"):  # the orchestrators' environment has none
        return
    slow_modules = {item.module for item in items if item.get_closest_marker("slow")}

    def handed_out(item):  # sort is stable: a module's tests stay together, in their order
        end_to_end = item.nodeid.startswith(END_TO_END)
        return (item.module not in slow_modules, not end_to_end)

    items.sort(key=handed_out)
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        group = SHARED_STORE_FIXTURE if SHARED_STORE_FIXTURE in item.fixturenames else None
        item.add_marker(pytest.mark.xdist_group(group or item.module.__name__))
