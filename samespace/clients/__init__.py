"""The clients of the cluster's two surfaces, as the `samespace` commands use them.

This `__init__` is the package's one door. Behind it: `_mcp.py` (the MCP SDK's client against the
endpoint: one tool call, a sample search, the paste-ready client config) and `_admin.py` (the admin
API: status as a table or raw JSON, the key and policy pushes, index management).
"""

from __future__ import annotations

from samespace.clients._admin import admin_command
from samespace.clients._mcp import call_tool, mcp_command, oauth_advice, read_token_file, result_text

__all__ = ["admin_command", "call_tool", "mcp_command", "oauth_advice", "read_token_file", "result_text"]
