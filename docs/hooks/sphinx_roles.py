"""MkDocs hook: show Sphinx roles left in docstrings as plain code.

Docstrings in ``src/orc`` use reStructuredText roles such as
``:class:`ESNForecaster``` and ``:func:`train_RCForecaster```. The numpy/Google
parsers of mkdocstrings keep the role name in front of the rendered code span
(``:class:<code>ESNForecaster</code>``); this hook drops the role name and the
``~`` shortening mark so readers see ``ESNForecaster``.
"""

from __future__ import annotations

import re

_ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|math|const|ref):"
    r"(<code>)~?"
)


def on_page_content(html: str, **_kwargs) -> str:
    return _ROLE.sub(r"\1", html)
