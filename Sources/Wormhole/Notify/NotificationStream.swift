// SPDX-License-Identifier: Apache-2.0
public import WormholeDBus

/// Notifications as an `AsyncSequence` (see ``DarwinNotificationCenter/notifications(name:options:)``);
/// the observer goes when the iteration ends or the stream is released.
public typealias NotificationStream = SubscriptionStream<DarwinNotification, Never>
