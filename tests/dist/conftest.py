"""One Ray instance for the whole test session: Ray takes seconds (15 s on a loaded 2-core
machine) to start, so every dist test shares the embedded instance this fixture starts."""

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
