"""A script of the source checkout (scripts/, bench/) loaded as a module, for the tests of that
script; skips the test where the checkout is absent (an installed package's tests)."""
import importlib.util
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.environ.get("SAGE2_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))


def load(relpath):
    path = os.path.join(REPO, relpath)
    if not os.path.exists(path):
        pytest.skip("no %s (an installed package without the checkout)" % relpath)
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
