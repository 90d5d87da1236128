// SPDX-License-Identifier: MIT
// Lines clip: a GNOME Shell 45+ extension that shows the latest Lines clip in the top bar,
// the moment the clip is stored, through the Wormhole GJS module (wormhole.js, beside this
// file) on the Shell's own session-bus connection.
import Clutter from 'gi://Clutter';
import Gio from 'gi://Gio';
import St from 'gi://St';

import {Extension} from 'resource:///org/gnome/shell/extensions/extension.js';
import * as Main from 'resource:///org/gnome/shell/ui/main.js';
import * as PanelMenu from 'resource:///org/gnome/shell/ui/panelMenu.js';

import {WormholeBus} from './wormhole.js';
import {ClipSource, formatClip} from './clip-source.js';

export default class LinesClipExtension extends Extension {
    /** Adds the label to the top bar and follows the clips. */
    enable() {
        this._button = new PanelMenu.Button(0.0, this.metadata.name, true);
        this._label = new St.Label({text: formatClip(null), y_align: Clutter.ActorAlign.CENTER});
        this._button.add_child(this._label);
        Main.panel.addToStatusArea(this.uuid, this._button);
        // The Shell's own connection: no second connection per extension, and nothing to
        // reconnect (the Shell ends with the session bus). close() leaves it open.
        this._bus = new WormholeBus({connection: Gio.DBus.session});
        this._source = new ClipSource({
            bus: this._bus,
            onClip: clip => {
                if (this._label)
                    this._label.text = formatClip(clip);
            },
            onError: e => console.warn(`${this.metadata.uuid}: ${e.message}`),
        });
        this._source.start().catch(e => console.warn(`${this.metadata.uuid}: ${e.message}`));
    }

    /** Removes everything enable() made. */
    disable() {
        this._source?.stop();
        this._source = null;
        this._bus?.close();
        this._bus = null;
        this._button?.destroy();
        this._button = null;
        this._label = null;
    }
}
