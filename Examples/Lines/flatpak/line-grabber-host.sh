#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The native-messaging host's `path` for a browser outside Flatpak: starts LineGrabber's host
# inside the Lines app's sandbox, as a second process of the app (docs/sandbox.md).
exec flatpak run --command=line-grabber-host org.example.Lines "$@"
