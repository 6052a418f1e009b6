// The official TypeScript MCP SDK as a client of samespace, for tests/e2e/test_mcp_clients_e2e.py.
//
//   SAMESPACE_SERVE__TOKEN=... node sdk_client.mjs http://127.0.0.1:8000/mcp/ < calls.json
//
// Connects over streamable HTTP (the bearer token from SAMESPACE_SERVE__TOKEN, never from argv), reads
// what the server offers (its capabilities, every page of tools, resources, resource templates and
// prompts) and makes what stdin asks: {"calls": [{"name", "arguments"}], "reads": [uri], "prompts": [{"name",
// "arguments"}]} (a bare list is the calls alone); prints one JSON object. A read or a prompt the server
// refuses is reported as {"error": ...} in its place.
// A listing the server refuses is reported as {"error": {"code", "message"}}: the test decides.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8") || "[]");
}

async function allPages(list, key) {
  const items = [];
  let cursor;
  try {
    do {
      const page = await list(cursor === undefined ? {} : { cursor });
      items.push(...page[key]);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  } catch (error) {
    return { error: { code: error.code ?? null, message: String(error.message ?? error) } };
  }
  return items;
}

const url = process.argv[2];
const token = process.env.SAMESPACE_SERVE__TOKEN;
const asked = await readStdin();
const { calls = [], reads = [], prompts = [] } = Array.isArray(asked) ? { calls: asked } : asked;
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "samespace-e2e-typescript-sdk", version: "1.0.0" });
await client.connect(transport);
const answer = {
  protocolVersion: transport.protocolVersion ?? null,
  serverInfo: client.getServerVersion() ?? null,
  capabilities: client.getServerCapabilities() ?? null,
  instructions: client.getInstructions() ?? null,
  tools: await allPages((p) => client.listTools(p), "tools"),
  resources: await allPages((p) => client.listResources(p), "resources"),
  resourceTemplates: await allPages((p) => client.listResourceTemplates(p), "resourceTemplates"),
  prompts: await allPages((p) => client.listPrompts(p), "prompts"),
  calls: [],
};
for (const call of calls) {
  answer.calls.push({ ...call, result: await client.callTool({ name: call.name, arguments: call.arguments }) });
}
async function orError(request) {
  try {
    return await request();
  } catch (error) {
    return { error: { code: error.code ?? null, message: String(error.message ?? error) } };
  }
}
answer.reads = [];
for (const uri of reads) {
  answer.reads.push({ uri, result: await orError(() => client.readResource({ uri })) });
}
answer.prompts_got = [];
for (const prompt of prompts) {
  answer.prompts_got.push({ ...prompt, result: await orError(() => client.getPrompt(prompt)) });
}
await client.close();
process.stdout.write(JSON.stringify(answer) + "\n");
