// The server's OpenAI-compatible API as the page uses it: the model list and streamed chat
// completions (server-sent events read from fetch, so that the request can carry an API key and
// be aborted).

/** A failure to show the user: a one-line message, and the HTTP status when there was one. */
export class ApiError extends Error {
  constructor(message, status = 0) {
    super(message);
    this.status = status;
  }
}

function headers(apiKey, json) {
  const h = {};
  if (json) h['Content-Type'] = 'application/json';
  if (apiKey) h['Authorization'] = 'Bearer ' + apiKey;
  return h;
}

/** The server's OpenAI error object's message, or a description of the status. */
async function errorFrom(response) {
  let message = '';
  try {
    const body = await response.json();
    message = body?.error?.message ?? '';
  } catch {
    // Not JSON (a proxy's page, say): the status says enough.
  }
  if (!message) message = `the server answered ${response.status} ${response.statusText}`.trim();
  if (response.status === 401) message += ' (set the API key in Settings)';
  return new ApiError(message, response.status);
}

async function send(url, init) {
  try {
    return await fetch(url, init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(`cannot reach the server at ${location.origin} (is glimmer serve running?)`);
  }
}

/** The served model: {id, meta: {n_ctx, n_params, quant, demo, note}}. */
export async function fetchModel(apiKey) {
  const response = await send('v1/models', { headers: headers(apiKey, false) });
  if (!response.ok) throw await errorFrom(response);
  const body = await response.json();
  const model = body?.data?.[0];
  if (!model) throw new ApiError('the server lists no model');
  return model;
}

/**
 * Streams one chat completion. Calls onChunk(choiceDelta, chunk) for every choice chunk and
 * returns {finishReason, usage, timings} when the stream ends. An error event inside the stream
 * (the status was already 200) is thrown as an ApiError like an error status.
 */
export async function streamChat(request, { apiKey, signal, onChunk }) {
  const response = await send('v1/chat/completions', {
    method: 'POST',
    headers: headers(apiKey, true),
    body: JSON.stringify({ ...request, stream: true, stream_options: { include_usage: true } }),
    signal,
  });
  if (!response.ok) throw await errorFrom(response);

  const result = { finishReason: null, usage: null, timings: null };
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replaceAll('\r\n', '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = eventData(event);
      if (data === null) continue;            // a ": ping" comment while the prompt is processed
      if (data === '[DONE]') return result;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new ApiError(chunk.error.message ?? 'the server reported an error', chunk.error.code ?? 0);
      if (chunk.usage) result.usage = chunk.usage;
      if (chunk.timings) result.timings = chunk.timings;
      for (const choice of chunk.choices ?? []) {
        if (choice.finish_reason) result.finishReason = choice.finish_reason;
        if (choice.delta) onChunk(choice.delta, chunk);
      }
    }
  }
  throw new ApiError('the stream ended before the answer was complete (the server may have stopped)');
}

/** The data lines of one event joined, or null for an event without data (a comment). */
function eventData(event) {
  const lines = [];
  for (const line of event.split('\n')) {
    if (line.startsWith('data:')) lines.push(line.slice(line.startsWith('data: ') ? 6 : 5));
  }
  return lines.length ? lines.join('\n') : null;
}
