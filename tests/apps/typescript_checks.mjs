// The official TypeScript client (@modelcontextprotocol/client, pinned in package.json) reads an
// mrtr server's MCP Apps as a host does, and checks every field against the extension's
// schema.json (@modelcontextprotocol/ext-apps, pinned too), with ajv.
//
//   node typescript_checks.mjs RUNS_JSON
//
// RUNS_JSON is a list of runs: {"name", "transport": "http"|"stdio", "url" | "command"+"args"+"cwd",
// "era": "legacy"|"modern", "ui": true|false}. Each run connects (the 2025 initialize, or
// 2026-07-28 pinned), lists the tools and resources, reads the interface, calls the linked tool
// and the app-only tool that asks a question, and prints one JSON line: the run's name, what
// it saw, and the problems found ([] when none). Run by tests/apps/test_typescript_client.py.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import Ajv2020 from "ajv/dist/2020.js";

const require = createRequire(import.meta.url);
const EXTENSION = "io.modelcontextprotocol/ui";
const MIME = "text/html;profile=mcp-app";
const FLAT = "ui/resourceUri";

const schema = JSON.parse(readFileSync(require.resolve("@modelcontextprotocol/ext-apps/schema.json"), "utf-8"));
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(schema);
const validator = (name) => ajv.getSchema(`${schema.$id}#/$defs/${name}`);

async function run(spec) {
  const problems = [];
  const saw = {};
  const check = (ok, what) => { if (!ok) problems.push(what); };
  const valid = (value, def, where) => {
    const validate = validator(def);
    if (!validate(value)) problems.push(`${where}: not a valid ${def}: ${ajv.errorsText(validate.errors)}`);
  };

  const capabilities = { elicitation: { form: {} } };
  if (spec.ui) {
    capabilities.extensions = { [EXTENSION]: { mimeTypes: [MIME] } };
    valid(capabilities.extensions[EXTENSION], "McpUiClientCapabilities", "the declaration");
  }
  const options = { capabilities };
  if (spec.era === "modern") options.versionNegotiation = { mode: { pin: "2026-07-28" } };
  const client = new Client({ name: "mrtr-apps-checks", version: "1.0.0" }, options);
  const questions = [];
  client.setRequestHandler("elicitation/create", async (request) => {
    questions.push(request.params.message);
    return { action: "accept", content: { go: true } };
  });
  const transport = spec.transport === "http"
    ? new StreamableHTTPClientTransport(new URL(spec.url))
    : new StdioClientTransport({ command: spec.command, args: spec.args, cwd: spec.cwd, env: process.env,
                                 stderr: "ignore" });
  await client.connect(transport);
  try {
    saw.version = client.getNegotiatedProtocolVersion();
    check(spec.era === "modern" ? saw.version === "2026-07-28" : saw.version === "2025-11-25",
          `negotiated ${saw.version} in the ${spec.era} era`);
    const advertised = client.getServerCapabilities()?.extensions?.[EXTENSION];
    check(advertised !== undefined && typeof advertised === "object", "the server does not advertise the extension");

    const { tools } = await client.listTools();
    saw.tools = {};
    for (const tool of tools) {
      const meta = tool._meta ?? {};
      saw.tools[tool.name] = { ui: meta.ui ?? null, flat: meta[FLAT] ?? null };
      if (meta.ui === undefined) {
        check(meta[FLAT] === undefined, `tool ${tool.name}: a flat ${FLAT} without _meta.ui`);
        continue;
      }
      valid(meta.ui, "McpUiToolMeta", `tool ${tool.name} _meta.ui`);
      check(meta[FLAT] === meta.ui.resourceUri, `tool ${tool.name}: _meta.ui.resourceUri and ${FLAT} differ`);
      if (meta.ui.resourceUri !== undefined) check(meta.ui.resourceUri.startsWith("ui://"), `tool ${tool.name}: not ui://`);
      for (const who of meta.ui.visibility ?? []) check(["model", "app"].includes(who), `tool ${tool.name}: ${who}`);
    }
    const linked = tools.find((tool) => tool._meta?.ui?.resourceUri);
    check(linked !== undefined, "no tool links to an interface");
    const uri = linked._meta.ui.resourceUri;

    const { resources } = await client.listResources();
    const listed = resources.find((resource) => resource.uri === uri);
    check(listed !== undefined, `${uri} is not listed`);
    check(listed?.mimeType === MIME, `the listing's mimeType is ${listed?.mimeType}`);
    valid(listed?._meta?.ui ?? {}, "McpUiResourceMeta", "the listing entry's _meta.ui");

    const read = await client.readResource({ uri });
    check(read.contents.length === 1, `${read.contents.length} content items`);
    const [item] = read.contents;
    check(item.uri === uri, `the content item's uri is ${item.uri}`);
    check(item.mimeType === MIME, `the content item's mimeType is ${item.mimeType}`);
    check(typeof item.text === "string" && /^<!doctype html/i.test(item.text), "the content is not an HTML5 document");
    valid(item._meta?.ui ?? {}, "McpUiResourceMeta", "the content item's _meta.ui");
    check(JSON.stringify(item._meta?.ui) === JSON.stringify(listed?._meta?.ui),
          "the content item's _meta.ui differs from the listing entry's");
    saw.resourceMeta = item._meta?.ui ?? null;

    const called = await client.callTool({ name: linked.name, arguments: { region: "eu" } });
    const text = (called.content ?? []).filter((block) => block.type === "text").map((block) => block.text).join("\n");
    check(text.length > 0, "the linked tool returned no text content (the fallback)");
    check(called.structuredContent?.ui === spec.ui,
          `the server saw ui=${called.structuredContent?.ui} for a client declaring ui=${spec.ui}`);
    saw.text = text;

    const appOnly = tools.find((tool) => JSON.stringify(tool._meta?.ui?.visibility) === JSON.stringify(["app"]));
    check(appOnly !== undefined, "no app-only tool");
    const refreshed = await client.callTool({ name: appOnly.name, arguments: { region: "eu" } });
    saw.appOnly = refreshed.content?.[0]?.text;
    saw.questions = questions;
    check(saw.appOnly === "refreshed eu", `the app-only tool answered ${JSON.stringify(saw.appOnly)}`);
    check(questions.length === 1, `${questions.length} questions for one question asked`);
  } catch (error) {
    problems.push(`failed: ${error?.stack ?? error}`);
  } finally {
    await client.close();
  }
  return { name: spec.name, saw, problems };
}

const runs = JSON.parse(process.argv[2]);
let failed = false;
for (const spec of runs) {
  const outcome = await run(spec);
  failed ||= outcome.problems.length > 0;
  process.stdout.write(JSON.stringify(outcome) + "\n");
}
process.exit(failed ? 1 : 0);
