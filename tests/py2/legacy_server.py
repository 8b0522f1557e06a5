"""A minimal MCP server of the session revisions only (2025-11-25), over
stdio, without any SDK: it knows initialize, tools/list and tools/call, and
answers anything else (server/discover included) with -32601. The client's
fallback from server/discover to initialize is tested against it."""

import json
import sys

for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    method = m.get("method")
    if method == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "legacy", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "hello", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "hello from a session server"}]}
    else:
        out = {"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": f"Method not found: {method}"}}
        print(json.dumps(out), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result}), flush=True)
