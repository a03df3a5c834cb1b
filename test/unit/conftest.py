"""Test-suite defaults: an isolated compile cache (never the user's ~/.cache/dlc).

Every test process gets its own temporary DLC_CACHE_DIR, removed at exit, unless the
environment already names one (or turns the cache off with DLC_CACHE=0).
"""

import atexit
import os
import shutil
import tempfile

if "DLC_CACHE_DIR" not in os.environ:
    _CACHE_DIR = tempfile.mkdtemp(prefix="dlc-test-cache-")
    os.environ["DLC_CACHE_DIR"] = _CACHE_DIR
    atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
