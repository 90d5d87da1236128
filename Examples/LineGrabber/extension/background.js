// SPDX-License-Identifier: Apache-2.0
// LineGrabber's background script: a context-menu item "Send to Lines" on selected text, which
// hands the text and the page's address to the native host (com.example.linegrabber). Chromium
// runs it as a service worker, Firefox as an event page; `chrome.*` is available in both.

const HOST = "com.example.linegrabber";
const MENU = "send-to-lines";

chrome.runtime.onInstalled.addListener(() => {
  chrome.contextMenus.create({ id: MENU, title: "Send to Lines", contexts: ["selection"] });
});

chrome.contextMenus.onClicked.addListener((info, tab) => {
  if (info.menuItemId !== MENU || !info.selectionText) return;
  sendLine(info.selectionText, tab && tab.url);
});

// One message, one reply: the host stores the line as `toShell` (Lines wakes at once) and
// answers with Lines' latest answer (`toExtension`), if any.
async function sendLine(text, url) {
  try {
    const reply = await chrome.runtime.sendNativeMessage(HOST, { line: text, url: url });
    console.log("LineGrabber: stored", reply);
    return reply;
  } catch (error) {
    console.error("LineGrabber: the native host failed:", error);
    return { ok: false, error: String(error) };
  }
}
