// wormhole-floor: the raw libdbus floor for Wormhole's benchmark.
//
// The same ping-pong that `wormhole bench` runs through the Swift layers, done
// with nothing but the libdbus C API in one blocking thread per process: the
// echo side adds the same match rule (interface + member + arg0) and answers
// each ping with a pong signal; the ping side emits, blocks until the pong
// arrives and prints the round-trip time in nanoseconds, one per line.
//
//   wormhole-floor echo ADDRESS PATH PING_IFACE PING_NAME PONG_IFACE PONG_NAME
//   wormhole-floor ping ADDRESS PATH PING_IFACE PING_NAME PONG_IFACE PONG_NAME COUNT WARMUP
//
// Both send signals `Posted(s name, t state)`; the echo side exits on state
// 2^64-1. "ready" goes to standard error once the match rule is active.
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
    if (strcmp(mode, "echo") == 0) {
        add_rule(connection, ping_iface, ping_name);
        fprintf(stderr, "ready\n");
        for (;;) {
            dbus_uint64_t state = wait_for(connection, ping_name);
            if (state == UINT64_MAX) break;
            post(connection, path, pong_iface, pong_name, state);
        }
    } else if (strcmp(mode, "ping") == 0 && argc >= 10) {
        long count = atol(argv[8]), warmup = atol(argv[9]);
        add_rule(connection, pong_iface, pong_name);
        fprintf(stderr, "ready\n");
        for (long i = 0; i < count + warmup; i++) {
            uint64_t start = now_ns();
            post(connection, path, ping_iface, ping_name, (dbus_uint64_t)i);
            while (wait_for(connection, pong_name) != (dbus_uint64_t)i) {}
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
