#!/usr/bin/env node
// Drive an MCP server with the TypeScript SDK v1 client (@modelcontextprotocol/sdk 1.32.2,
// legacy handshake only) and print ONE JSON object, like py_client.py.
//
//   node ts_client.mjs (--url URL | --stdio "CMD ARGS" | --sse URL)
//        [--scenario NAME] [--profile fixture|everything] [--offer-version V]
//        [--header "Name: value"]... [--timeout SECONDS]
//
// Runs on the system Node 20. The SDK is loaded from $TS_SDK_DIR (the installed package
// folder, see env.sh); default: <repo>/.cache/peers/npm/node_modules/@modelcontextprotocol/sdk.
//
// Output (exit 0): {"protocol_version": "...", "server_info": {...}, "capabilities": {...},
//                   "results": {"<step>": {...}}}
// On any failure: exit 1, error on stderr, nothing on stdout.
//
// --offer-version V: the SDK always offers LATEST_PROTOCOL_VERSION (2025-11-25) in initialize
// and has no option for it. A transport wrapper (OfferingTransport below) rewrites
// params.protocolVersion of the outgoing `initialize` request; the SDK then accepts whatever
// the server answers as long as it is in its SUPPORTED_PROTOCOL_VERSIONS (2025-11-25,
// 2025-06-18, 2025-03-26, 2024-11-05, 2024-10-07) and sets that as the MCP-Protocol-Version
// header on HTTP. The same wrapper records the negotiated version (the SDK has no getter).
//
// Scenarios and step names/summaries are the same as py_client.py: full, connect, tools,
// resources, prompts, complete, progress, logging, errors, cancel.

import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SDK_DIR = process.env.TS_SDK_DIR ||
  path.join(process.env.ERAGATE_PEERS || path.join(HERE, '..', '..', '.cache', 'peers'),
    'npm', 'node_modules', '@modelcontextprotocol', 'sdk');
const sdk = (rel) => import(pathToFileURL(path.join(SDK_DIR, 'dist', 'esm', rel)).href);

const PROFILES = {
  fixture: {
    echo: ['echo', { text: 'hi' }],
    add: ['add', { a: 2, b: 3 }],
    meteo: ['météo', { city: 'Zürich' }],
    static_uri: 'test://static/hello',
    template_uri: 'test://items/42',
    prompt: ['greet', { name: 'Ada' }],
    complete: ['greet', 'name', 'a'],
    progress: ['slow_progress', { steps: 3 }],
  },
  everything: {
    echo: ['echo', { message: 'hi' }],
    add: ['get-sum', { a: 2, b: 3 }],
    meteo: null,
    static_uri: 'demo://resource/static/document/features.md',
    template_uri: 'demo://resource/dynamic/text/42',
    prompt: ['args-prompt', { city: 'Ada' }],
    complete: ['completable-prompt', 'department', 'E'],
    progress: ['trigger-long-running-operation', { duration: 0.3, steps: 3 }],
  },
};

const SCENARIOS = {
  full: ['list_tools', 'call_echo', 'call_add', 'call_meteo', 'list_resources', 'list_resource_templates',
    'read_static', 'read_template', 'list_prompts', 'get_prompt', 'complete'],
  connect: [],
  tools: ['list_tools', 'call_echo', 'call_add', 'call_meteo'],
  resources: ['list_resources', 'list_resource_templates', 'read_static', 'read_template'],
  prompts: ['list_prompts', 'get_prompt'],
  complete: ['complete'],
  progress: ['progress'],
  logging: ['logging'],
  errors: ['call_fail', 'call_unknown_tool', 'read_unknown_resource'],
  cancel: ['cancel'],
};

const TEXT_LIMIT = 300;

function usage(msg) {
  if (msg) process.stderr.write(`ts_client: ${msg}\n`);
  process.stderr.write('usage: ts_client.mjs (--url URL | --stdio "CMD ARGS" | --sse URL) [--scenario S] ' +
    '[--profile fixture|everything] [--offer-version V] [--header "N: v"]... [--timeout SECONDS]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const a = { scenario: 'full', profile: 'fixture', headers: {}, timeout: 30 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = () => { if (i + 1 >= argv.length) usage(`${k} needs a value`); return argv[++i]; };
    switch (k) {
      case '--url': a.url = v(); break;
      case '--stdio': a.stdio = v(); break;
      case '--sse': a.sse = v(); break;
      case '--scenario': a.scenario = v(); break;
      case '--profile': a.profile = v(); break;
      case '--offer-version': a.offer = v(); break;
      case '--timeout': a.timeout = Number(v()); break;
      case '--mode': { const m = v(); if (m !== 'legacy') usage('the TS SDK v1 client only speaks legacy'); break; }
      case '--header': {
        const h = v(); const i2 = h.indexOf(':');
        if (i2 < 0) usage(`--header wants "Name: value", got ${h}`);
        a.headers[h.slice(0, i2).trim()] = h.slice(i2 + 1).trim();
        break;
      }
      case '-h': case '--help': usage();
      default: usage(`unknown argument ${k}`);
    }
  }
  if ([a.url, a.stdio, a.sse].filter(Boolean).length !== 1) usage('give exactly one of --url, --stdio, --sse');
  if (!SCENARIOS[a.scenario]) usage(`unknown scenario ${a.scenario}`);
  if (!PROFILES[a.profile]) usage(`unknown profile ${a.profile}`);
  return a;
}

