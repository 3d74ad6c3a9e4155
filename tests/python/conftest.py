"""Shared setup of the Python package tests: where the repository, the CLI and ../shared are.

Like the C++ tests: data in ../shared (or $CHIMERA_SHARED) is skipped when absent, and a failure when
$CHIMERA_SHARED names a folder that does not exist.
"""
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))


def shared_dir():
    env = os.environ.get("CHIMERA_SHARED")
    if env:
        if not pathlib.Path(env).is_dir():
            pytest.fail(f"CHIMERA_SHARED={env} is not a directory")
        return pathlib.Path(env)
    p = REPO.parent / "shared"
    if not p.is_dir():
        pytest.skip("shared data not found (set CHIMERA_SHARED)")
    return p


def cli_path():
    return pathlib.Path(os.environ.get("CHIMERA_BIN", REPO / "build" / "chimera"))


def run_cli(*args, stdin=None):
    """stdout of `chimera ARGS` (which must succeed)."""
    r = subprocess.run([str(cli_path()), *map(str, args)], input=stdin, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout


MODELS = {
    "stories260K": "models/stories260K.gguf",
    "granitehybrid": "golden/models/tiny-granitehybrid.gguf",
}


@pytest.fixture(params=sorted(MODELS))
def model_path(request):
    path = shared_dir() / MODELS[request.param]
    assert path.is_file(), f"{path} is missing from the shared data"
    return path


@pytest.fixture
def stories_path():
    path = shared_dir() / MODELS["stories260K"]
    assert path.is_file(), f"{path} is missing from the shared data"
    return path


def pytest_sessionfinish(session, exitstatus):
    """Exit 77 (ctest: skipped) when some tests were skipped and none failed."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if exitstatus == 0 and reporter is not None and reporter.stats.get("skipped"):
        session.exitstatus = 77
