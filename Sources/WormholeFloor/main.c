/* SPDX-License-Identifier: Apache-2.0 */
// wormhole-floor: the raw libdbus floor for Wormhole's benchmark.
//
// What `wormholectl bench` runs through the Swift layers, done with nothing but the
// libdbus C API in one blocking thread per process.
//
// Ping-pong: the echo side adds the same match rule (interface + member + arg0)
// and answers each ping with a pong signal; the ping side emits, blocks until the
// pong arrives and prints the round-trip time in nanoseconds, one per line.
//
//   wormhole-floor echo ADDRESS PATH PING_IFACE PING_NAME PONG_IFACE PONG_NAME [DIR SIZE]
//   wormhole-floor ping ADDRESS PATH PING_IFACE PING_NAME PONG_IFACE PONG_NAME COUNT WARMUP [DIR SIZE]
//
// Both send signals `Posted(s name, t state)`; the echo side exits on state
// 2^64-1. "ready" goes to standard error once the match rule is active. With
// WORMHOLE_FLOOR_SPACING_US=N in the environment, the ping side waits N
// microseconds after each pong before the next ping (spaced one-way sends:
// whatever a round leaves behind, in this process, the daemon or the echo, is
// done before the next is timed).
//
// With DIR and SIZE, each hop also carries a SIZE-byte file the way a wormhole
// message travels, in plain code: the sender writes DIR/ping.json (or pong.json)
// to a temporary file and renames it over the target before it signals; the
// receiver reads the whole file after the signal arrives. No JSON is encoded or
// decoded: this is the floor under Wormhole's message path.
//
// The floor under the command-line tool (contract section 4), writing to standard output
// with one write(2) per line:
//
//   wormhole-floor observe ADDRESS NAME...
//     adds the two rules `wormholectl observe NAME` adds (bucket interface and plain
//     interface, arg0='NAME'), writes "ready" to standard error, then prints
//     {"name":"NAME","state":N} per Posted signal ("state":null when it carried none).
//   wormhole-floor listen ADDRESS DIR PREFIX ID...
//     observes the names PREFIX/ID (PREFIX is <group>/<directory>) like `wormholectl listen`,
//     writes "ready", and per Posted signal reads DIR/ID.json whole and prints
//     {"identifier":"ID","message":<the file, trailing white space stripped>}.
//
// The floor under listening without a bus (inotify on the directory, no D-Bus at all):
//
//   wormhole-floor inotify-echo DIR SIZE
//   wormhole-floor inotify-ping DIR SIZE COUNT WARMUP
//     the same ping-pong of SIZE-byte files, each side woken by IN_MOVED_TO of the other's
//     file in DIR (one blocking read(2) of the inotify descriptor) instead of a signal; the
//     echo side exits when stop.json is renamed in.
//
// The post rate floor:
//
//   wormhole-floor blast ADDRESS NAME COUNT
//     emits COUNT Posted(NAME, i) signals on NAME's bucket interface as fast as
//     libdbus takes them, flushes, and prints two numbers of nanoseconds on standard
//     output: until flushed, and until the last send returned (the loop alone); then
//     waits (untimed) until the bus daemon has read them all.
//
// The floor under one post call:
//
//   wormhole-floor post-call ADDRESS NAME COUNT WARMUP SPACING_US
//     WARMUP + COUNT times: builds a Posted(NAME, i) signal on NAME's bucket interface,
//     sends it and flushes the connection (the bytes are in the bus socket), timing that
//     alone; then waits SPACING_US microseconds, untimed, so each post starts on an idle
//     connection. Prints the COUNT durations in nanoseconds, one per line, at the end.
//
// The floor under a post seen from outside, through an observer's output:
//
//   wormhole-floor post-line ADDRESS NAME COUNT WARMUP SPACING_US
//     the same posts, each timed from before its send until the observer's line for it is read
//     from standard input (the bench connects an observer's standard output there, `wormhole-floor
//     observe ADDRESS NAME`), then SPACING_US microseconds untimed. Prints the COUNT durations.
#include <dbus/dbus.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const notify_path = "/org/wormhole/Notify1";
static const char *const plain_interface = "org.wormhole.Notify1";

