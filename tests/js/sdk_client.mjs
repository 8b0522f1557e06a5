// Drives a server over stdio with the official TypeScript SDK client and
// prints what it saw as one JSON object. Usage: node sdk_client.mjs SERVER_BINARY
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const transport = new StdioClientTransport({ command: process.argv[2], args: [], stderr: "ignore" });
const client = new Client({ name: "ts-sdk-test", version: "1.0.0" }, { capabilities: { sampling: {} } });
client.setRequestHandler(
  (await import("@modelcontextprotocol/sdk/types.js")).CreateMessageRequestSchema,
  async (req) => ({ role: "assistant", content: { type: "text", text: "from ts: " + req.params.messages[0].content.text }, model: "m" }),
);
await client.connect(transport);
const out = {};
out.server = client.getServerVersion();
out.protocol = transport._protocolVersion ?? null;
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.text = (await client.callTool({ name: "test_simple_text", arguments: {} })).content[0].text;
out.error = (await client.callTool({ name: "test_error_handling", arguments: {} })).isError;
out.sampling = (await client.callTool({ name: "test_sampling", arguments: { prompt: "hi" } })).content[0].text;
const progress = [];
await client.callTool({ name: "test_tool_with_progress", arguments: {} }, undefined, { onprogress: (p) => progress.push(p.progress) });
out.progress = progress;
out.resources = (await client.listResources()).resources.map((r) => r.uri);
out.resource = (await client.readResource({ uri: "test://static-text" })).contents[0].text;
out.templated = (await client.readResource({ uri: "test://template/7/data" })).contents[0].text;
out.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
out.prompt = (await client.getPrompt({ name: "test_prompt_with_arguments", arguments: { arg1: "a", arg2: "b" } })).messages[0].content.text;
out.completion = (await client.complete({ ref: { type: "ref/prompt", name: "test_prompt_with_arguments" }, argument: { name: "arg1", value: "pa" } })).completion.values;
try {
  await client.callTool({ name: "no_such_tool", arguments: {} });
  out.unknownTool = "no error";
} catch (e) {
  out.unknownTool = e.code;
}
await client.close();
console.log(JSON.stringify(out));
