// Drives the mcpvisor gateway over Streamable HTTP with the official
// TypeScript SDK client, the gateway relaying to server-everything, and
// prints what it saw as one JSON object. Usage: node gateway_client.mjs URL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const transport = new StreamableHTTPClientTransport(new URL(process.argv[2]));
const client = new Client({ name: "ts-gateway-test", version: "1.0.0" }, { capabilities: { sampling: {} } });
client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
  role: "assistant",
  content: { type: "text", text: "from ts: " + req.params.messages[0].content.text },
  model: "m",
}));
await client.connect(transport);
const out = {};
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.echo = (await client.callTool({ name: "everything__echo", arguments: { message: "hi" } })).content[0].text;
const progress = [];
await client.callTool(
  { name: "everything__trigger-long-running-operation", arguments: { duration: 1, steps: 2 } },
  undefined,
  { onprogress: (p) => progress.push(p.progress) },
);
out.progress = progress;
out.sampling = (await client.callTool({ name: "everything__trigger-sampling-request", arguments: { prompt: "hello" } })).content
  .map((c) => c.text ?? "")
  .join(" ");
out.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
const resources = (await client.listResources()).resources;
out.resource = resources[0]?.uri ?? null;
out.read = resources[0] ? (await client.readResource({ uri: resources[0].uri })).contents[0].uri : null;
console.log(JSON.stringify(out));
await client.close();
