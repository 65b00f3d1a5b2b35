// The official TypeScript SDK 1.x client (@modelcontextprotocol/sdk, pinned in package.json) through
// mrtr proxy to a 2025-era stdio server (the official Python SDK 1.x's sdk1_server.py).
//
//   node typescript_checks.mjs RUN_JSON
//
// RUN_JSON: {"transport": "http"|"stdio", "url" | "command"+"args"+"cwd"}. The conversation: interview
// with two accepted answers, again with the second declined, confirm cancelled, count with progress,
// then a call cancelled by the client (AbortSignal) and one more call. Prints one JSON line per check.
// Run by tests/bridge/test_typescript.py.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const spec = JSON.parse(process.argv[2]);
const out = (record) => process.stdout.write(JSON.stringify(record) + "\n");
const text = (result) => result.content.filter((block) => block.type === "text").map((block) => block.text).join(" ");

const client = new Client({ name: "ts-sdk1-checks", version: "1.0.0" }, { capabilities: { elicitation: {} } });
let answers = [];
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params.message);
  return answers.shift();
});
const transport = spec.transport === "http"
  ? new StreamableHTTPClientTransport(new URL(spec.url))
  : new StdioClientTransport({ command: spec.command, args: spec.args, cwd: spec.cwd, env: process.env, stderr: "ignore" });
await client.connect(transport);
try {
  out({ check: "version", version: client.getServerVersion()?.name ?? null });
  answers = [{ action: "accept", content: { name: "Ada" } }, { action: "accept", content: { colour: "red" } }];
  out({ check: "two_questions", text: text(await client.callTool({ name: "interview", arguments: { topic: "ts" } })),
        asked: asked.splice(0) });
  answers = [{ action: "accept", content: { name: "Bo" } }, { action: "decline" }];
  out({ check: "decline", text: text(await client.callTool({ name: "interview", arguments: { topic: "ts" } })) });
  answers = [{ action: "cancel" }];
  out({ check: "cancel", text: text(await client.callTool({ name: "confirm", arguments: {} })) });
  // What reached the client's transport, in order: the progress notices and the count's result.
  // The client itself drops the notices it reads in the same chunk as the result (it hands a
  // notice to its callback a microtask later, after the result removed the call's progress
  // handler), so what the proxy wrote is judged here, and the callback only as far as it goes.
  const wire = [];
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (message.method === "notifications/progress") wire.push(message.params.progress);
    else if (message.result?.content?.[0]?.text?.startsWith("counted")) wire.push("result");
    deliver(message, extra);
  };
  const progress = [];
  let counted;
  try {
    counted = await client.callTool({ name: "count", arguments: { steps: 3 } }, undefined,
                                    { onprogress: (note) => progress.push(note.progress) });
  } finally {
    transport.onmessage = deliver;
  }
  out({ check: "progress", text: text(counted), progress, wire });
  const abort = new AbortController();
  answers = [];
  const pending = client.callTool({ name: "interview", arguments: { topic: "never" } }, undefined,
                                  { signal: abort.signal });
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params.message);
    abort.abort("the user closed the dialog");
    return await new Promise(() => {});  // never answered: the call is cancelled instead
  });
  let cancelled = "not cancelled";
  try { await pending; } catch (error) { cancelled = String(error.name || error); }
  client.setRequestHandler(ElicitRequestSchema, async (request) => answers.shift());
  answers = [{ action: "accept", content: { name: "Cy" } }, { action: "accept", content: { colour: "blue" } }];
  out({ check: "after_cancel", cancelled,
        text: text(await client.callTool({ name: "interview", arguments: { topic: "again" } })) });
} catch (error) {
  out({ check: "failed", error: String(error && error.stack || error) });
} finally {
  await client.close();
}
