# SPDX-License-Identifier: Apache-2.0
"""CRC-32C (Castagnoli), the checksum of the journal's frames and of ``sync.lock``.

Reflected polynomial ``0x82F63B78``, initial value and final XOR ``0xFFFFFFFF``
(as in iSCSI).  Pure Python: eight 256-entry tables computed once at import
("slicing by 8": one loop turn per 8 bytes on little-endian machines, a
byte-at-a-time loop elsewhere and for the tail), about 55 ms per MiB.

Check values: ``crc32c(b"123456789") == 0xE3069283`` and
``crc32c(bytes(32)) == 0x8A9136AA``.
"""

from __future__ import annotations

import sys
from typing import List

__all__ = ["crc32c"]

_POLY = 0x82F63B78


def _make_tables() -> List[List[int]]:
    """The byte table of the reflected polynomial and the seven tables that
    advance it by one more byte each."""
    first = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        first.append(c)
    tables = [first]
    for _ in range(7):
        previous = tables[-1]
        tables.append([(previous[i] >> 8) ^ first[previous[i] & 0xFF] for i in range(256)])
    return tables


_TABLES = _make_tables()
_TABLE = _TABLES[0]
_WORDS = sys.byteorder == "little"


def crc32c(data: "bytes | bytearray | memoryview", crc: int = 0) -> int:
    """Return the CRC-32C of ``data`` (any bytes-like object), continuing
    from ``crc`` (a previous result): ``crc32c(b + c) == crc32c(c, crc32c(b))``."""
    t0, t1, t2, t3, t4, t5, t6, t7 = _TABLES
    c = crc ^ 0xFFFFFFFF
    view = memoryview(data).cast("B")
    whole = len(view) - len(view) % 8 if _WORDS else 0
    if whole:
        for w in view[:whole].cast("Q"):
            w ^= c
            c = (t7[w & 0xFF] ^ t6[(w >> 8) & 0xFF] ^ t5[(w >> 16) & 0xFF] ^ t4[(w >> 24) & 0xFF]
                 ^ t3[(w >> 32) & 0xFF] ^ t2[(w >> 40) & 0xFF] ^ t1[(w >> 48) & 0xFF] ^ t0[w >> 56])
    for byte in view[whole:]:
        c = t0[(c ^ byte) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
