#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Measure the Python journal: appends per second (one record per append,
no post, page cache only) and records read per second, in a temporary
container root.

    python3 Python/bench/journal_rate.py [--records 2000] [--size 100]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="wormhole-journal-rate-")
    os.environ["WORMHOLE_CONTAINER_ROOT"] = root
    from wormhole_py.journal import Journal
    try:
        journal = Journal("group.com.example.rate", "log", post=False)
        payload = '"%s"' % ("x" * max(0, args.size - 2))
        began = time.perf_counter()
        for _ in range(args.records):
            journal.append(payload)
        appended = time.perf_counter() - began
        began = time.perf_counter()
        records = journal.reader("start").read()
        read = time.perf_counter() - began
        assert len(records) == args.records
        print("append: %d records of %d bytes in %.2f s: %.0f/s (%.0f us each)"
              % (args.records, args.size, appended, args.records / appended, appended / args.records * 1e6))
        print("read:   %d records in %.2f s: %.0f/s" % (args.records, read, args.records / read))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