static DBusConnection *connect_bus(const char *address) {
    DBusError error;
    dbus_error_init(&error);
    DBusConnection *connection = dbus_connection_open_private(address, &error);
    if (connection == NULL || !dbus_bus_register(connection, &error)) {
        fprintf(stderr, "wormhole-floor: cannot connect to %s: %s\n", address, error.message);
        exit(1);
    }
    return connection;
}

// Appends `value` to `out` quoted for a match rule: '...' with each ' written '\''.
static size_t append_quoted(char *out, const char *value) {
    size_t length = 0;
    out[length++] = '\'';
    for (const char *p = value; *p != '\0'; p++) {
        if (*p == '\'') {
            memcpy(out + length, "'\\''", 4);
            length += 4;
        } else {
            out[length++] = *p;
        }
    }
    out[length++] = '\'';
    out[length] = '\0';
    return length;
}

static void add_rule(DBusConnection *connection, const char *interface, const char *name) {
    // A name of up to 900 bytes, each byte possibly a ' spelled in 4: the rule fits.
    char *rule = malloc(strlen(name) * 4 + 256);
    int length = sprintf(rule, "type='signal',interface='%s',member='Posted',arg0=", interface);
    append_quoted(rule + length, name);
    DBusError error;
    dbus_error_init(&error);
    dbus_bus_add_match(connection, rule, &error);
    if (dbus_error_is_set(&error)) {
        fprintf(stderr, "wormhole-floor: AddMatch failed: %s\n", error.message);
        exit(1);
    }
    free(rule);
}

static void post(DBusConnection *connection, const char *path, const char *interface, const char *name,
                 dbus_uint64_t state) {
    DBusMessage *message = dbus_message_new_signal(path, interface, "Posted");
    dbus_message_append_args(message, DBUS_TYPE_STRING, &name, DBUS_TYPE_UINT64, &state, DBUS_TYPE_INVALID);
    dbus_connection_send(connection, message, NULL);
    dbus_connection_flush(connection);
    dbus_message_unref(message);
}

// Blocks until a Posted signal for `name` arrives; returns its state.
static dbus_uint64_t wait_for(DBusConnection *connection, const char *name) {
    for (;;) {
        DBusMessage *message;
        while ((message = dbus_connection_pop_message(connection)) != NULL) {
            const char *got = NULL;
            dbus_uint64_t state = 0;
            int match = dbus_message_is_signal(message, dbus_message_get_interface(message), "Posted") &&
                        dbus_message_get_args(message, NULL, DBUS_TYPE_STRING, &got, DBUS_TYPE_UINT64, &state,
                                              DBUS_TYPE_INVALID) &&
                        strcmp(got, name) == 0;
            dbus_message_unref(message);
            if (match) return state;
        }
        if (!dbus_connection_read_write(connection, -1)) {
            fprintf(stderr, "wormhole-floor: disconnected\n");
            exit(1);
        }
    }
}

static void write_file(const char *dir, const char *name, const char *data, size_t size) {
    char path[4096], temporary[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(temporary, sizeof temporary, "%s/.%s.tmp", dir, name);
    FILE *file = fopen(temporary, "wb");
    if (file == NULL || fwrite(data, 1, size, file) != size || fclose(file) != 0 || rename(temporary, path) != 0) {
        fprintf(stderr, "wormhole-floor: cannot write %s\n", path);
        exit(1);
    }
}

static size_t read_file(const char *dir, const char *name, char *buffer, size_t capacity) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        fprintf(stderr, "wormhole-floor: cannot read %s\n", path);
        exit(1);
    }
    size_t total = fread(buffer, 1, capacity, file);
    fclose(file);
    return total;
}

static uint64_t now_ns(void) {
    struct timespec spec;
    clock_gettime(CLOCK_MONOTONIC, &spec);
    return (uint64_t)spec.tv_sec * 1000000000u + (uint64_t)spec.tv_nsec;
}

