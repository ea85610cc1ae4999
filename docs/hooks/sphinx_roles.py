"""mkdocs hook: show the docstrings' Sphinx roles (:class:`X`) as plain code in the API reference.

The code's docstrings use reST roles, which mkdocstrings renders literally as ``:class:X``.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|meth|func|attr|mod|exc|data|obj):(<code>)")


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub(r"\1", html)
