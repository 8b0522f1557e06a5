// A real browser against the Streamable HTTP transport: serves a page on
// localhost, opens it in headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core), and lets the page initialize a session and
// call a tool with fetch() across origins (CORS). Prints what the page saw.
// Usage: node browser.mjs MCP_URL
import http from "node:http";
import { chromium } from "playwright-core";

const mcpUrl = process.argv[2];
const page = `<!doctype html><meta charset="utf-8"><title>mcp</title><script>
async function rpc(body, session) {
  const headers = { "Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25" };
  if (session) headers["Mcp-Session-Id"] = session;
  const r = await fetch(${JSON.stringify(mcpUrl)}, { method: "POST", headers, body: JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, session: r.headers.get("Mcp-Session-Id"), body: text ? JSON.parse(text) : null };
}
window.run = async () => {
  const init = await rpc({ jsonrpc: "2.0", id: 1, method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "browser", version: "1" } } });
  const sid = init.session;
  const note = await rpc({ jsonrpc: "2.0", method: "notifications/initialized" }, sid);
  const call = await rpc({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "echo", arguments: { message: "hello from chromium" } } }, sid);
  return { initStatus: init.status, session: sid, protocol: init.body.result.protocolVersion, noteStatus: note.status,
           callStatus: call.status, text: call.body.result.content[0].text };
};
</script>`;
const server = http.createServer((req, res) => { res.writeHead(200, { "Content-Type": "text/html" }); res.end(page); });
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const pageUrl = `http://localhost:${server.address().port}/`;
const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const p = await browser.newPage();
  await p.goto(pageUrl);
  const result = await p.evaluate(() => window.run());
  console.log(JSON.stringify({ origin: new URL(pageUrl).origin, ...result }));
} finally {
  await browser.close();
  server.close();
}
