"""The build backend of `pip install .`: scikit-build-core, told to use Debian's cmake.

scikit-build-core takes the first `cmake` on PATH; where that is a PyPI cmake 4.x (a pyenv
shim, say) it falls outside `cmake.version` (<4) and scikit-build-core would fetch a CMake 3.x
from PyPI instead of the system's. This module names the system's cmake in CMAKE_EXECUTABLE
(as scripts/toolchain.sh does for the scripts: INFONCE_CMAKE_DIR, default /usr/bin) unless the
caller set CMAKE_EXECUTABLE, then hands every hook to scikit-build-core unchanged.
"""

from __future__ import annotations

import os

_cmake = os.path.join(os.environ.get("INFONCE_CMAKE_DIR", "/usr/bin"), "cmake")
if not os.environ.get("CMAKE_EXECUTABLE") and os.access(_cmake, os.X_OK):
    os.environ["CMAKE_EXECUTABLE"] = _cmake

from scikit_build_core.build import *  # noqa: E402,F401,F403 - the PEP 517 hooks