static int ping_pong_main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: wormhole-floor echo|ping ADDRESS PATH PING_IFACE PING_NAME PONG_IFACE PONG_NAME "
                        "[COUNT WARMUP] [DIR SIZE]\n"
                        "       wormhole-floor observe ADDRESS NAME...\n"
                        "       wormhole-floor listen ADDRESS DIR PREFIX ID...\n"
                        "       wormhole-floor blast ADDRESS NAME COUNT\n"
                        "       wormhole-floor post-call ADDRESS NAME COUNT WARMUP SPACING_US\n");
        return 64;
    }
    const char *mode = argv[1], *address = argv[2], *path = argv[3];
    const char *ping_iface = argv[4], *ping_name = argv[5], *pong_iface = argv[6], *pong_name = argv[7];
    DBusConnection *connection = connect_bus(address);
    int is_echo = strcmp(mode, "echo") == 0;
    const char *dir = NULL;
    size_t size = 0;
    int file_arg = is_echo ? 8 : 10;
    if (argc >= file_arg + 2) {
        dir = argv[file_arg];
        size = (size_t)atol(argv[file_arg + 1]);
    }
    char *payload = malloc(size + 1), *buffer = malloc(size + 1);
    memset(payload, 'x', size);
    if (is_echo) {
        add_rule(connection, ping_iface, ping_name);
        fprintf(stderr, "ready\n");
        for (;;) {
            dbus_uint64_t state = wait_for(connection, ping_name);
            if (state == UINT64_MAX) break;
            if (dir != NULL) {
                size_t got = read_file(dir, "ping.json", buffer, size + 1);
                write_file(dir, "pong.json", buffer, got);
            }
            post(connection, path, pong_iface, pong_name, state);
        }
    } else if (strcmp(mode, "ping") == 0 && argc >= 10) {
        long count = atol(argv[8]), warmup = atol(argv[9]);
        const char *spacing_text = getenv("WORMHOLE_FLOOR_SPACING_US");
        long spacing = spacing_text != NULL ? atol(spacing_text) : 0;
        struct timespec gap = {spacing / 1000000, (spacing % 1000000) * 1000};
        add_rule(connection, pong_iface, pong_name);
        fprintf(stderr, "ready\n");
        for (long i = 0; i < count + warmup; i++) {
            uint64_t start = now_ns();
            if (dir != NULL) write_file(dir, "ping.json", payload, size);
            post(connection, path, ping_iface, ping_name, (dbus_uint64_t)i);
            while (wait_for(connection, pong_name) != (dbus_uint64_t)i) {}
            if (dir != NULL && read_file(dir, "pong.json", buffer, size + 1) != size) {
                fprintf(stderr, "wormhole-floor: short pong file\n");
                return 1;
            }
            uint64_t elapsed = now_ns() - start;
            if (i >= warmup) printf("%" PRIu64 "\n", elapsed);
            if (spacing > 0) {
                while (nanosleep(&gap, &gap) != 0 && errno == EINTR) {}
                gap.tv_sec = spacing / 1000000;
                gap.tv_nsec = (spacing % 1000000) * 1000;
            }
        }
        fflush(stdout);
        post(connection, path, ping_iface, ping_name, UINT64_MAX);
    } else {
        fprintf(stderr, "wormhole-floor: unknown mode %s\n", mode);
        return 64;
    }
    dbus_connection_close(connection);
    dbus_connection_unref(connection);
    return 0;
}

// Blocks until `name` is renamed into the watched directory (the event naming it).
static void wait_for_rename(int fd, const char *name) {
    char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t length = read(fd, events, sizeof events);
        if (length <= 0) {
            if (length < 0 && errno == EINTR) continue;
            fprintf(stderr, "wormhole-floor: inotify read failed: %s\n", strerror(errno));
            exit(1);
        }
        for (char *at = events; at < events + length;) {
            struct inotify_event *event = (struct inotify_event *)at;
            if (event->len > 0 && strcmp(event->name, name) == 0) return;
            at += sizeof *event + event->len;
        }
    }
}

