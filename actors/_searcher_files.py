"""The file I/O of searchers' states (``actors.search._file_state.SearcherFiles``): a file-writing
searcher's ``save(path)``/``restore(path)`` on temporary files, and Ray's ``save_to_dir`` and
``restore_from_dir`` files. Importing this module installs it (``_file_state.files()`` does, when first asked).
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import uuid
from collections.abc import Callable
from typing import Any

from actors._tempdirs import owned_tempdir
from actors.search import _file_state
from actors.search._file_state import CKPT_FILE_TMPL, load_state, writes_a_file

log = logging.getLogger("audition")


class _Files:
    def written(self, write: Callable[[str], Any]) -> bytes | None:
        tmp = owned_tempdir("searcher")
        try:
            path = os.path.join(tmp, CKPT_FILE_TMPL.format("default"))
            write(path)
            if not os.path.exists(path):
                return None
            with open(path, "rb") as f:
                return f.read()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def read_back(self, data: bytes, read: Callable[[str], Any]) -> None:
        tmp = owned_tempdir("searcher")
        try:
            path = os.path.join(tmp, CKPT_FILE_TMPL.format("default"))
            with open(path, "wb") as f:
                f.write(data)
            read(path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def save_to_dir(self, searcher: Any, checkpoint_dir: str, session_str: str) -> None:
        """Written to a hidden file first and renamed, so a reader never sees half of it; a searcher
        without a ``save`` is skipped with a warning, as Ray skips it."""
        import cloudpickle

        name = _template(searcher).format(session_str)
        tmp = os.path.join(checkpoint_dir, f".{uuid.uuid4()}-tmp-{name}")
        try:
            if writes_a_file(searcher):
                searcher.save(tmp)
            else:
                state = searcher.save()
                with open(tmp, "wb") as f:
                    cloudpickle.dump(state, f)
        except NotImplementedError:
            log.warning("%s does not implement save(); save_to_dir(%r) wrote nothing", type(searcher).__name__,
                        checkpoint_dir)
            if os.path.exists(tmp):
                os.remove(tmp)
            return
        if os.path.exists(tmp):
            os.replace(tmp, os.path.join(checkpoint_dir, name))

    def restore_from_dir(self, searcher: Any, checkpoint_dir: str) -> bool:
        """The greatest name wins, as in Ray (its session strings are timestamps)."""
        where = glob.escape(os.path.expanduser(checkpoint_dir))
        found = glob.glob(os.path.join(where, _template(searcher).format("*")))
        if not found:
            return False
        newest = max(found)
        if writes_a_file(searcher):
            searcher.restore(newest)
            return True
        from actors._legacy import loads

        with open(newest, "rb") as f:
            load_state(searcher, loads(f.read()))
        return True

    def experiment_searcher_state(self, path: str) -> Any:
        from actors._driver.restore import experiment_searcher_state

        return experiment_searcher_state(path)


def _template(searcher: Any) -> str:
    """The searcher's ``CKPT_FILE_TMPL`` (Ray's reads ``self.CKPT_FILE_TMPL``: a subclass may change it)."""
    return str(getattr(searcher, "CKPT_FILE_TMPL", CKPT_FILE_TMPL))


_file_state.FILES = _Files()