// Split a command line like a POSIX shell would for simple cases (quotes and backslashes).
function shellSplit(s) {
  const out = []; let cur = ''; let q = null; let has = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (q) {
      if (c === q) q = null;
      else if (c === '\\' && q === '"' && i + 1 < s.length) cur += s[++i];
      else cur += c;
    } else if (c === '"' || c === "'") { q = c; has = true; }
    else if (c === '\\' && i + 1 < s.length) { cur += s[++i]; has = true; }
    else if (/\s/.test(c)) { if (has || cur) out.push(cur); cur = ''; has = false; }
    else cur += c;
  }
  if (q) throw new Error(`unterminated quote in ${s}`);
  if (has || cur) out.push(cur);
  return out;
}

// Transport wrapper: rewrites the offered protocolVersion of `initialize` and records the answer.
class OfferingTransport {
  constructor(inner, offer) {
    this.inner = inner;
    this.offer = offer;
    this.negotiated = undefined;
    this.initId = undefined;
    inner.onmessage = (msg, extra) => {
      if (this.initId !== undefined && msg && msg.id === this.initId && msg.result) {
        this.negotiated = msg.result.protocolVersion;
      }
      this.onmessage?.(msg, extra);
    };
    inner.onclose = () => this.onclose?.();
    inner.onerror = (e) => this.onerror?.(e);
    if (typeof inner.setProtocolVersion === 'function') {
      this.setProtocolVersion = (v) => inner.setProtocolVersion(v);
    }
  }
  get sessionId() { return this.inner.sessionId; }
  start() { return this.inner.start(); }
  close() { return this.inner.close(); }
  send(msg, opts) {
    if (msg && msg.method === 'initialize') {
      this.initId = msg.id;
      if (this.offer) msg = { ...msg, params: { ...msg.params, protocolVersion: this.offer } };
    }
    return this.inner.send(msg, opts);
  }
}

function texts(content) {
  return (content || []).filter((c) => c.type === 'text').map((c) => c.text);
}

function toolSummary(r) {
  const t = texts(r.content);
  const out = { text: t.length ? t[0] : null, is_error: Boolean(r.isError) };
  if (t.length > 1) out.texts = t;
  if (r.structuredContent !== undefined) out.structured = r.structuredContent;
  return out;
}

function errorSummary(e) {
  if (typeof e?.code !== 'number') throw e;
  // McpError prefixes its message with "MCP error <code>: "; report the wire message.
  const message = String(e.message).replace(/^MCP error -?\d+: /, '');
  return { error: { code: e.code, message, data: e.data ?? null } };
}

