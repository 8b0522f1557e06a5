"""The official Python SDK 2.x client in its default mode ('auto': probes
server/discover, falls back to initialize) against an mcpvisor server, over
stdio (argv: stdio COMMAND) or Streamable HTTP (argv: http URL). Prints one
JSON line: the negotiated version and what the calls returned."""

import asyncio
import json
import sys

import mcp_types as types
from mcp import Client, StdioServerParameters

elicited = []


async def elicit(_context, params):
    elicited.append(params.message)
    return types.ElicitResult(action="accept", content={"name": "Alice"})


async def main():
    kind, target = sys.argv[1], sys.argv[2]
    server = StdioServerParameters(command=target) if kind == "stdio" else target
    async with Client(server, elicitation_callback=elicit) as c:
        tools = await c.list_tools()
        text = await c.call_tool("test_simple_text", {})
        hello = await c.call_tool("test_input_required_result_elicitation", {})
        print(json.dumps({
            "version": c.protocol_version,
            "tools": len(tools.tools),
            "text": text.content[0].text,
            "elicited": elicited,
            "hello": hello.content[0].text,
        }))


asyncio.run(main())