static int inotify_main(int argc, char **argv) {
    int is_echo = strcmp(argv[1], "inotify-echo") == 0;
    if (argc < (is_echo ? 4 : 6)) {
        fprintf(stderr, "usage: wormhole-floor inotify-echo DIR SIZE | inotify-ping DIR SIZE COUNT WARMUP\n");
        return 64;
    }
    const char *dir = argv[2];
    size_t size = (size_t)atol(argv[3]);
    int fd = inotify_init1(IN_CLOEXEC);
    if (fd < 0 || inotify_add_watch(fd, dir, IN_MOVED_TO) < 0) {
        fprintf(stderr, "wormhole-floor: cannot watch %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char *payload = malloc(size + 1), *buffer = malloc(size + 1);
    memset(payload, 'x', size);
    fprintf(stderr, "ready\n");
    if (is_echo) {
        char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        for (;;) {
            ssize_t length = read(fd, events, sizeof events);
            if (length <= 0) {
                if (length < 0 && errno == EINTR) continue;
                return 1;
            }
            for (char *at = events; at < events + length;) {
                struct inotify_event *event = (struct inotify_event *)at;
                if (event->len > 0 && strcmp(event->name, "stop.json") == 0) return 0;
                if (event->len > 0 && strcmp(event->name, "ping.json") == 0) {
                    size_t got = read_file(dir, "ping.json", buffer, size + 1);
                    write_file(dir, "pong.json", buffer, got);
                }
                at += sizeof *event + event->len;
            }
        }
    }
    long count = atol(argv[4]), warmup = atol(argv[5]);
    for (long i = 0; i < count + warmup; i++) {
        uint64_t start = now_ns();
        write_file(dir, "ping.json", payload, size);
        wait_for_rename(fd, "pong.json");
        if (read_file(dir, "pong.json", buffer, size + 1) != size) {
            fprintf(stderr, "wormhole-floor: short pong file\n");
            return 1;
        }
        uint64_t elapsed = now_ns() - start;
        if (i >= warmup) printf("%" PRIu64 "\n", elapsed);
    }
    fflush(stdout);
    write_file(dir, "stop.json", "{}", 2);
    return 0;
}

// The bucket interface of a name (contract section 1): org.wormhole.Notify1.B + %04X of
// the low 16 bits of the 32-bit FNV-1a hash of its bytes.
static void bucket_interface(const char *name, char out[32]) {
    uint32_t hash = 0x811c9dc5u;
    for (const unsigned char *p = (const unsigned char *)name; *p != 0; p++) {
        hash ^= *p;
        hash *= 0x01000193u;
    }
    snprintf(out, 32, "%s.B%04X", plain_interface, (unsigned)(hash & 0xFFFFu));
}

// The two rules that observe one name, as `wormholectl observe` adds them.
static void observe_name(DBusConnection *connection, const char *name) {
    char bucket[32];
    bucket_interface(name, bucket);
    add_rule(connection, bucket, name);
    add_rule(connection, plain_interface, name);
}

// A growable output buffer for one line.
struct line {
    char *bytes;
    size_t length, capacity;
};

static void line_reserve(struct line *line, size_t more) {
    if (line->length + more <= line->capacity) return;
    while (line->length + more > line->capacity) line->capacity = line->capacity ? line->capacity * 2 : 4096;
    line->bytes = realloc(line->bytes, line->capacity);
    if (line->bytes == NULL) {
        fprintf(stderr, "wormhole-floor: out of memory\n");
        exit(1);
    }
}

static void line_append(struct line *line, const char *bytes, size_t length) {
    line_reserve(line, length);
    memcpy(line->bytes + line->length, bytes, length);
    line->length += length;
}

static void line_append_text(struct line *line, const char *text) { line_append(line, text, strlen(text)); }

// Appends `text` as a JSON string: " and \ escaped, \b \f \n \r \t in short form, other
// control characters as \u00xx; everything else (/, DEL, non-ASCII UTF-8) as it is.
static void line_append_json_string(struct line *line, const char *text) {
    line_reserve(line, strlen(text) * 6 + 2);
    char *out = line->bytes + line->length;
    *out++ = '"';
    for (const unsigned char *p = (const unsigned char *)text; *p != 0; p++) {
        unsigned char c = *p;
        switch (c) {
        case '"': *out++ = '\\'; *out++ = '"'; break;
        case '\\': *out++ = '\\'; *out++ = '\\'; break;
        case '\b': *out++ = '\\'; *out++ = 'b'; break;
        case '\f': *out++ = '\\'; *out++ = 'f'; break;
        case '\n': *out++ = '\\'; *out++ = 'n'; break;
        case '\r': *out++ = '\\'; *out++ = 'r'; break;
        case '\t': *out++ = '\\'; *out++ = 't'; break;
        default:
            if (c < 0x20) {
                out += sprintf(out, "\\u%04x", c);
            } else {
                *out++ = (char)c;
            }
        }
    }
    *out++ = '"';
    line->length = (size_t)(out - line->bytes);
}

// Writes the whole line to standard output (one write(2) unless the pipe takes less).
static void line_write(struct line *line) {
    size_t done = 0;
    while (done < line->length) {
        ssize_t written = write(STDOUT_FILENO, line->bytes + done, line->length - done);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) exit(0);  // the reader went away
        done += (size_t)written;
    }
    line->length = 0;
}

// Reads a Posted signal as the library does: path, member, a string first argument, the
// plain or the name's bucket interface; the state when a uint64 second argument is there.
static int read_posted(DBusMessage *message, const char **name, int *has_state, dbus_uint64_t *state) {
    if (dbus_message_get_type(message) != DBUS_MESSAGE_TYPE_SIGNAL) return 0;
    const char *path = dbus_message_get_path(message), *member = dbus_message_get_member(message);
    const char *interface = dbus_message_get_interface(message);
    if (path == NULL || member == NULL || interface == NULL || strcmp(path, notify_path) != 0 ||
        strcmp(member, "Posted") != 0)
        return 0;
    DBusMessageIter iter;
    if (!dbus_message_iter_init(message, &iter) || dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_STRING) return 0;
    dbus_message_iter_get_basic(&iter, name);
    char bucket[32];
    bucket_interface(*name, bucket);
    if (strcmp(interface, plain_interface) != 0 && strcmp(interface, bucket) != 0) return 0;
    *has_state = 0;
    if (dbus_message_iter_next(&iter) && dbus_message_iter_get_arg_type(&iter) == DBUS_TYPE_UINT64) {
        dbus_message_iter_get_basic(&iter, state);
        *has_state = 1;
    }
    return 1;
}

// Blocks until the next Posted signal; `handle` gets its name and state.
static void serve(DBusConnection *connection, void (*handle)(const char *, int, dbus_uint64_t, void *), void *context) {
    for (;;) {
        DBusMessage *message;
        while ((message = dbus_connection_pop_message(connection)) != NULL) {
            const char *name = NULL;
            int has_state = 0;
            dbus_uint64_t state = 0;
            if (read_posted(message, &name, &has_state, &state)) handle(name, has_state, state, context);
            dbus_message_unref(message);
        }
        if (!dbus_connection_read_write(connection, -1)) {
            fprintf(stderr, "wormhole-floor: disconnected\n");
            exit(1);
        }
    }
}

// Appends a post's state as a JSON number, or null when the post carried none.
static void line_append_state(struct line *line, int has_state, dbus_uint64_t state) {
    if (!has_state) {
        line_append_text(line, "null");
        return;
    }
    char number[24];
    snprintf(number, sizeof number, "%" PRIu64, (uint64_t)state);
    line_append_text(line, number);
}

static void print_notification(const char *name, int has_state, dbus_uint64_t state, void *context) {
    struct line *line = context;
    line_append_text(line, "{\"name\":");
    line_append_json_string(line, name);
    line_append_text(line, ",\"state\":");
    line_append_state(line, has_state, state);
    line_append_text(line, ",\"reason\":\"posted\"}\n");
    line_write(line);
}

static int observe_main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: wormhole-floor observe ADDRESS NAME...\n");
        return 64;
    }
    DBusConnection *connection = connect_bus(argv[2]);
    for (int i = 3; i < argc; i++) observe_name(connection, argv[i]);
    fprintf(stderr, "ready\n");
    struct line line = {0};
    serve(connection, print_notification, &line);
    return 0;
}

