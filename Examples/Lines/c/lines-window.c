/* Lines in a GTK 4 window, in C through libwormhole: shows each clip the moment it is stored.
 *
 * The C twin of Examples/Lines/gtk/lines_window.py. Lines receives clipped lines from its
 * browser extension's native host in the group group.com.example.lines (or $LINES_GROUP),
 * wormhole directory "lines", mailbox "toShell"; each clip is a JSON object
 * {"id": "<uuid>", "text": "…", "url": "…", "sentAt": <seconds since 1970>}. The window listens
 * to that mailbox (the stored clip at start, then every new one) with wh_mailbox_listen, and
 * libwormhole's GLib adapter runs the handler on GTK's main thread: no locks of its own.
 *
 *   lines-window [--group G] [--report]
 *
 * --report prints one JSON line on standard output each time the shown clip changes
 * ({"text":…,"url":…,"reason":…}); the window writes "ready" on standard error once it listens
 * (Tests/lines-c.sh waits for both). Build:
 *
 *   cc -o lines-window lines-window.c $(pkg-config --cflags --libs wormhole-1 gtk4 json-glib-1.0)
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <gtk/gtk.h>
#include <json-glib/json-glib.h>
#include <wormhole-glib.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_GROUP "group.com.example.lines"
#define HISTORY 8

typedef struct lines {
    GtkWidget *clip_label;
    GtkWidget *url_label;
    GtkWidget *history;
    char *current; /* the text shown, or NULL */
    gboolean report;
} lines;

static const char *reason_name(wh_reason reason) {
    switch (reason) {
    case WH_REASON_STORED: return "stored";
    case WH_REASON_CATCH_UP: return "catchUp";
    default: return "posted";
    }
}

/* Shows a clip as the latest; the previous one moves to the history. */
static void show_clip(lines *window, const char *text, const char *url, wh_reason reason) {
    if (window->current) {
        GtkWidget *earlier = gtk_label_new(window->current);
        gtk_label_set_xalign(GTK_LABEL(earlier), 0.0f);
        gtk_label_set_ellipsize(GTK_LABEL(earlier), PANGO_ELLIPSIZE_END);
        gtk_list_box_prepend(GTK_LIST_BOX(window->history), earlier);
        GtkListBoxRow *row = gtk_list_box_get_row_at_index(GTK_LIST_BOX(window->history), HISTORY);
        if (row) gtk_list_box_remove(GTK_LIST_BOX(window->history), GTK_WIDGET(row));
        g_free(window->current);
    }
    window->current = g_strdup(text);
    gtk_label_set_label(GTK_LABEL(window->clip_label), text);
    gtk_label_set_label(GTK_LABEL(window->url_label), url ? url : "");
    if (window->report) {
        JsonBuilder *builder = json_builder_new();
        json_builder_begin_object(builder);
        json_builder_set_member_name(builder, "text");
        json_builder_add_string_value(builder, gtk_label_get_label(GTK_LABEL(window->clip_label)));
        json_builder_set_member_name(builder, "url");
        if (url) json_builder_add_string_value(builder, url);
        else json_builder_add_null_value(builder);
        json_builder_set_member_name(builder, "reason");
        json_builder_add_string_value(builder, reason_name(reason));
        json_builder_end_object(builder);
        JsonNode *root = json_builder_get_root(builder);
        char *line = json_to_string(root, FALSE);
        printf("%s\n", line);
        fflush(stdout);
        g_free(line);
        json_node_unref(root);
        g_object_unref(builder);
    }
}

/* A delivery of the toShell mailbox, on GTK's main thread (the GLib adapter dispatches it). */
static void on_clip(const wh_message *message, void *data) {
    lines *window = data;
    size_t length = 0;
    const char *json = wh_message_json(message, &length);
    if (!json) return; /* cleared, or unreadable (wh_message_error says why) */
    JsonParser *parser = json_parser_new();
    GError *error = NULL;
    if (!json_parser_load_from_data(parser, json, (gssize)length, &error)) {
        fprintf(stderr, "lines-window: the clip is not JSON: %s\n", error->message);
        g_error_free(error);
    } else {
        JsonNode *root = json_parser_get_root(parser);
        JsonObject *clip = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
        JsonNode *text = clip ? json_object_get_member(clip, "text") : NULL;
        JsonNode *url = clip ? json_object_get_member(clip, "url") : NULL;
        if (!text || json_node_get_value_type(text) != G_TYPE_STRING) {
            fprintf(stderr, "lines-window: not a Lines clip (an object with a string \"text\"): %.80s\n", json);
        } else {
            const char *page = url && json_node_get_value_type(url) == G_TYPE_STRING ? json_node_get_string(url) : NULL;
            show_clip(window, json_node_get_string(text), page && *page ? page : NULL, wh_message_reason(message));
        }
    }
    g_object_unref(parser);
}

