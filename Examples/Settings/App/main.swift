// SPDX-License-Identifier: Apache-2.0
// The app side of scenario 3 (shared settings and files): see Examples/Settings/Shared.
//
//   settings-app --group GROUP [--bus-address ADDRESS]   (commands on standard input)
import SettingsShared

settingsMain(role: "app")
