// SPDX-License-Identifier: Apache-2.0
// Used by try-in-chromium.sh: connects to Chromium's DevTools endpoint (the ws:// address it
// printed), waits for LineGrabber's service worker to appear, and calls its sendLine(TEXT, URL)
// there, as the context menu's click handler does; prints the native host's reply.
//
//   node --experimental-websocket cdp-send.js WS-ADDRESS EXTENSION-ID TEXT URL
const [address, extensionId, text, url] = process.argv.slice(2);
const socket = new WebSocket(address);
let nextId = 1;
const pending = new Map();
function call(method, params = {}, sessionId) {
  const id = nextId++;
  socket.send(JSON.stringify({ id, method, params, sessionId }));
  return new Promise((resolve) => pending.set(id, resolve));
}
let attached = false;
async function attach(info) {
  if (attached || info.type !== "service_worker" || !info.url.startsWith(`chrome-extension://${extensionId}/`)) return;
  attached = true;
  const { result } = await call("Target.attachToTarget", { targetId: info.targetId, flatten: true });
  const expression = `sendLine(${JSON.stringify(text)}, ${JSON.stringify(url)})`;
  const evaluated = await call("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true }, result.sessionId);
  console.log(JSON.stringify(evaluated.result?.result?.value ?? evaluated));
  process.exit(0);
}
socket.onmessage = (event) => {
  const message = JSON.parse(event.data);
  if (message.id && pending.has(message.id)) {
    pending.get(message.id)(message);
    pending.delete(message.id);
  } else if (message.method === "Target.targetCreated" || message.method === "Target.targetInfoChanged") {
    attach(message.params.targetInfo);
  }
};
socket.onopen = () => call("Target.setDiscoverTargets", { discover: true });
socket.onerror = (error) => {
  console.error("cdp-send: " + (error.message || error));
  process.exit(1);
};
