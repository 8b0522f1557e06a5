"""Drives the mcpvisor gateway over Streamable HTTP with the official Python
SDK client (PyPI `mcp`, pinned in requirements.txt), the gateway relaying to
server-everything, and prints what it saw as one JSON object.

Usage: python gateway_client.py URL
"""

import asyncio
import json
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client


async def sampling(context, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    text = params.messages[0].content.text
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=f"from py: {text}"),
        model="m",
    )


async def main(url: str) -> None:
    out = {}
    logs = []

    async def logging(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.level)

    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write, sampling_callback=sampling, logging_callback=logging) as s:
            await s.initialize()
            out["tools"] = [t.name for t in (await s.list_tools()).tools]
            r = await s.call_tool("everything__echo", {"message": "hi"})
            out["echo"] = r.content[0].text
            progress = []

            async def on_progress(p, total, message):
                progress.append(p)

            await s.call_tool(
                "everything__trigger-long-running-operation",
                {"duration": 1, "steps": 2},
                progress_callback=on_progress,
            )
            out["progress"] = progress
            r = await s.call_tool("everything__trigger-sampling-request", {"prompt": "hello"})
            out["sampling"] = " ".join(getattr(c, "text", "") for c in r.content)
            out["prompts"] = [p.name for p in (await s.list_prompts()).prompts]
            resources = (await s.list_resources()).resources
            out["resource"] = str(resources[0].uri) if resources else None
            if resources:
                read_back = await s.read_resource(resources[0].uri)
                out["read"] = str(read_back.contents[0].uri)
    print(json.dumps(out))


asyncio.run(main(sys.argv[1]))
