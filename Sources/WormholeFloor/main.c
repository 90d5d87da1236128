// wormhole-floor: the raw libdbus floor for Wormhole's benchmark.
//
// The same ping-pong that `wormhole bench` runs through the Swift layers, done
// with nothing but the libdbus C API in one blocking thread per process: the
// echo side adds the same match rule (interface + member + arg0) and answers
// each ping with a pong signal; the ping side emits, blocks until the pong
// arrives and prints the round-trip time in nanoseconds, one per line.
//
//   wormhole-floor echo ADDRESS PATH PING_IFACE PING_NAME PONG_IFACE PONG_NAME [DIR SIZE]
//   wormhole-floor ping ADDRESS PATH PING_IFACE PING_NAME PONG_IFACE PONG_NAME COUNT WARMUP [DIR SIZE]
//
// Both send signals `Posted(s name, t state)`; the echo side exits on state
// 2^64-1. "ready" goes to standard error once the match rule is active.
//
// With DIR and SIZE, each hop also carries a SIZE-byte file the way a wormhole
// message travels, in plain code: the sender writes DIR/ping.json (or pong.json)
// to a temporary file and renames it over the target before it signals; the
// receiver reads the whole file after the signal arrives. No JSON is encoded or
// decoded: this is the floor under Wormhole's message path.
#include <dbus/dbus.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static void add_rule(DBusConnection *connection, const char *interface, const char *name) {
    char rule[1200];
    snprintf(rule, sizeof rule, "type='signal',interface='%s',member='Posted',arg0='%s'", interface, name);
    DBusError error;
    dbus_error_init(&error);
    dbus_bus_add_match(connection, rule, &error);
    if (dbus_error_is_set(&error)) {
        fprintf(stderr, "wormhole-floor: AddMatch failed: %s\n", error.message);
        exit(1);
    }
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

int main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: wormhole-floor echo|ping ADDRESS PATH PING_IFACE PING_NAME PONG_IFACE PONG_NAME "
                        "[COUNT WARMUP]\n");
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
