// The official OpenAI Node.js client against a Serve LLM application: proves that what the
// OpenAI routes answer is what the `openai` npm package expects.
//
//   node tests/python/openai_client.mjs BASE_URL MODEL
//
// BASE_URL is the application's address (http://127.0.0.1:8000, or with its route prefix);
// "/v1" is appended unless it already ends with it. It runs, with greedy sampling:
//   1. models.list(), which must list MODEL;
//   2. a chat completion, not streamed;
//   3. the same chat completion streamed with stream_options.include_usage: the deltas must
//      start with the assistant role, join to the non-streamed text, end with a finish_reason,
//      and the last chunk must carry the usage (choices []), equal to the non-streamed usage;
//   4. a completion, not streamed, and the same one streamed.
// It prints a JSON summary on stdout and exits 0, or prints what failed on stderr and exits 1.
//
// The package is found in $TESSERA_NPM_PREFIX (default /usr/local/lib/tessera-npm, where
// scripts/setup installs a pinned version), else next to this script. Node 18 or later.

import { createRequire } from "node:module";
import path from "node:path";

const MAX_TOKENS = 8;

function loadOpenAI() {
  const prefix = process.env.TESSERA_NPM_PREFIX || "/usr/local/lib/tessera-npm";
  for (const base of [path.join(prefix, "package.json"), import.meta.url]) {
    try {
      const module = createRequire(base)("openai");
      return module.OpenAI ?? module.default ?? module;
    } catch (error) {
      if (error.code !== "MODULE_NOT_FOUND") throw error;
    }
  }
  throw new Error(`the openai npm package is not installed in ${prefix} (run scripts/setup)`);
}

function check(condition, what, detail) {
  if (!condition) {
    throw new Error(`${what}${detail === undefined ? "" : `: ${JSON.stringify(detail)}`}`);
  }
}

function checkUsage(usage, what) {
  check(usage && Number.isInteger(usage.prompt_tokens) && usage.prompt_tokens > 0,
        `${what}: usage.prompt_tokens`, usage);
  check(Number.isInteger(usage.completion_tokens) && usage.completion_tokens > 0 &&
        usage.completion_tokens <= MAX_TOKENS, `${what}: usage.completion_tokens`, usage);
  check(usage.total_tokens === usage.prompt_tokens + usage.completion_tokens,
        `${what}: usage.total_tokens is not prompt + completion`, usage);
}

function checkFinish(reason, completionTokens, what) {
  check(reason === "stop" || reason === "length", `${what}: finish_reason`, reason);
  if (reason === "length") {
    check(completionTokens === MAX_TOKENS, `${what}: length before max_tokens`, completionTokens);
  }
}

async function chat(client, model) {
  const request = {
    model, messages: [{ role: "user", content: "Say hello." }], max_tokens: MAX_TOKENS,
    temperature: 0,
  };
  const whole = await client.chat.completions.create(request);
  check(whole.object === "chat.completion", "chat: object", whole.object);
  check(whole.model === model, "chat: model", whole.model);
  check(whole.choices.length === 1 && whole.choices[0].index === 0, "chat: choices",
        whole.choices);
  const message = whole.choices[0].message;
  check(message.role === "assistant" && typeof message.content === "string", "chat: message",
        message);
  checkUsage(whole.usage, "chat");
  checkFinish(whole.choices[0].finish_reason, whole.usage.completion_tokens, "chat");

  const stream = await client.chat.completions.create(
    { ...request, stream: true, stream_options: { include_usage: true } });
  let role = null, text = "", finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    check(chunk.object === "chat.completion.chunk", "chat stream: object", chunk.object);
    check(usage === null, "chat stream: a chunk after the usage chunk", chunk);
    if (chunk.choices.length === 0) {
      usage = chunk.usage;
      continue;
    }
    check(chunk.usage === null || chunk.usage === undefined, "chat stream: usage before the end",
          chunk.usage);
    const choice = chunk.choices[0];
    if (role === null) {
      role = choice.delta.role ?? "";
      check(role === "assistant", "chat stream: the first delta's role", choice.delta);
    }
    check(finish === null, "chat stream: a delta after finish_reason", chunk);
    text += choice.delta.content ?? "";
    finish = choice.finish_reason ?? null;
  }
  check(usage !== null, "chat stream: no usage chunk");
  checkUsage(usage, "chat stream");
  checkFinish(finish, usage.completion_tokens, "chat stream");
  check(text === message.content, "chat stream: the deltas differ from the whole response",
        { streamed: text, whole: message.content });
  check(JSON.stringify(usage) === JSON.stringify(whole.usage),
        "chat stream: usage differs from the whole response", { streamed: usage, whole: whole.usage });
  return { content: message.content, finish_reason: finish, usage, stream_chunks: chunks };
}

async function completion(client, model) {
  const request = { model, prompt: "Once upon a time", max_tokens: MAX_TOKENS, temperature: 0 };
  const whole = await client.completions.create(request);
  check(whole.object === "text_completion", "completion: object", whole.object);
  check(whole.choices.length === 1 && typeof whole.choices[0].text === "string",
        "completion: choices", whole.choices);
  checkUsage(whole.usage, "completion");
  checkFinish(whole.choices[0].finish_reason, whole.usage.completion_tokens, "completion");

  const stream = await client.completions.create({ ...request, stream: true });
  let text = "", finish = null, chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    check(chunk.object === "text_completion", "completion stream: object", chunk.object);
    check(finish === null, "completion stream: a chunk after finish_reason", chunk);
    text += chunk.choices[0].text;
    finish = chunk.choices[0].finish_reason ?? null;
  }
  check(finish === whole.choices[0].finish_reason, "completion stream: finish_reason", finish);
  check(text === whole.choices[0].text, "completion stream: the pieces differ from the whole",
        { streamed: text, whole: whole.choices[0].text });
  return { text, finish_reason: finish, usage: whole.usage, stream_chunks: chunks };
}

async function main() {
  const [baseArg, model] = process.argv.slice(2);
  if (!baseArg || !model) {
    console.error("usage: node openai_client.mjs BASE_URL MODEL");
    return 2;
  }
  const baseURL = baseArg.replace(/\/+$/, "").endsWith("/v1")
    ? baseArg.replace(/\/+$/, "") : `${baseArg.replace(/\/+$/, "")}/v1`;
  const OpenAI = loadOpenAI();
  const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 120000 });
  const ids = [];
  for await (const card of client.models.list()) ids.push(card.id);
  check(ids.includes(model), "models.list() does not list the model", ids);
  const summary = { base_url: baseURL, model, models: ids };
  summary.chat = await chat(client, model);
  summary.completion = await completion(client, model);
  summary.ok = true;
  console.log(JSON.stringify(summary));
  return 0;
}

main().then((code) => { process.exitCode = code; }, (error) => {
  console.error(`openai_client: ${error.stack ?? error}`);
  process.exitCode = 1;
});
