#!/usr/bin/env python3
"""The doorbell's hop, step by step, from the time stamps two processes took.

    WORMHOLE_HOP_TRACE=/tmp/hop .build/release/wormhole-bench _bench-echo ... &
    WORMHOLE_HOP_TRACE=/tmp/hop .build/release/wormhole-bench _bench-ping ...
    scripts/hop-timeline.py /tmp/hop.*

Each file holds `NANOSECONDS POINT` lines (HopTrace.swift). For every ring one process sent, the
other process's steps are followed: its loop's wake-up (`epoll_wait` returned; or already awake),
the endpoint read, the ring decoded, the handler, its post, the lookup, its own ring sent, then
the signal built and handed to libdbus. Prints the median, p90 and p99 of each step in
microseconds, and how often the receiver was already awake when the ring came.
"""
import sys
from bisect import bisect_left, bisect_right


def load(path):
    events = []
    with open(path, encoding="ascii") as handle:
        for line in handle:
            time, point, cpu = line.split()
            events.append((int(time), point, int(cpu)))
    events.sort()
    return events


def percentile(values, fraction):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main(paths):
    processes = {path: load(path) for path in paths}
    times = {path: [event[0] for event in events] for path, events in processes.items()}
    steps = {}
    awake = 0
    hops = 0
    order = [
        "wake (sendto returned -> epoll_wait returned)",
        "epoll_wait returned -> rings read",
        "rings read -> ring decoded",
        "ring decoded -> handler entered",
        "handler entered -> post entered",
        "post entered -> lookup entered",
        "lookup entered -> doorbell directory listed",
        "directory listed -> registrations listed",
        "registrations listed -> ring sent (sendto)",
        "one way (ring sent -> handler entered)",
        "hop (ring sent -> its ring sent)",
        "ring sent -> emit entered",
        "emit entered -> message built",
        "message built -> handed to libdbus",
        "woken on the ringer's CPU: ringer's iteration end -> epoll_wait returned",
    ]
    same_cpu = 0

    def add(name, value):
        steps.setdefault(name, []).append(value / 1000.0)

    for sender, events in processes.items():
        for position_sent, (time, point, ring_cpu) in enumerate(events):
            if point != "ringSent":
                continue
            for receiver, other in processes.items():
                if receiver == sender:
                    continue
                stamps = times[receiver]
                index = bisect_right(stamps, time)

                def find(name, start, limit=400):
                    for position in range(start, min(len(other), start + limit)):
                        if other[position][1] == name:
                            return position
                    return None

                read = find("ringRead", index)
                if read is None or other[read][0] - time > 50_000_000:
                    continue
                # The wake that led to this read: the last epoll_wait return before it.
                woke = None
                for position in range(read - 1, max(-1, read - 400), -1):
                    if other[position][1] == "epollReturned":
                        woke = position
                        break
                hops += 1
                if woke is None or other[woke][0] < time:
                    awake += 1
                else:
                    add(order[0], other[woke][0] - time)
                    add(order[1], other[read][0] - other[woke][0])
                    if other[woke][2] == ring_cpu:
                        same_cpu += 1
                        for later in events[position_sent : position_sent + 50]:
                            if later[1] == "iterationEnded":
                                add(order[-1], other[woke][0] - later[0])
                                break
                decoded = find("ringDecoded", read, 3)
                if decoded is None:
                    continue
                add(order[2], other[decoded][0] - other[read][0])
                handler = find("handlerEntered", decoded, 10)
                if handler is None:
                    continue
                add(order[3], other[handler][0] - other[decoded][0])
                add(order[9], other[handler][0] - time)
                post = find("postEntered", handler, 4)
                if post is None:
                    continue
                add(order[4], other[post][0] - other[handler][0])
                entered = find("ringEntered", post, 4)
                listed = find("listingDone", post, 5)
                lookup = find("lookupDone", post, 6)
                sent = find("ringSent", post, 7)
                if None in (entered, listed, lookup, sent):
                    continue
                add(order[5], other[entered][0] - other[post][0])
                add(order[6], other[listed][0] - other[entered][0])
                add(order[7], other[lookup][0] - other[listed][0])
                add(order[8], other[sent][0] - other[lookup][0])
                add(order[10], other[sent][0] - time)
                emitted = find("emitEntered", sent, 3)
                built = find("messageBuilt", sent, 4)
                written = find("signalWritten", sent, 5)
                if None not in (emitted, built, written):
                    add(order[11], other[emitted][0] - other[sent][0])
                    add(order[12], other[built][0] - other[emitted][0])
                    add(order[13], other[written][0] - other[built][0])
    print(f"{hops} hops; the receiver was already awake for {awake} of them; woken on the ringer's CPU {same_cpu}")
    print(f"{'step':52} {'n':>7} {'p50 us':>8} {'p90 us':>8} {'p99 us':>8}")
    for name in order:
        values = steps.get(name, [])
        print(
            f"{name:52} {len(values):7} {percentile(values, 0.5):8.1f} {percentile(values, 0.9):8.1f} "
            f"{percentile(values, 0.99):8.1f}"
        )


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: scripts/hop-timeline.py TRACE TRACE (the WORMHOLE_HOP_TRACE files of both processes)")
    main(sys.argv[1:])
