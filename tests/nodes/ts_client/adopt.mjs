// TypeScript SDK 1.x sessions whose two-question calls wait while the test kills nodes.
//
//   node tests/nodes/ts_client/adopt.mjs URL SESSIONS GATES JOURNAL
//
// Each session (Client over StreamableHTTPClientTransport) initializes and calls "interview";
// its elicitation handler notes each question's id (which names the node that asked) and, once
// every session's question of that round has arrived, prints {"asked": <round>} and waits for
// the file <GATES>/<round> before it answers. The test kills a node meanwhile. Prints one JSON
// line per session: its nonce, the ids of the questions its handler saw, and how the call ended.
// Run with NODE_PATH pointing at the installed SDK's node_modules.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, sessions, gates, journal] = process.argv.slice(2);
const total = Number(sessions);
const rounds = { 1: 0, 2: 0 };
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function one() {
  const nonce = randomBytes(4).toString("hex");
  const record = { nonce, questions: [], call: null };
  const client = new Client({ name: "adoption-ts", version: "1" }, { capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
    const number = request.params.message.includes("name") ? 1 : 2;
    const content = number === 1 ? { name: `n-${nonce}` } : { city: `c-${nonce}` };
    const id = String(extra.requestId);
    if (record.questions.includes(id)) { record.questions.push(id); return { action: "accept", content }; }
    record.questions.push(id);
    rounds[number] += 1;
    if (rounds[number] === total) console.log(JSON.stringify({ asked: number }));
    while (!existsSync(join(gates, String(number)))) await sleep(50);
    return { action: "accept", content };
  });
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    const result = await client.callTool({ name: "interview", arguments: { nonce, path: journal } }, undefined,
                                         { timeout: 120000 });
    const text = result.content[0].text;
    record.call = text === `${nonce}:n-${nonce}:c-${nonce}` ? "ok" : text;
  } catch (error) {
    record.failed = `${error.name}: ${error.message}`;
  } finally {
    await client.close().catch(() => {});
  }
  return record;
}

const records = await Promise.all(Array.from({ length: total }, one));
for (const record of records) console.log(JSON.stringify(record));
process.exit(0);
