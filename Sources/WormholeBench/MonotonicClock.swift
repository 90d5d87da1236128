// SPDX-License-Identifier: Apache-2.0
import Glibc

/// `CLOCK_MONOTONIC` in nanoseconds, the clock every measured interval uses.
enum MonotonicClock {
    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }
}
