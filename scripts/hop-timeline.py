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

    scripts/hop-timeline.py --posts POSTER_TRACE OBSERVER_TRACE

follows one-way posts instead (a poster that posts and an observer that only observes, e.g.
`_bench-post-call --until-line` and `wormholectl observe`): for every post, each step of the poster
and of the observer as time since `post()` was entered, p50/p90/p99 in microseconds; the
observer's steps for the ring that the post sent, and for its bus signal (the daemon's delivery:
the bus descriptor ready, then the signal delivered or dropped as a duplicate).
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


def posts(poster_path, observer_path):
    poster = load(poster_path)
    observer = load(observer_path)
    stamps = [event[0] for event in observer]
    steps = {}
    order = []

    def add(name, value):
        if name not in steps:
            order.append(name)
        steps.setdefault(name, []).append(value / 1000.0)

    def find(events, name, start, stop_names=(), limit=400):
        for position in range(start, min(len(events), start + limit)):
            if events[position][1] == name:
                return position
            if events[position][1] in stop_names:
                return None
        return None

    count = 0
    ring_first = 0
    for position, (start, point, _) in enumerate(poster):
        if point != "postEntered":
            continue
        count += 1
        sent = None
        looked_up = None
        written = None
        for later in range(position + 1, min(len(poster), position + 40)):
            name = poster[later][1]
            if name == "postEntered":
                break
            add("poster: " + name, poster[later][0] - start)
            if name == "lookupDone":
                looked_up = poster[later][0]
            if name == "ringSent":
                sent = poster[later][0]
            if name == "signalWritten":
                written = poster[later][0]
            if name == "postReturned":
                break
        handled = None
        if sent is not None and looked_up is not None:
            # The observer may run before the ringer's `sendto` returns (woken on its CPU): its
            # read comes after the ringer's lookup, the last mark before the `sendto`.
            index = bisect_right(stamps, looked_up)
            read = find(observer, "ringRead", index)
            if read is not None and observer[read][0] - sent < 50_000_000:
                woke = None
                for back in range(read - 1, max(-1, read - 50), -1):
                    if observer[back][1] == "epollReturned":
                        woke = back
                        break
                if woke is not None and observer[woke][0] >= looked_up:
                    add("observer, ring: epoll_wait returned", observer[woke][0] - start)
                add("observer, ring: rings read", observer[read][0] - start)
                decoded = find(observer, "ringDecoded", read, limit=3)
                if decoded is not None:
                    add("observer, ring: decoded", observer[decoded][0] - start)
                    entered = find(observer, "handlerEntered", decoded, ("epollReturned",), limit=10)
                    if entered is not None:
                        handled = observer[entered][0]
                        add("observer, ring: handler entered", handled - start)
        if written is not None:
            index = bisect_right(stamps, written)
            ready = find(observer, "busReady", index)
            if ready is not None and observer[ready][0] - written < 50_000_000:
                add("observer, bus: descriptor ready", observer[ready][0] - start)
                checked = find(observer, "duplicateChecked", ready, ("busReady",), limit=20)
                dropped = find(observer, "duplicateDropped", ready, ("busReady",), limit=20)
                entered = find(observer, "handlerEntered", ready, ("busReady", "ringRead"), limit=20)
                if checked is not None:
                    add("observer, bus: signal read, filter", observer[checked][0] - start)
                if dropped is not None:
                    add("observer, bus: duplicate dropped", observer[dropped][0] - start)
                elif entered is not None:
                    add("observer, bus: handler entered (the bus delivered)", observer[entered][0] - start)
                    if handled is None:
                        handled = observer[entered][0]
                if handled is not None and observer[ready][0] > handled:
                    ring_first += 1
        if handled is not None:
            add("observer: handler entered (first of ring, bus)", handled - start)
    print(f"{count} posts; the ring's delivery came before the bus descriptor was ready for {ring_first}")
    print(f"{'step (time since post() entered)':56} {'n':>7} {'p50 us':>8} {'p90 us':>8} {'p99 us':>8}")
    for name in sorted(order, key=lambda step: percentile(steps[step], 0.5)):
        values = steps[name]
        print(
            f"{name:56} {len(values):7} {percentile(values, 0.5):8.1f} {percentile(values, 0.9):8.1f} "
            f"{percentile(values, 0.99):8.1f}"
        )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--posts":
        posts(sys.argv[2], sys.argv[3])
        sys.exit(0)
    if len(sys.argv) < 3:
        sys.exit("usage: scripts/hop-timeline.py TRACE TRACE (the WORMHOLE_HOP_TRACE files of both processes)")
    main(sys.argv[1:])
