# SPDX-License-Identifier: Apache-2.0
"""The names of wormhole-py 0.1 that the one vocabulary of 0.2 (the Swift names)
replaced: each still works for one release and warns when used."""

from __future__ import annotations

import os
import warnings
from typing import Optional, Union

#: A container root as the constructors take it.
Root = Optional[Union[str, "os.PathLike[str]"]]


def renamed(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` is the deprecated spelling of ``new`` (a
    :class:`DeprecationWarning` pointing at the caller's line)."""
    warnings.warn("%s is deprecated; use %s (the name Swift and GJS use too); the old name goes in the next release"
                  % (old, new), DeprecationWarning, stacklevel=stacklevel)


def container_root_keyword(container_root: Root, root: Root, owner: str) -> Root:
    """The container root given as ``container_root=`` or, deprecated, ``root=``."""
    if root is None:
        return container_root
    renamed("%s(root=...)" % owner, "%s(container_root=...)" % owner, stacklevel=4)
    if container_root is not None:
        raise TypeError("%s() got both container_root= and root= (the deprecated spelling)" % owner)
    return root
