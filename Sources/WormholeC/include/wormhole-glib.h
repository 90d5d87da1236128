/* wormhole-glib.h: libwormhole's deliveries on a GLib main loop (docs/c.md).
 *
 * Header only: compile with `pkg-config --cflags --libs wormhole-1 glib-2.0`.
 *
 *     wh_glib_attach(context, NULL);   // the thread-default main context's loop
 *
 * The source watches the context's descriptor (wh_context_fd) and calls wh_context_dispatch
 * when it is readable, so every handler of the context runs on the thread that runs that main
 * context (in a GTK program: the UI thread), with no locking of the program's own. Remove the
 * source (g_source_remove with the returned ID, or g_source_destroy) before wh_context_free.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef WORMHOLE_GLIB_H
#define WORMHOLE_GLIB_H

#include <glib.h>
#include <glib-unix.h>

#include "wormhole.h"

G_BEGIN_DECLS

static inline gboolean wh_glib_dispatch_(gint fd, GIOCondition condition, gpointer context) {
    (void)fd;
    (void)condition;
    wh_context_dispatch((wh_context *)context);
    return G_SOURCE_CONTINUE;
}

/* A new source (one reference, yours) that dispatches `context`'s deliveries when its main
 * context runs; attach it with g_source_attach. */
static inline GSource *wh_glib_source_new(wh_context *context) {
    GSource *source = g_unix_fd_source_new(wh_context_fd(context), G_IO_IN);
    g_source_set_callback(source, G_SOURCE_FUNC(wh_glib_dispatch_), context, NULL);
    g_source_set_static_name(source, "libwormhole deliveries");
    return source;
}

/* Attaches a new source for `context` to `main_context` (NULL: the thread-default one, as
 * g_main_context_ref_thread_default gives it) and returns its ID (for g_source_remove). */
static inline guint wh_glib_attach(wh_context *context, GMainContext *main_context) {
    GSource *source = wh_glib_source_new(context);
    GMainContext *target = main_context ? g_main_context_ref(main_context) : g_main_context_ref_thread_default();
    guint id = g_source_attach(source, target);
    g_source_unref(source);
    g_main_context_unref(target);
    return id;
}

G_END_DECLS

#endif /* WORMHOLE_GLIB_H */
