"""Ray Serve applications: the MCP server (streamable HTTP); RLM and admin arrive later."""