struct listen_context {
    const char *dir;
    const char *prefix;
    size_t prefix_length;
    char **identifiers;
    int count;
    struct line line;
    char *file;
    size_t file_capacity;
};

static void reserve_file(struct listen_context *context, size_t wanted) {
    if (wanted <= context->file_capacity) return;
    size_t capacity = context->file_capacity ? context->file_capacity : 65536;
    while (capacity < wanted) capacity *= 2;
    context->file = realloc(context->file, capacity);
    if (context->file == NULL) {
        fprintf(stderr, "wormhole-floor: out of memory\n");
        exit(1);
    }
    context->file_capacity = capacity;
}

// Reads `path` whole into the context's buffer; -1 (errno set) when it cannot be read.
static ssize_t read_whole(struct listen_context *context, const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat info;
    if (fstat(fd, &info) != 0) {
        close(fd);
        return -1;
    }
    reserve_file(context, (size_t)info.st_size + 1);
    size_t total = 0;
    for (;;) {
        if (total == context->file_capacity) reserve_file(context, total * 2);
        ssize_t got = read(fd, context->file + total, context->file_capacity - total);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
        if (got == 0) break;
        total += (size_t)got;
    }
    close(fd);
    return (ssize_t)total;
}

static void print_message(const char *name, int has_state, dbus_uint64_t state, void *opaque) {
    struct listen_context *context = opaque;
    if (strncmp(name, context->prefix, context->prefix_length) != 0 || name[context->prefix_length] != '/') return;
    const char *identifier = name + context->prefix_length + 1;
    int known = 0;
    for (int i = 0; i < context->count && !known; i++) known = strcmp(context->identifiers[i], identifier) == 0;
    if (!known) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.json", context->dir, identifier);
    ssize_t length = read_whole(context, path);
    if (length < 0) {
        fprintf(stderr, "wormhole-floor: %s: cannot read %s: %s\n", identifier, path, strerror(errno));
        return;
    }
    while (length > 0 && strchr(" \t\r\n", context->file[length - 1]) != NULL) length--;
    struct line *line = &context->line;
    line_append_text(line, "{\"identifier\":");
    line_append_json_string(line, identifier);
    line_append_text(line, ",\"message\":");
    line_append(line, context->file, (size_t)length);
    line_append_text(line, ",\"reason\":\"posted\",\"sentAt\":");
    line_append_state(line, has_state, state);
    line_append_text(line, "}\n");
    line_write(line);
}

