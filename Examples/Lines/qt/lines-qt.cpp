/* Lines in a Qt 6 window, in C++ through libwormhole: shows each clip the moment it is stored.
 *
 * The Qt twin of Examples/Lines/c/lines-window.c: it listens to the Lines mailbox (group
 * group.com.example.lines or $LINES_GROUP, directory "lines", mailbox "toShell"; each clip is
 * {"id":…, "text":…, "url":…, "sentAt":…}), the stored clip at start and then every new one,
 * and wormhole-qt.h's QSocketNotifier runs the handler on Qt's GUI thread: no locks of its own.
 *
 *   lines-qt [--report]           the window (QT_QPA_PLATFORM=offscreen runs it without a display)
 *   lines-qt --echo PING PONG     answers each post of PING with PONG carrying the same state, on
 *                                 the Qt event loop (the latency row of Tests/bench-c.sh); exits
 *                                 on state 2^64-1
 *
 * --report prints one JSON line on standard output each time the shown clip changes
 * ({"text":…,"url":…,"reason":…}); "ready" goes to standard error once it listens. Build:
 *
 *   c++ -std=c++17 -fPIC -o lines-qt lines-qt.cpp $(pkg-config --cflags --libs wormhole-1 Qt6Widgets)
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <wormhole-qt.h>

#include <QApplication>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QListWidget>
#include <QThread>
#include <QVBoxLayout>
#include <QWidget>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct Window {
    QWidget widget;
    QLabel *latest = nullptr;
    QListWidget *history = nullptr;
    bool report = false;
};

const char *reasonName(wh_reason reason) {
    switch (reason) {
    case WH_REASON_STORED: return "stored";
    case WH_REASON_CATCH_UP: return "catchUp";
    case WH_REASON_TRANSIENT: return "transient";
    default: return "posted";
    }
}

void onClip(const wh_message *message, void *data) {
    auto *window = static_cast<Window *>(data);
    if (QThread::currentThread() != window->widget.thread()) {
        std::fprintf(stderr, "lines-qt: a delivery off the GUI thread\n");
        std::abort();
    }
    size_t length = 0;
    const char *json = wh_message_json(message, &length);
    if (!json) return; // cleared
    QJsonObject clip = QJsonDocument::fromJson(QByteArray(json, static_cast<qsizetype>(length))).object();
    QString text = clip.value("text").toString();
    QString url = clip.value("url").toString();
    window->latest->setText(text);
    window->history->insertItem(0, url.isEmpty() ? text : text + QStringLiteral("  (") + url + QStringLiteral(")"));
    while (window->history->count() > 8) delete window->history->takeItem(8);
    if (window->report) {
        QJsonObject line{{"text", text},
                         {"url", url.isEmpty() ? QJsonValue() : QJsonValue(url)},
                         {"reason", reasonName(wh_message_reason(message))}};
        std::printf("%s\n", QJsonDocument(line).toJson(QJsonDocument::Compact).constData());
        std::fflush(stdout);
    }
}

struct Echo {
    wh_context *context;
    const char *pong;
};

void onPing(const wh_notification *notification, void *data) {
    auto *echo = static_cast<Echo *>(data);
    uint64_t state = 0;
    if (!wh_notification_state(notification, &state)) return;
    if (state == UINT64_MAX) QCoreApplication::quit();
    else wh_post_state(echo->context, echo->pong, state, nullptr);
}

int fail(const char *what, wh_error *error) {
    std::fprintf(stderr, "lines-qt: %s: %s\n", what, error ? wh_error_message(error) : "?");
    wh_error_free(error);
    return 1;
}

} // namespace

int main(int argc, char **argv) {
    QApplication app(argc, argv);
    wh_error *error = nullptr;
    wh_context *context = nullptr;
    if (wh_context_new(nullptr, &context, &error) != WH_OK) return fail("cannot reach the bus", error);
    QSocketNotifier *deliveries = wh_qt_attach(context, &app);
    wh_subscription *subscription = nullptr;
    wh_mailbox *mailbox = nullptr;
    Echo echo{context, nullptr};
    Window window;
    int status;
    if (argc == 4 && std::strcmp(argv[1], "--echo") == 0) {
        echo.pong = argv[3];
        if (wh_observe_name(context, argv[2], 0, onPing, &echo, nullptr, &subscription, &error) != WH_OK)
            return fail("cannot observe", error);
        std::fprintf(stderr, "ready\n");
        status = app.exec();
    } else {
        window.report = argc > 1 && std::strcmp(argv[1], "--report") == 0;
        const char *group = std::getenv("LINES_GROUP") && *std::getenv("LINES_GROUP") ? std::getenv("LINES_GROUP")
                                                                                       : "group.com.example.lines";
        auto *layout = new QVBoxLayout(&window.widget);
        window.latest = new QLabel(QStringLiteral("No clip yet"));
        window.history = new QListWidget;
        layout->addWidget(window.latest);
        layout->addWidget(window.history);
        window.widget.setWindowTitle(QStringLiteral("Lines"));
        window.widget.resize(560, 320);
        window.widget.show();
        if (wh_mailbox_open(context, group, "lines", &mailbox, &error) != WH_OK) return fail("cannot open", error);
        if (wh_mailbox_listen(mailbox, "toShell", WH_LISTEN_STORED_ON_START, onClip, &window, nullptr, &subscription,
                              &error) != WH_OK)
            return fail("cannot listen", error);
        std::fprintf(stderr, "ready\n");
        status = app.exec();
    }
    wh_subscription_free(subscription);
    wh_mailbox_free(mailbox);
    delete deliveries;
    wh_context_flush(context, 5000, nullptr);
    wh_context_free(context);
    return status;
}
