"""One Ray instance for the dist tests: Ray takes seconds (15 s on a loaded 2-core machine) to
start, so every dist test shares the embedded instance this fixture starts. A test's task
actors end with the test, and Ray itself with the last dist test: idle actor processes (one per
task of every cluster a test made, 70 and more) and Ray's daemons otherwise stay to the end of
the whole run and take a share of the cores from every test after them."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("ray", reason="opsdk.dist needs Ray Core: pip install 'opsdk[dist]'")


@pytest.fixture(scope="session")
def ray_engine(tmp_path_factory):
    """The embedded Ray instance (dashboard off, loopback, small object store, own temp dir)."""
    import tempfile

    from opsdk.dist import engine

    # Ray's socket paths must stay under 107 bytes: pytest's tmp_path is too deep.
    folder = tempfile.mkdtemp(prefix="opsdk-ray-")
    yield engine.connect(temp_dir=folder)
    engine.shutdown()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _tasks_end_with_their_test():
    """Kill the task actors (Ray namespace `opsdk`) a test leaves behind."""
    yield
    import ray  # not opsdk.dist.engine's: a test may have replaced it

    if not ray.is_initialized():
        return
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry["namespace"] == "opsdk":
            try:
                ray.kill(ray.get_actor(entry["name"], namespace="opsdk"), no_restart=True)
            except ValueError:  # gone meanwhile
                pass


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After the last dist test of the run, stop Ray (the session fixture's own end comes only
    when the whole run ends)."""
    here = item.path.parent
    if nextitem is None or nextitem.path.parent != here:
        from opsdk.dist import engine

        engine.shutdown()
