/* wormhole-qt.h: libwormhole's deliveries on a Qt 6 event loop (docs/c.md, *Qt*).
 *
 * Header only (C++17): compile with `pkg-config --cflags --libs wormhole-1 Qt6Core`.
 *
 *     QSocketNotifier *deliveries = wh_qt_attach(context, &app);
 *
 * A QSocketNotifier watches the context's descriptor (wh_context_fd, level-triggered) and calls
 * wh_context_dispatch when it is readable, so every handler of the context runs on the thread
 * whose event loop owns the notifier (the thread that calls wh_qt_attach; in a Qt program the
 * GUI thread), with no locking of the program's own, as avahi-qt and libportal-qt do. Delete the
 * notifier (or its parent) before wh_context_free.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef WORMHOLE_QT_H
#define WORMHOLE_QT_H

#include <QObject>
#include <QSocketNotifier>

#include "wormhole.h"

/* A new notifier (owned by `parent`, or yours when it is null) that dispatches `context`'s
 * deliveries on the calling thread's event loop. */
inline QSocketNotifier *wh_qt_attach(wh_context *context, QObject *parent = nullptr) {
    auto *notifier = new QSocketNotifier(static_cast<qintptr>(wh_context_fd(context)), QSocketNotifier::Read, parent);
    QObject::connect(notifier, &QSocketNotifier::activated, notifier, [context]() { wh_context_dispatch(context); });
    return notifier;
}

#endif /* WORMHOLE_QT_H */
