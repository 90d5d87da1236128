"""CRC-32C (Castagnoli), the checksum of the journal's frames and of ``sync.lock``.

Reflected polynomial ``0x82F63B78``, initial value and final XOR ``0xFFFFFFFF``
(as in iSCSI).  A 256-entry table computed once at import; pure Python, so it
costs about a microsecond per byte-group of eight bytes: enough for records up
to the journal's 1 MiB limit.

Check values: ``crc32c(b"123456789") == 0xE3069283`` and
``crc32c(bytes(32)) == 0x8A9136AA``.
"""

from __future__ import annotations

from typing import List

__all__ = ["crc32c"]

_POLY = 0x82F63B78


def _make_table() -> List[int]:
    """Return the byte-at-a-time lookup table of the reflected polynomial."""
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()


def crc32c(data: bytes, crc: int = 0) -> int:
    """Return the CRC-32C of ``data``, continuing from ``crc`` (a previous result).

    ``crc32c(b + c) == crc32c(c, crc32c(b))``.
    """
    table = _TABLE
    c = crc ^ 0xFFFFFFFF
    for byte in memoryview(data).cast("B"):
        c = table[(c ^ byte) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
