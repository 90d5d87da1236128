#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Reads a Wormhole journal directory (docs/journal-format.md) with the Python standard library only.

usage: journal-reader.py JOURNAL_DIR

Prints one line of JSON per record, in sequence order:
    {"sequence": N, "time": NANOSECONDS, "message": <the record's JSON document>}
A torn tail (an incomplete or damaged last frame of the last segment) ends the output quietly, as
it does for Wormhole's readers; any other damage exits 1 with one line on standard error naming
the file and offset.
"""
import json
import os
import re
import struct
import sys

MAGIC = b"WHJL"
VERSION = 1
HEADER = 16
HEAD = 20  # length u32, sequence u64, time u64
SEAL = 0xFFFFFFFF
MAX_PAYLOAD = 1 << 20
SEGMENT = re.compile(r"^[0-9]{20}\.seg$")


def crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


TABLE = crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = (crc >> 8) ^ TABLE[(crc ^ byte) & 0xFF]
    return crc ^ 0xFFFFFFFF


def fail(message):
    sys.stderr.write("journal-reader: " + message + "\n")
    sys.exit(1)


def read_journal(directory):
    names = sorted(name for name in os.listdir(directory) if SEGMENT.match(name))
    expected = None
    for index, name in enumerate(names):
        path = os.path.join(directory, name)
        is_last = index == len(names) - 1
        with open(path, "rb") as handle:
            data = handle.read()
        if data[:4] != MAGIC:
            fail("%s: not a journal segment (bad magic)" % path)
        if data[4] != VERSION:
            fail("%s: format version %d, this reader reads %d" % (path, data[4], VERSION))
        first = struct.unpack_from("<Q", data, 8)[0]
        if first != int(name[:20]):
            fail("%s: header says first record %d" % (path, first))
        if expected is not None and first != expected:
            fail("%s: starts at %d, expected %d" % (path, first, expected))
        expected = first
        offset = HEADER
        sealed = False
        while offset < len(data):
            if len(data) - offset < HEAD + 4:
                if is_last:
                    return
                fail("%s: incomplete frame at offset %d" % (path, offset))
            length, sequence, time = struct.unpack_from("<IQQ", data, offset)
            payload_length = 0 if length == SEAL else length
            end = offset + HEAD + payload_length + 4
            if payload_length > MAX_PAYLOAD or end > len(data):
                if is_last:
                    return
                fail("%s: impossible or incomplete frame at offset %d" % (path, offset))
            stored = struct.unpack_from("<I", data, end - 4)[0]
            if crc32c(data[offset:end - 4]) != stored:
                if is_last and (end == len(data) or not any(data[offset:])):
                    return
                fail("%s: checksum mismatch at offset %d" % (path, offset))
            if sequence != expected:
                fail("%s: sequence %d at offset %d, expected %d" % (path, sequence, offset, expected))
            if length == SEAL:
                sealed = True
                break
            payload = data[offset + HEAD:end - 4]
            yield {"sequence": sequence, "time": time, "message": json.loads(payload.decode("utf-8"))}
            expected += 1
            offset = end
        if not sealed and not is_last:
            fail("%s: ends without a seal but is not the last segment" % path)


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: journal-reader.py JOURNAL_DIR\n")
        sys.exit(64)
    for record in read_journal(sys.argv[1]):
        sys.stdout.write(json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
