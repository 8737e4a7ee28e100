// The one way the page asks the server: fetch with an AbortController, the answer's JSON read once, and the
// server's `{"error": ...}` turned into a message. Each view keeps one `Latest`: a newer request aborts the
// older one, and a late answer to an older request is never handed on, so it cannot overwrite a newer one.

export class Latest {
  /** `onBusy(true)` when a request leaves, `onBusy(false)` when the newest one is handled or cancelled. */
  constructor(onBusy = () => {}) {
    this.seq = 0; // id of the newest request; answers to older ones are dropped
    this.controller = null; // AbortController of the request in flight
    this.onBusy = onBusy;
  }

  /** Aborts the request in flight: whatever is still on its way is stale. */
  cancel() {
    if (this.controller) this.controller.abort();
    this.controller = null;
    this.seq += 1;
  }

  /**
   * Sends `body` as JSON to `path` with POST (GET without a body), after cancelling the request in flight, and
   * hands on the outcome unless a newer request (or `cancel`) came since:
   * - `answer(data, response)` for a 2xx answer, `data` its JSON (null when it has none);
   * - `refused(response, message)` for an error status, `message` the server's `error` or the status line;
   * - `fail(error)` when the server cannot be reached (a TypeError) or `answer` throws.
   */
  async send(path, body, { answer, refused, fail }) {
    this.cancel();
    const seq = this.seq;
    const controller = new AbortController();
    this.controller = controller;
    this.onBusy(true);
    const json = body === undefined ? {} : {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    };
    try {
      const response = await fetch(path, { ...json, signal: controller.signal });
      const data = await readJson(response);
      if (seq !== this.seq) return; // a newer request exists: this answer is stale
      if (response.ok) answer(data, response);
      else refused(response, errorMessage(response, data));
    } catch (error) {
      if (error.name === "AbortError" || seq !== this.seq) return;
      fail(error);
    } finally {
      if (seq === this.seq) {
        this.onBusy(false);
        this.controller = null;
      }
    }
  }
}

async function readJson(response) {
  try {
    return await response.json();
  } catch (error) {
    if (error.name === "AbortError") throw error;
    return null;
  }
}

function errorMessage(response, data) {
  if (data && typeof data.error === "string" && data.error) return data.error;
  return `HTTP ${response.status} ${response.statusText}`.trim();
}
