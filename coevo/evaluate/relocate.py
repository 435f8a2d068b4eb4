"""Start the fork server's interpreter from paths that name nothing of the machine.

Every module keeps the path it was imported from (``__file__``, ``__path__``, its code objects'
file names, and what is computed from them, such as ``np.get_include()``), and every child
inherits the fork server's modules: a candidate would learn where the checkout, the virtual
environment and the interpreter live. So the sandbox starts the fork server through this small
module. It shows the interpreter's installation and each directory of the import path under
neutral names (``isolation.mount_under_neutral_names``: ``ROOT/python`` and ``ROOT/path/N``),
and executes the interpreter from there, without ``site`` (whose ``.pth`` files name host
paths), so the fork server imports every module from those names. Where that cannot be done,
it runs the fork server in this process, from the host's paths, and the fork server reports
the ``paths`` layer missing.

Run as ``python -m coevo.evaluate.relocate ZYGOTE_ARGUMENTS...`` (see ``zygote``), with the
import path in PYTHONPATH.
"""

from __future__ import annotations

import os
import runpy
import sys

from coevo.evaluate.isolation import NEUTRAL_MOUNT_POINTS, mount_under_neutral_names

PYTHON = "python"
"""The neutral name of the interpreter's installation (its ``sys.base_prefix``)."""


def relocated() -> bool:
    """Whether this interpreter runs from the neutral names (ask before ``sys.prefix`` is cleared)."""
    return sys.prefix in {os.path.join(point, PYTHON) for point in NEUTRAL_MOUNT_POINTS}


def main() -> None:
    prefix, interpreter = os.path.realpath(sys.base_prefix), os.path.realpath(sys.executable)
    search = list(dict.fromkeys(os.path.realpath(path) for path in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                if path and os.path.isdir(path)))  # fmt: skip
    outside = [path for path in search if not _within(path, prefix)]
    names = {PYTHON: prefix, **{f"path/{number}": path for number, path in enumerate(outside)}}
    root = mount_under_neutral_names(names) if _within(interpreter, prefix) else None
    if root is None:
        runpy.run_module("coevo.evaluate.zygote", run_name="__main__", alter_sys=True)
        return
    neutral = {path: os.path.join(root, name) for name, path in names.items()}

    def renamed(path: str) -> str:
        return neutral[prefix] + path[len(prefix) :] if _within(path, prefix) else neutral[path]

    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(map(renamed, search))}
    executable = renamed(interpreter)
    os.chdir("/")  # ``-m`` puts the working directory first on the import path
    os.execve(executable, [executable, "-S", "-m", "coevo.evaluate.zygote", *sys.argv[1:]], environment)


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


if __name__ == "__main__":
    main()
