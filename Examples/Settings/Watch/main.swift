// SPDX-License-Identifier: Apache-2.0
// The watch side of scenario 3 (shared settings and files): see Examples/Settings/Shared.
//
//   settings-watch --group GROUP [--bus-address ADDRESS]   (commands on standard input)
import SettingsShared

settingsMain(role: "watch")