function resourceSummary(r) {
  const c = r.contents[0];
  const out = { uri: c.uri, mime_type: c.mimeType ?? null, count: r.contents.length };
  if (typeof c.text === 'string') { out.text = c.text.slice(0, TEXT_LIMIT); out.length = c.text.length; }
  return out;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const { Client } = await sdk('client/index.js');
  const types = await sdk('types.js');
  const timeoutMs = args.timeout * 1000;
  const reqOpts = { timeout: timeoutMs };

  let inner;
  const requestInit = Object.keys(args.headers).length ? { headers: args.headers } : undefined;
  if (args.url) {
    const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
    inner = new StreamableHTTPClientTransport(new URL(args.url), { requestInit });
  } else if (args.sse) {
    const { SSEClientTransport } = await sdk('client/sse.js');
    inner = new SSEClientTransport(new URL(args.sse), { requestInit });
  } else {
    const { StdioClientTransport } = await sdk('client/stdio.js');
    const [command, ...cmdArgs] = shellSplit(args.stdio);
    if (!command) usage('--stdio needs a command');
    inner = new StdioClientTransport({ command, args: cmdArgs, env: { ...process.env }, stderr: 'inherit' });
  }
  const transport = new OfferingTransport(inner, args.offer);

  const logs = [];
  const client = new Client({ name: 'eragate-ts-client', version: '1.0.0' }, { capabilities: {} });
  client.setNotificationHandler(types.LoggingMessageNotificationSchema, (n) => {
    logs.push({ level: n.params.level, data: n.params.data, logger: n.params.logger ?? null });
  });

  const p = PROFILES[args.profile];
  const call = async (spec) => {
    if (!spec) return null;
    const [name, a] = spec;
    return { tool: name, ...toolSummary(await client.callTool({ name, arguments: a }, undefined, reqOpts)) };
  };
  const steps = {
    list_tools: async () => {
      const r = await client.listTools({}, reqOpts);
      return { names: r.tools.map((t) => t.name), count: r.tools.length };
    },
    call_echo: () => call(p.echo),
    call_add: () => call(p.add),
    call_meteo: () => call(p.meteo),
    list_resources: async () => {
      const r = await client.listResources({}, reqOpts);
      return { uris: r.resources.map((x) => x.uri), names: r.resources.map((x) => x.name) };
    },
    list_resource_templates: async () => {
      const r = await client.listResourceTemplates({}, reqOpts);
      return { uri_templates: r.resourceTemplates.map((x) => x.uriTemplate), names: r.resourceTemplates.map((x) => x.name) };
    },
    read_static: async () => resourceSummary(await client.readResource({ uri: p.static_uri }, reqOpts)),
    read_template: async () => resourceSummary(await client.readResource({ uri: p.template_uri }, reqOpts)),
    list_prompts: async () => {
      const r = await client.listPrompts({}, reqOpts);
      return {
        names: r.prompts.map((x) => x.name),
        arguments: Object.fromEntries(r.prompts.map((x) => [x.name, (x.arguments || []).map((a) => a.name)])),
      };
    },
    get_prompt: async () => {
      const [name, a] = p.prompt;
      const r = await client.getPrompt({ name, arguments: a }, reqOpts);
      const t = r.messages.filter((m) => m.content?.type === 'text').map((m) => m.content.text);
      return { prompt: name, text: t.length ? t[0] : null, messages: r.messages.length };
    },
    complete: async () => {
      const [prompt, arg, prefix] = p.complete;
      const r = await client.complete({ ref: { type: 'ref/prompt', name: prompt }, argument: { name: arg, value: prefix } }, reqOpts);
      return { prompt, argument: arg, prefix, values: r.completion.values };
    },
    progress: async () => {
      const [name, a] = p.progress;
      const seen = [];
      const r = await client.callTool({ name, arguments: a }, undefined, {
        ...reqOpts,
        onprogress: (n) => seen.push({ progress: n.progress, total: n.total ?? null, message: n.message ?? null }),
      });
      await new Promise((res) => setTimeout(res, 50));
      return { tool: name, ...toolSummary(r), progress: seen.map((s) => s.progress), notifications: seen };
    },
    logging: async () => {
      await client.setLoggingLevel('warning', reqOpts);
      const out = { set_level: 'warning' };
      for (const level of ['info', 'error']) {
        const r = await client.callTool({ name: 'log_message', arguments: { level, message: `msg at ${level}` } }, undefined, reqOpts);
        out[`call_${level}`] = toolSummary(r).text;
      }
      await new Promise((res) => setTimeout(res, 100));
      out.received = [...logs];
      return out;
    },
    call_fail: async () => toolSummary(await client.callTool({ name: 'fail', arguments: {} }, undefined, reqOpts)),
    call_unknown_tool: async () => {
      try {
        return toolSummary(await client.callTool({ name: 'no_such_tool', arguments: {} }, undefined, reqOpts));
      } catch (e) { return errorSummary(e); }
    },
    read_unknown_resource: async () => {
      try {
        return resourceSummary(await client.readResource({ uri: 'test://nope' }, reqOpts));
      } catch (e) { return errorSummary(e); }
    },
    cancel: async () => {
      const out = {};
      try {
        await client.callTool({ name: 'hang', arguments: {} }, undefined, { timeout: 1000 });
        out.hang = 'returned';
      } catch (e) { out.hang = errorSummary(e).error; }
      out.after = toolSummary(await client.callTool({ name: 'echo', arguments: { text: 'still alive' } }, undefined, reqOpts));
      return out;
    },
  };

  await client.connect(transport, reqOpts);
  const results = {};
  try {
    for (const step of SCENARIOS[args.scenario]) {
      const s = await steps[step]();
      if (s !== null && s !== undefined) results[step] = s;
    }
  } finally {
    await client.close().catch(() => {});
  }
  const info = client.getServerVersion();
  return {
    protocol_version: transport.negotiated ?? null,
    server_info: info ? { name: info.name, version: info.version } : null,
    capabilities: client.getServerCapabilities() ?? null,
    results,
  };
}

const watchdog = setTimeout(() => {
  process.stderr.write('ts_client: overall timeout\n');
  process.exit(1);
}, Number(process.env.TS_CLIENT_TIMEOUT_MS || 120000));

main().then((out) => {
  clearTimeout(watchdog);
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
}, (e) => {
  clearTimeout(watchdog);
  process.stderr.write(`ts_client: ${e?.stack || e}\n`);
  process.exit(1);
});
