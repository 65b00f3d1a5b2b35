// A small MCP Apps host, built the way the extension's web hosts are: the official client
// (@modelcontextprotocol/client) talks to the server, the extension's AppBridge
// (@modelcontextprotocol/ext-apps/app-bridge) talks to the interface, which runs in a
// sandboxed frame (allow-scripts only: an opaque origin) under the Content-Security-Policy the
// extension tells hosts to build from the resource's _meta.ui.csp. Every question the server
// asks, the model's call's and the interface's own calls' alike, is shown as a form for the
// test to fill in.
//
// host.html?server=URL&era=legacy|modern&tool=NAME&arguments=JSON

import { AppBridge, PostMessageTransport, RESOURCE_MIME_TYPE, getToolUiResourceUri } from "@modelcontextprotocol/ext-apps/app-bridge";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const query = new URLSearchParams(location.search);
const status = (text) => { document.getElementById("status").textContent = text; };
const log = (text) => { document.getElementById("log").textContent += `${text}\n`; };
window.hostEvents = [];

// -- questions: one form per elicitation, answered by the test ---------------------------------

function field(form, name, property) {
  const label = document.createElement("label");
  label.textContent = `${property.title ?? name} `;
  const options = property.oneOf ?? property.anyOf ?? (property.enum ?? []).map((value) => ({ const: value }));
  const items = property.items ?? {};
  const itemOptions = items.anyOf ?? items.oneOf ?? (items.enum ?? []).map((value) => ({ const: value }));
  let input;
  if (property.type === "array") {
    input = document.createElement("fieldset");
    input.name = name;
    for (const option of itemOptions) {
      const box = document.createElement("label");
      const check = document.createElement("input");
      check.type = "checkbox";
      check.name = name;
      check.value = option.const;
      box.append(check, ` ${option.title ?? option.const}`);
      input.append(box);
    }
  } else if (options.length > 0) {
    input = document.createElement("select");
    input.name = name;
    for (const option of options) {
      const choice = document.createElement("option");
      choice.value = option.const;
      choice.textContent = option.title ?? option.const;
      input.append(choice);
    }
  } else if (property.type === "boolean") {
    input = document.createElement("input");
    input.type = "checkbox";
    input.name = name;
    input.checked = property.default === true;
  } else {
    input = document.createElement("input");
    input.type = property.type === "integer" || property.type === "number" ? "number" : "text";
    input.name = name;
  }
  label.append(input);
  form.append(label, document.createElement("br"));
}

function valueOf(form, name, property) {
  if (property.type === "array") {
    return [...form.querySelectorAll(`input[name="${name}"]:checked`)].map((box) => box.value);
  }
  const input = form.elements.namedItem(name);
  if (property.type === "boolean") return input.checked;
  if (property.type === "integer") return Number.parseInt(input.value, 10);
  if (property.type === "number") return Number(input.value);
  return input.value;
}

function ask(params) {
  window.hostEvents.push({ asked: params.message });
  return new Promise((resolve) => {
    const form = document.createElement("form");
    const heading = document.createElement("h3");
    heading.textContent = params.message;
    form.append(heading);
    const properties = params.requestedSchema?.properties ?? {};
    for (const [name, property] of Object.entries(properties)) field(form, name, property);
    const submit = document.createElement("button");
    submit.type = "submit";
    submit.textContent = "Submit";
    const decline = document.createElement("button");
    decline.type = "button";
    decline.textContent = "Decline";
    form.append(submit, decline);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const content = {};
      for (const [name, property] of Object.entries(properties)) content[name] = valueOf(form, name, property);
      form.remove();
      resolve({ action: "accept", content });
    });
    decline.addEventListener("click", () => { form.remove(); resolve({ action: "decline" }); });
    document.getElementById("questions").append(form);
  });
}

// -- the content security policy, as the extension tells hosts to build it ------------------------

function policy(csp = {}) {
  const list = (domains, otherwise) => (domains && domains.length ? domains.join(" ") : otherwise);
  const resources = list(csp.resourceDomains, "");
  return [
    "default-src 'none'",
    `script-src 'unsafe-inline' ${resources}`, `style-src 'unsafe-inline' ${resources}`,
    `img-src data: ${resources}`, `font-src ${resources || "'none'"}`, `media-src data: ${resources}`,
    `connect-src ${list(csp.connectDomains, "'none'")}`, `frame-src ${list(csp.frameDomains, "'none'")}`,
    `base-uri ${list(csp.baseUriDomains, "'self'")}`, "object-src 'none'",
  ].join("; ");
}

function withPolicy(html, csp) {
  const tag = `<meta http-equiv="Content-Security-Policy" content="${policy(csp).replaceAll('"', "&quot;")}">`;
  return /<head[^>]*>/i.test(html) ? html.replace(/<head[^>]*>/i, (head) => `${head}${tag}`) : `${tag}${html}`;
}

// -- the host -----------------------------------------------------------------------------------------

async function main() {
  const era = query.get("era");
  const client = new Client({ name: "mrtr-test-host", version: "1.0.0" }, {
    capabilities: { elicitation: { form: {} }, extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [RESOURCE_MIME_TYPE] } } },
    ...(era === "modern" ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : {}),
  });
  client.setRequestHandler("elicitation/create", (request) => ask(request.params));
  await client.connect(new StreamableHTTPClientTransport(new URL(query.get("server"))));
  log(`connected: MCP ${client.getNegotiatedProtocolVersion()}`);
  status(`connected: MCP ${client.getNegotiatedProtocolVersion()}`);

  const { tools } = await client.listTools();
  const tool = tools.find((candidate) => candidate.name === query.get("tool"));
  const uri = getToolUiResourceUri(tool);
  const read = await client.readResource({ uri });
  const item = read.contents.find((content) => content.uri === uri);
  if (item?.mimeType !== RESOURCE_MIME_TYPE) throw new Error(`${uri} is ${item?.mimeType}, not an MCP App`);
  const meta = item._meta?.ui ?? {};

  const frame = document.createElement("iframe");
  frame.id = "app";
  frame.title = "interface";
  frame.setAttribute("sandbox", "allow-scripts");
  document.getElementById("frame").append(frame);

  const bridge = new AppBridge(client, { name: "mrtr-test-host", version: "1.0.0" },
                               { serverTools: {}, serverResources: {}, logging: {} },
                               { hostContext: { theme: "light", displayMode: "inline" } });
  const initialized = new Promise((resolve) => { bridge.oninitialized = resolve; });
  bridge.onsizechange = ({ height }) => { if (height) frame.style.height = `${Math.min(height + 16, 800)}px`; };
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  frame.srcdoc = withPolicy(item.text, meta.csp);
  await initialized;
  status("interface initialized");

  const args = JSON.parse(query.get("arguments") ?? "{}");
  await bridge.sendToolInput({ arguments: args });
  const result = await client.callTool({ name: tool.name, arguments: args });
  await bridge.sendToolResult(result);
  status("tool result sent to the interface");
}

main().catch((error) => {
  status(`host failed: ${error?.message ?? error}`);
  log(String(error?.stack ?? error));
});
