"""tvm.contrib.utils.tempdir: a temporary directory for exported libraries and dumps."""
from __future__ import annotations

import os
import shutil
import tempfile


class TempDirectory:
    """A directory removed by remove(), on leaving a `with`, or when collected (unless kept)."""

    def __init__(self, custom_path: str | None = None, keep_for_debug: bool = False) -> None:
        if custom_path is not None:
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir = os.path.abspath(custom_path)
        else:
            self.temp_dir = tempfile.mkdtemp(prefix="relayjit_")
        self._owned = custom_path is None and not keep_for_debug

    def relpath(self, name: str) -> str:
        """The path of `name` inside the directory."""
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list[str]:
        """The names of the directory's entries."""
        return os.listdir(self.temp_dir)

    def remove(self) -> None:
        """Delete the directory now (only one this object created)."""
        if self._owned and os.path.isdir(self.temp_dir):
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        self._owned = False

    def __enter__(self) -> TempDirectory:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __del__(self) -> None:
        self.remove()

    def __str__(self) -> str:
        return self.temp_dir


def tempdir(custom_path: str | None = None, keep_for_debug: bool = False) -> TempDirectory:
    """A new TempDirectory (TVM's tvm.contrib.utils.tempdir)."""
    return TempDirectory(custom_path, keep_for_debug)
