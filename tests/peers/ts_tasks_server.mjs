#!/usr/bin/env node
// A 2025-11-25 server with tasks of its own, on the TypeScript SDK 1.x (@modelcontextprotocol/sdk
// 1.32.2, its experimental tasks: InMemoryTaskStore, InMemoryTaskMessageQueue, registerToolTask),
// over stdio. It serves the tools the alpha conformance suite's tasks-* scenarios call, as tasks
// the server runs itself (execution.taskSupport), so that a test can check eragate bridges them to
// the 2026-07-28 tasks extension. Run on the system Node 20:
//
//   node ts_tasks_server.mjs
//
// Tools:
//   greet{name} -> "Hello, <name>!" (no tasks)
//   slow_compute{seconds,label?} (taskSupport optional) -> after `seconds`, "slow_compute <label>: done after <seconds>s"
//   failing_job{} (required) -> after ~1 s, a result with isError: true
//   protocol_error_job{} (optional) -> the task fails (status "failed")
//   confirm_delete{filename} (optional) -> asks one elicitation {confirm: boolean} through the
//       task's message queue, then "Deleted <f>" or "Did not delete <f>"
//   multi_input{} (optional) -> asks two elicitations at once, then both answers
//   test_tool_with_task{} (no tasks: a plain tool eragate runs as its own task, input =
//       "before_task") -> asks for user_name, then "Hello, <name>!"
//
// The SDK is loaded from $TS_SDK_DIR (install.sh's npm prefix). server-info name:
// "eragate-ts-tasks-fixture".

import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SDK_DIR = process.env.TS_SDK_DIR ||
  path.join(HERE, '..', '..', '.cache', 'peers', 'npm', 'node_modules', '@modelcontextprotocol', 'sdk');
const require = createRequire(path.join(SDK_DIR, 'package.json'));
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
const { InMemoryTaskStore, InMemoryTaskMessageQueue } = require('@modelcontextprotocol/sdk/experimental/tasks');
const { ElicitResultSchema } = require('@modelcontextprotocol/sdk/types.js');
const { z } = require('zod');

const taskStore = new InMemoryTaskStore();
const taskMessageQueue = new InMemoryTaskMessageQueue();
const server = new McpServer(
  { name: 'eragate-ts-tasks-fixture', version: '1.0.0' },
  {
    capabilities: {
      tools: {},
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    },
    taskStore,
    taskMessageQueue,
  },
);

const text = (t, isError = false) => ({ content: [{ type: 'text', text: t }], ...(isError ? { isError: true } : {}) });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A task the server runs in the background: `work(extra, taskId)` returns its result, or throws
// to fail it; a task cancelled meanwhile keeps its status.
function taskTool(name, description, inputSchema, taskSupport, work) {
  server.experimental.tasks.registerToolTask(
    name,
    { description, inputSchema, execution: { taskSupport } },
    {
      createTask: async (args, extra) => {
        const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? 300000, pollInterval: 200 });
        (async () => {
          try {
            const result = await work(args, extra, task.taskId);
            await extra.taskStore.storeTaskResult(task.taskId, 'completed', result);
          } catch (error) {
            await extra.taskStore
              .storeTaskResult(task.taskId, 'failed', text(String(error?.message ?? error), true))
              .catch(() => {});
          }
        })();
        return { task };
      },
      getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
    },
  );
}

function elicit(extra, taskId, message, properties) {
  return extra.sendRequest(
    { method: 'elicitation/create', params: { message, requestedSchema: { type: 'object', properties } } },
    ElicitResultSchema,
    { relatedTask: { taskId } },
  );
}

server.registerTool('greet', { description: 'Greets by name', inputSchema: { name: z.string() } },
  async ({ name }) => text(`Hello, ${name}!`));

taskTool('slow_compute', 'Sleeps, then answers', { seconds: z.number(), label: z.string().optional() }, 'optional',
  async ({ seconds, label }) => {
    await sleep(seconds * 1000);
    return text(`slow_compute ${label ?? ''}: done after ${seconds}s`);
  });

taskTool('failing_job', 'Fails as a tool', {}, 'required', async () => {
  await sleep(1000);
  return text('failing_job failed', true);
});

taskTool('protocol_error_job', 'Fails as a task', {}, 'optional', async () => {
  await sleep(200);
  throw new Error('protocol_error_job: internal failure');
});

taskTool('confirm_delete', 'Asks before deleting', { filename: z.string() }, 'optional',
  async ({ filename }, extra, taskId) => {
    const answer = await elicit(extra, taskId, `Delete ${filename}?`, { confirm: { type: 'boolean' } });
    const yes = answer.action === 'accept' && answer.content?.confirm === true;
    return text(yes ? `Deleted ${filename}` : `Did not delete ${filename}`);
  });

taskTool('multi_input', 'Asks two questions at once', {}, 'optional', async (_args, extra, taskId) => {
  const properties = { name: { type: 'string' }, confirm: { type: 'boolean' } };
  const [first, second] = await Promise.all([
    elicit(extra, taskId, 'First?', properties),
    elicit(extra, taskId, 'Second?', properties),
  ]);
  return text(`first: ${first.content?.name}, second: ${second.content?.name}`);
});

server.registerTool('test_tool_with_task', { description: 'Asks a name, then greets', inputSchema: {} },
  async (_args, extra) => {
    const answer = await extra.sendRequest(
      {
        method: 'elicitation/create',
        params: {
          message: 'Your name?',
          requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
          _meta: { 'dev.eragate/inputKey': 'user_name' },
        },
      },
      ElicitResultSchema,
    );
    return text(`Hello, ${answer.content?.name}!`);
  });

await server.connect(new StdioServerTransport());