static int listen_main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: wormhole-floor listen ADDRESS DIR PREFIX ID...\n");
        return 64;
    }
    struct listen_context context = {
        .dir = argv[3], .prefix = argv[4], .prefix_length = strlen(argv[4]), .identifiers = argv + 5,
        .count = argc - 5};
    DBusConnection *connection = connect_bus(argv[2]);
    for (int i = 0; i < context.count; i++) {
        char *name = malloc(context.prefix_length + strlen(context.identifiers[i]) + 2);
        sprintf(name, "%s/%s", context.prefix, context.identifiers[i]);
        observe_name(connection, name);
        free(name);
    }
    fprintf(stderr, "ready\n");
    serve(connection, print_message, &context);
    return 0;
}

// Queues Posted(name, state) on `bucket` (libdbus writes what the socket takes at once);
// 0, with a message, when libdbus is out of memory.
static int send_posted(DBusConnection *connection, const char *bucket, const char *name, dbus_uint64_t state) {
    DBusMessage *message = dbus_message_new_signal(notify_path, bucket, "Posted");
    if (message == NULL ||
        !dbus_message_append_args(message, DBUS_TYPE_STRING, &name, DBUS_TYPE_UINT64, &state, DBUS_TYPE_INVALID) ||
        !dbus_connection_send(connection, message, NULL)) {
        fprintf(stderr, "wormhole-floor: out of memory\n");
        if (message != NULL) dbus_message_unref(message);
        return 0;
    }
    dbus_message_unref(message);
    return 1;
}

