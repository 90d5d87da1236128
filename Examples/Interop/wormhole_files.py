#!/usr/bin/env python3
"""Wormhole's files from Python, with the standard library alone (docs/contract.md, sections 2, 3 and 5).

    send GROUP ID JSON [--directory D]            store JSON as the message ID, then post its name
    read GROUP ID [--directory D]                 print the stored message as it is on disk
    defaults-write GROUP KEY JSON [--suite S]     set KEY in the shared defaults suite, then post it
    defaults-read GROUP [KEY] [--suite S]         print the value of KEY (the whole suite without KEY)

The container root is found as Wormhole finds it: $WORMHOLE_CONTAINER_ROOT, else
$XDG_DATA_HOME/group-containers, else $HOME/.local/share/group-containers. Missing directories
are made (mode 0700), so this works on a fresh machine. Posting runs `dbus-send --session` (the
bus of DBUS_SESSION_BUS_ADDRESS); with no bus the message is still stored, and a line on
standard error says listeners were not told (exit 0, as `wormhole send` does).
"""
import fcntl
import json
import os
import subprocess
import sys
import time

PATH = "/org/wormhole/Notify1"


def container_root():
    if os.environ.get("WORMHOLE_CONTAINER_ROOT"):
        return os.environ["WORMHOLE_CONTAINER_ROOT"]
    if os.environ.get("XDG_DATA_HOME"):
        return os.path.join(os.environ["XDG_DATA_HOME"], "group-containers")
    return os.path.join(os.path.expanduser("~"), ".local", "share", "group-containers")


def directory(group, name):
    """<root>/<group>/<name>, made with mode 0700 where missing."""
    path = container_root()
    for part in (group, name):
        os.makedirs(path, mode=0o700, exist_ok=True)  # the root and any parent above it
        path = os.path.join(path, part)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    return path


def bucket(name):
    """The interface Wormhole posts NAME on: org.wormhole.Notify1.B + %04X of fnv1a32(name) & 0xFFFF."""
    h = 0x811C9DC5
    for byte in name.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "org.wormhole.Notify1.B%04X" % (h & 0xFFFF)


def post(name, state):
    """Posted(name, state) on the name's bucket interface, as Wormhole senders do."""
    try:
        subprocess.run(["dbus-send", "--session", "--type=signal", PATH, bucket(name) + ".Posted",
                        "string:" + name, "uint64:%d" % state], check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", None) or str(error)
        print("wormhole_files: stored, but listeners were not told: %s" % detail.strip(), file=sys.stderr)


def parse_json(text, what):
    def refuse(constant):
        raise ValueError("%s is not JSON (%s)" % (what, constant))
    try:
        return json.loads(text, parse_constant=refuse)
    except ValueError as error:
        sys.exit("wormhole_files: %s is not JSON: %s" % (what, error))


def replace(path, stem, data, after=None):
    """Writes data to the temporary file .<stem>.<pid>-<hex>.tmp beside path (mode 0600, flock
    held while writing), then renames it over path. `after`: the modification time (ns) the new
    file must be later than (a suite's generation)."""
    tmp = os.path.join(os.path.dirname(path), ".%s.%d-%s.tmp" % (stem, os.getpid(), os.urandom(4).hex()))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, data)
        if after is not None:
            stamp = max(time.time_ns(), after + 1)
            os.utime(fd, ns=(stamp, stamp))
        os.rename(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    finally:
        os.close(fd)


def send(group, identifier, text, folder="wormhole"):
    parse_json(text, "the message")
    path = os.path.join(directory(group, folder), identifier + ".json")
    replace(path, identifier, text.strip().encode("utf-8"))
    post("%s/%s/%s" % (group, folder, identifier), time.time_ns())


def read(group, identifier, folder="wormhole"):
    path = os.path.join(container_root(), group, folder, identifier + ".json")
    try:
        with open(path, "rb") as f:
            sys.stdout.write(f.read().decode("utf-8") + "\n")
    except FileNotFoundError:
        sys.exit("wormhole_files: no message for '%s' (%s)" % (identifier, path))


def count_change(path):
    """Adds 1 to the suite's change counter, under the lock, after the rename
    (contract section 5, docs/shared-defaults.md): readers that check the counter instead of the file
    see the write too."""
    changes = os.open(path + ".changes", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        count = int.from_bytes(os.pread(changes, 8, 0).ljust(8, b"\0"), "little")
        os.pwrite(changes, ((count + 1) % 2**64).to_bytes(8, "little"), 0)
    finally:
        os.close(changes)


def defaults_write(group, key, text, suite=None):
    suite = suite or group
    value = parse_json(text, "the value")
    if value is None:
        sys.exit("wormhole_files: null is not a value (remove the key instead)")
    path = os.path.join(directory(group, "Preferences"), suite + ".json")
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path, "rb") as f:
                before = os.fstat(f.fileno()).st_mtime_ns
                values = json.loads(f.read().decode("utf-8"))
        except FileNotFoundError:
            before, values = 0, {}
        if key in values and values[key] == value and type(values[key]) is type(value):
            return  # an equal value: nothing written, nothing posted
        values[key] = value  # an int stays an Int, a float a Double (1.0 is written "1.0")
        replace(path, suite + ".json", json.dumps(values, separators=(",", ":"), ensure_ascii=False).encode("utf-8"), after=before)
        generation = os.stat(path).st_mtime_ns
        count_change(path)
    finally:
        os.close(lock)
    post("%s/Preferences/%s/%s" % (group, suite, key), generation)


def defaults_read(group, key=None, suite=None):
    suite = suite or group
    path = os.path.join(container_root(), group, "Preferences", suite + ".json")
    try:
        with open(path, "rb") as f:
            values = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        values = {}
    if key is None:
        print(json.dumps(values, separators=(",", ":"), ensure_ascii=False))
    elif key in values:
        print(json.dumps(values[key], separators=(",", ":"), ensure_ascii=False))
    else:
        sys.exit("wormhole_files: no value for key '%s' in %s" % (key, path))


def main(argv):
    options = {}
    words = []
    rest = iter(argv)
    for word in rest:
        if word in ("--directory", "--suite"):
            options[word[2:]] = next(rest, None) or sys.exit(__doc__)
        else:
            words.append(word)
    command, args = (words[0], words[1:]) if words else (None, [])
    if command == "send" and len(args) == 3:
        send(*args, folder=options.get("directory", "wormhole"))
    elif command == "read" and len(args) == 2:
        read(*args, folder=options.get("directory", "wormhole"))
    elif command == "defaults-write" and len(args) == 3:
        defaults_write(*args, suite=options.get("suite"))
    elif command == "defaults-read" and len(args) in (1, 2):
        defaults_read(*args, suite=options.get("suite"))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
