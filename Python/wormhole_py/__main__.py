# SPDX-License-Identifier: Apache-2.0
"""``python3 -m wormhole_py``: the ``wormhole-py`` command line."""

from .cli import run

run()