static int blast_main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: wormhole-floor blast ADDRESS NAME COUNT\n");
        return 64;
    }
    const char *name = argv[3];
    long count = atol(argv[4]);
    DBusConnection *connection = connect_bus(argv[2]);
    char bucket[32];
    bucket_interface(name, bucket);
    uint64_t start = now_ns();
    for (long i = 0; i < count; i++) {
        if (!send_posted(connection, bucket, name, (dbus_uint64_t)i)) return 1;
    }
    uint64_t queued = now_ns() - start;
    dbus_connection_flush(connection);
    uint64_t elapsed = now_ns() - start;
    printf("%" PRIu64 " %" PRIu64 "\n", elapsed, queued);
    fflush(stdout);
    // Untimed: a method call is answered after the daemon has read every signal before it,
    // so the next measurement does not share the CPU with this one's backlog.
    DBusMessage *call = dbus_message_new_method_call("org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                     "org.freedesktop.DBus", "GetId");
    DBusError error;
    dbus_error_init(&error);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(connection, call, 60000, &error);
    if (reply == NULL) {
        fprintf(stderr, "wormhole-floor: GetId failed: %s\n", error.message);
        return 1;
    }
    dbus_message_unref(reply);
    dbus_message_unref(call);
    dbus_connection_close(connection);
    dbus_connection_unref(connection);
    return 0;
}

// Reads standard input up to and including the next newline (what follows it is kept for the
// next call); 0 at its end. One read(2) per line when the line comes whole.
static int read_line_from_stdin(void) {
    static char buffer[4096];
    static size_t start = 0, end = 0;
    for (;;) {
        for (size_t i = start; i < end; i++) {
            if (buffer[i] == '\n') {
                start = i + 1;
                return 1;
            }
        }
        start = end = 0;
        ssize_t got = read(0, buffer, sizeof buffer);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return 0;
        end = (size_t)got;
    }
}

static int post_timed_main(int argc, char **argv, int until_line) {
    if (argc != 7) {
        fprintf(stderr, "usage: wormhole-floor %s ADDRESS NAME COUNT WARMUP SPACING_US\n", argv[1]);
        return 64;
    }
    const char *name = argv[3];
    long count = atol(argv[4]);
    long warmup = atol(argv[5]);
    long spacing = atol(argv[6]);
    if (count <= 0 || warmup < 0 || spacing < 0) {
        fprintf(stderr, "wormhole-floor: %s needs COUNT > 0, WARMUP >= 0, SPACING_US >= 0\n", argv[1]);
        return 64;
    }
    DBusConnection *connection = connect_bus(argv[2]);
    char bucket[32];
    bucket_interface(name, bucket);
    uint64_t *durations = malloc(sizeof(uint64_t) * (size_t)count);
    if (durations == NULL) {
        fprintf(stderr, "wormhole-floor: out of memory\n");
        return 1;
    }
    for (long i = 0; i < warmup + count; i++) {
        uint64_t start = now_ns();
        if (!send_posted(connection, bucket, name, (dbus_uint64_t)i)) return 1;
        dbus_connection_flush(connection);
        if (until_line && !read_line_from_stdin()) {
            fprintf(stderr, "wormhole-floor: the observer's output ended after %ld posts\n", i);
            return 1;
        }
        uint64_t elapsed = now_ns() - start;
        if (i >= warmup) durations[i - warmup] = elapsed;
        struct timespec gap = {.tv_sec = spacing / 1000000, .tv_nsec = (spacing % 1000000) * 1000};
        while (nanosleep(&gap, &gap) != 0 && errno == EINTR) {}
    }
    for (long i = 0; i < count; i++) printf("%" PRIu64 "\n", durations[i]);
    fflush(stdout);
    free(durations);
    dbus_connection_close(connection);
    dbus_connection_unref(connection);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "observe") == 0) return observe_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "listen") == 0) return listen_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "blast") == 0) return blast_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "post-call") == 0) return post_timed_main(argc, argv, 0);
    if (argc >= 2 && strcmp(argv[1], "post-line") == 0) return post_timed_main(argc, argv, 1);
    if (argc >= 2 && strncmp(argv[1], "inotify-", 8) == 0) return inotify_main(argc, argv);
    return ping_pong_main(argc, argv);
}