static GtkWidget *heading(const char *text) {
    GtkWidget *label = gtk_label_new(text);
    gtk_label_set_xalign(GTK_LABEL(label), 0.0f);
    gtk_widget_add_css_class(label, "heading");
    return label;
}

static void on_close(GtkWindow *window, gpointer loop) {
    (void)window;
    g_main_loop_quit(loop);
}

static gboolean on_signal(gpointer loop) {
    g_main_loop_quit(loop);
    return G_SOURCE_REMOVE;
}

int main(int argc, char **argv) {
    const char *group = getenv("LINES_GROUP") && *getenv("LINES_GROUP") ? getenv("LINES_GROUP") : DEFAULT_GROUP;
    lines window = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--report") == 0) window.report = TRUE;
        else if (strcmp(argv[i], "--group") == 0 && i + 1 < argc) group = argv[++i];
        else {
            fprintf(stderr, "usage: lines-window [--group G] [--report]\n");
            return 2;
        }
    }
    if (!gtk_init_check()) {
        fprintf(stderr, "lines-window: cannot open a display (DISPLAY/WAYLAND_DISPLAY)\n");
        return 1;
    }
    GMainLoop *loop = g_main_loop_new(NULL, FALSE);
    GtkWidget *top = gtk_window_new();
    gtk_window_set_title(GTK_WINDOW(top), "Lines");
    gtk_window_set_default_size(GTK_WINDOW(top), 560, 320);
    GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 8);
    gtk_widget_set_margin_top(box, 18);
    gtk_widget_set_margin_bottom(box, 18);
    gtk_widget_set_margin_start(box, 18);
    gtk_widget_set_margin_end(box, 18);
    window.clip_label = gtk_label_new("No clip yet");
    gtk_label_set_xalign(GTK_LABEL(window.clip_label), 0.0f);
    gtk_label_set_wrap(GTK_LABEL(window.clip_label), TRUE);
    gtk_widget_add_css_class(window.clip_label, "title-2");
    window.url_label = gtk_label_new("");
    gtk_label_set_xalign(GTK_LABEL(window.url_label), 0.0f);
    gtk_widget_add_css_class(window.url_label, "dim-label");
    window.history = gtk_list_box_new();
    gtk_list_box_set_selection_mode(GTK_LIST_BOX(window.history), GTK_SELECTION_NONE);
    gtk_box_append(GTK_BOX(box), heading("Latest clip"));
    gtk_box_append(GTK_BOX(box), window.clip_label);
    gtk_box_append(GTK_BOX(box), window.url_label);
    gtk_box_append(GTK_BOX(box), heading("Earlier"));
    gtk_box_append(GTK_BOX(box), window.history);
    gtk_window_set_child(GTK_WINDOW(top), box);
    g_signal_connect(top, "close-request", G_CALLBACK(on_close), loop);
    g_unix_signal_add(SIGTERM, on_signal, loop);
    g_unix_signal_add(SIGINT, on_signal, loop);
    gtk_window_present(GTK_WINDOW(top));

    /* libwormhole: a context whose deliveries GTK's main loop dispatches, and the mailbox. */
    wh_context *context = NULL;
    wh_mailbox *mailbox = NULL;
    wh_subscription *subscription = NULL;
    wh_error *error = NULL;
    if (wh_context_new(NULL, &context, &error) != WH_OK ||
        wh_mailbox_open(context, group, "lines", &mailbox, &error) != WH_OK ||
        wh_mailbox_listen(mailbox, "toShell", WH_LISTEN_STORED_ON_START, on_clip, &window, NULL, &subscription, &error) !=
            WH_OK) {
        fprintf(stderr, "lines-window: cannot listen: %s\n", wh_error_message(error));
        return 1;
    }
    guint source = wh_glib_attach(context, NULL);
    fprintf(stderr, "ready\n");

    g_main_loop_run(loop);

    g_source_remove(source);
    wh_subscription_free(subscription);
    wh_mailbox_free(mailbox);
    wh_context_free(context);
    gtk_window_destroy(GTK_WINDOW(top));
    g_main_loop_unref(loop);
    g_free(window.current);
    return 0;
}
