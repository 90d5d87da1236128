// SPDX-License-Identifier: Apache-2.0
// Sends ?text=… (and ?url=…) through the native host, as the context menu does, and shows the reply.
const parameters = new URLSearchParams(location.search);
const text = parameters.get("text");
const shown = document.getElementById("reply");
if (!text) {
  shown.textContent = "give ?text=…";
} else {
  chrome.runtime
    .sendNativeMessage("com.example.linegrabber", { line: text, url: parameters.get("url") || location.href })
    .then((reply) => {
      shown.textContent = JSON.stringify(reply);
      document.title = "LineGrabber: sent";
    })
    .catch((error) => {
      shown.textContent = "error: " + error;
      document.title = "LineGrabber: failed";
    });
}
