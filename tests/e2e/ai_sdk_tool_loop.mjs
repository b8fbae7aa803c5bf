// The Vercel AI SDK's default OpenAI model (`openai(model)`, the Responses API) in a tool loop
// against the gateway: `generateText` or `streamText` (argv[2]) with one tool and a step limit.
// Prints one JSON line: the final text, the cities the tool ran with, and the number of steps.
// `object` instead asks for a structured answer and prints the object.
// Run by test_ai_sdk.py from target/ai-sdk (and target/ai-sdk6), where `.ci/run` installs `ai` and
// `@ai-sdk/openai`.
// The same script runs on AI SDK 7 and on AI SDK 6 (`ai@6`, `@ai-sdk/openai@3`), whose default
// second step refers to the first step's output items by id (`item_reference`, with the API's
// default `store: true`), which the gateway's response store resolves (issue 26).
import { createOpenAI } from '@ai-sdk/openai';
import * as ai from 'ai';
import { z } from 'zod';

const { Output, generateText, streamText, tool } = ai;
// `stepCountIs` in AI SDK 6, `isStepCount` in 7.
const stepCount = ai.isStepCount ?? ai.stepCountIs;

const openai = createOpenAI({ baseURL: process.env.GATEWAY_URL, apiKey: 'test' });
const calls = [];
const tools = {
  get_weather: tool({
    description: 'Get the current weather for a city.',
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls.push(city);
      return `${city}: 18°C and cloudy (ref AISDK-9)`;
    },
  }),
};
const request = {
  model: openai(process.env.MODEL),
  tools,
  stopWhen: stepCount(3),
  prompt: "What's the weather in Paris?",
};
if (process.argv[2] === 'object') {
  // Structured output: `generateObject` of earlier versions is `Output.object` in ai 7.
  const result = await generateText({
    model: openai(process.env.MODEL),
    output: Output.object({ schema: z.object({ city: z.string(), temp_c: z.number().int() }) }),
    prompt: 'Weather in Paris as JSON.',
  });
  console.log(JSON.stringify({ object: result.output }));
} else if (process.argv[2] === 'generate') {
  const result = await generateText(request);
  console.log(JSON.stringify({ text: result.text, calls, steps: result.steps.length }));
} else {
  const result = streamText(request);
  let text = '';
  for await (const piece of result.textStream) text += piece;
  console.log(JSON.stringify({ text, calls, steps: (await result.steps).length }));
}
