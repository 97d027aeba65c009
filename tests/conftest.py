"""How `make test` spreads the suite over worker processes (pytest-xdist, `--dist loadgroup`):
the tests of a module with a module-scoped fixture stay on one worker, so a module-scoped pipeline
run is made once; every test that uses the shared two-run store (`two_runs`, below)
joins one group, so it is made once; a test that shares no such fixture is a group of its own,
which any free worker takes (a module of slow, independent trainings is not one long unit).
Modules with slow tests are handed out first, end-to-end ones (pipeline runs) first of all, so no
worker is left with a long one at the end."""

import tempfile

import pytest

SHARED_STORE_FIXTURE = "two_runs"
END_TO_END = ("tests/e2e/", "tests/pipeline/", "tests/notebooks/")
MODULE_SCOPES = ("module", "package")


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
        if not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(_group(item)))


def _group(item) -> str:
    """The shared store's group, the module's when the test uses a fixture made once per module
    (or package), else the test's own."""
    if SHARED_STORE_FIXTURE in item.fixturenames:
        return SHARED_STORE_FIXTURE
    closure = item._fixtureinfo.name2fixturedefs  # pytest's resolved fixtures of this test
    if any(definitions[-1].scope in MODULE_SCOPES for definitions in closure.values()):
        return item.module.__name__
    return item.nodeid


@pytest.hookimpl(optionalhook=True)  # an xdist hook, on the controller
def pytest_xdist_node_collection_finished(node, ids):
    """xdist's scheduler reads a test's group from its id, which the worker rewrites after the
    hook above; pytest 9.2 ignores that rewrite (pytest-xdist#1386), and then every module's
    fixtures, pipeline runs included, silently run once per worker. Stop instead."""
    ungrouped = [nodeid for nodeid in ids if "@" not in nodeid]
    if node.config.getoption("dist") == "loadgroup" and ungrouped:
        pytest.exit(
            f"pytest-xdist's --dist loadgroup lost the groups of {len(ungrouped)} tests "
            f"(e.g. {ungrouped[0]}) under pytest {pytest.__version__}: see pytest-xdist#1386",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


@pytest.fixture(scope="session", autouse=True)
def contained_temp_dir(tmp_path_factory):
    """Temporary files of the tests, and of the processes they start, go under pytest's base temp
    (which pytest prunes), not the system's: what a library leaves there (TFX's repackaging, Beam's
    temp folders) must not fill the disk run after run."""
    path = tmp_path_factory.mktemp("system-tmp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(path))
        patch.setattr(tempfile, "tempdir", str(path))
        yield path


@pytest.fixture(autouse=True)
def no_tfx_repackaging(contained_temp_dir):
    """TFX repackages its whole installation for remote Beam workers (10-16 s, 49 MB) whenever a
    Beam executor's args name no worker dependencies; local runs must pass their Beam args through
    pipeline.config.beam_options.resolve_beam_args, which does."""
    yield
    packages = sorted(contained_temp_dir.glob("*/build/tfx/dist/tfx_ephemeral-*"))
    for package in packages:
        package.unlink()
    if packages:
        pytest.fail(
            f"TFX repackaged itself for Beam workers ({packages[0].name}): pass the Beam args "
            "through pipeline.config.beam_options.resolve_beam_args"
        )


@pytest.fixture(scope="session")
def two_runs(tmp_path_factory):
    """The session's two-run store (tests/pipeline/two_run_store.py), for every package's tests:
    defined once here, so it is made once per test process."""
    from tests.pipeline import two_run_store

    return two_run_store.build(tmp_path_factory.mktemp("two_runs"))
