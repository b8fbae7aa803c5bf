// The `ollama` package from npm (ollama-js) against the gateway's Ollama API: a chat with a
// tool, streamed (argv[2] = "stream") or not, then the tool's result sent back. Prints one JSON
// line: the first turn's calls and the second turn's text.
// Run by test_ollama.py from target/ollama-js, where `.ci/run` installs `ollama`.
import { Ollama } from 'ollama';

const client = new Ollama({ host: process.env.GATEWAY_URL });
const stream = process.argv[2] === 'stream';
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];
const model = process.env.MODEL;
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

async function turn() {
  if (!stream) {
    const reply = await client.chat({ model, messages, tools });
    return { content: reply.message.content, calls: reply.message.tool_calls ?? [], done: reply.done };
  }
  let content = '';
  const calls = [];
  let done = false;
  for await (const part of await client.chat({ model, messages, tools, stream: true })) {
    content += part.message.content;
    calls.push(...(part.message.tool_calls ?? []));
    done = part.done;
  }
  return { content, calls, done };
}

const first = await turn();
messages.push({ role: 'assistant', content: first.content, tool_calls: first.calls });
messages.push({ role: 'tool', content: '18 degrees', tool_name: 'get_weather' });
const second = await turn();
console.log(JSON.stringify({
  calls: first.calls.map((c) => [c.function.name, c.function.arguments]),
  text: second.content,
  done: first.done && second.done,
}));
