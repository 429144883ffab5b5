/**
 * A typed client for Charter's HTTP API (`/v1`), with no runtime dependency beyond `fetch`.
 *
 *   const charter = new CharterClient({ baseUrl: "http://127.0.0.1:8750", apiKey });
 *   const ctx = await charter.resolveContext({ profile: "reader" });
 *   const envelope = await charter.call(ctx.context_id, "notes.search", "c1", { query: "" });
 *
 * Every type comes from the server's OpenAPI document (`src/openapi.ts`, generated); errors
 * are `CharterError`s carrying the problem document's code and reason.
 */
import type { components, operations } from "./openapi.js";

export type { components, operations } from "./openapi.js";
export { API_VERSION } from "./openapi.js";

type Schemas = components["schemas"];
export type Context = Schemas["ContextOut"];
export type ContextRequest = Schemas["ContextRequest"];
export type Envelope = Schemas["EnvelopeOut"];
export type EventsPage = Schemas["EventsOut"];
export type Verification = Schemas["VerifyOut"];
export type Health = Schemas["HealthOut"];
export type Ready = Schemas["ReadyOut"];
export type Problem = Schemas["Problem"];
export type JsonObject = { [key: string]: unknown };

/** One ledger event as the server streams it (`seq`, `type`, `payload`, hashes…). */
export interface RunEvent extends JsonObject {
  run_id: string;
  seq: number;
  type: string;
  at: string;
  payload: JsonObject;
  hash: string;
  prev_hash: string;
}

export interface ClientOptions {
  /** The server's base URL, e.g. `http://127.0.0.1:8750`. */
  baseUrl: string;
  /** An API key or a JWT, sent as `Authorization: Bearer …`. */
  apiKey?: string;
  /** A `fetch` to use instead of the global one (tests, proxies). */
  fetch?: typeof fetch;
  /** Abort a request (not an event stream) after this many milliseconds (default 30 000). */
  timeoutMs?: number;
}

/** A refusal or failure, from the server's problem document or the transport. */
export class CharterError extends Error {
  readonly status: number;
  readonly code: string;
  readonly reason: string;
  readonly retryable: boolean;
  readonly problem: JsonObject | undefined;

  constructor(status: number, code: string, reason: string, message: string, problem?: JsonObject) {
    super(message);
    this.name = "CharterError";
    this.status = status;
    this.code = code;
    this.reason = reason;
    this.retryable = problem?.["retryable"] === true;
    this.problem = problem;
  }
}

type Op = keyof operations;
interface Args<K extends Op> {
  path?: operations[K]["path"];
  query?: operations[K]["query"];
  body?: operations[K]["body"];
  headers?: Record<string, string>;
}

function fill(template: string, values: Record<string, unknown> | undefined): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = values?.[name];
    if (value === undefined) throw new TypeError(`missing path parameter ${name}`);
    return encodeURIComponent(String(value));
  });
}

export interface StreamOptions {
  /** Start after this sequence number (the last event you already have). Default 0. */
  after?: number;
  /** Reconnections allowed in a row without receiving an event. Default 5. */
  maxReconnects?: number;
  /** Wait before reconnecting, in milliseconds. Default 200. */
  retryMs?: number;
  /** Stop following when this signal aborts. */
  signal?: AbortSignal;
}

export class CharterClient {
  readonly baseUrl: string;
  private readonly apiKey: string | undefined;
  private readonly fetcher: typeof fetch;
  private readonly timeoutMs: number;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.fetcher = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const headers: Record<string, string> = { Accept: "application/json", ...extra };
    if (this.apiKey !== undefined && !("Authorization" in extra)) {
      headers["Authorization"] = `Bearer ${this.apiKey}`;
    }
    return headers;
  }

  private url(template: string, path?: Record<string, unknown>, query?: Record<string, unknown>): string {
    const url = new URL(this.baseUrl + fill(template, path));
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== null) url.searchParams.set(key, String(value));
    }
    return url.toString();
  }

  /** One operation of the API, typed by its `"METHOD /path"` key. */
  async request<K extends Op>(op: K, args: Args<K> = {}): Promise<operations[K]["response"]> {
    const [method, template] = (op as string).split(" ", 2) as [string, string];
    const init: RequestInit = {
      method,
      headers: this.headers(args.body === undefined ? args.headers : { "Content-Type": "application/json", ...args.headers }),
      signal: AbortSignal.timeout(this.timeoutMs),
    };
    if (args.body !== undefined) init.body = JSON.stringify(args.body);
    const response = await this.send(this.url(template, args.path as Record<string, unknown>, args.query as Record<string, unknown>), init);
    return (await this.decode(response)) as operations[K]["response"];
  }

  private async send(url: string, init: RequestInit): Promise<Response> {
    try {
      return await this.fetcher(url, init);
    } catch (cause) {
      const message = cause instanceof Error ? cause.message : String(cause);
      throw new CharterError(0, "transient_external", "SERVER_UNREACHABLE", `cannot reach ${this.baseUrl}: ${message}`);
    }
  }

  private async decode(response: Response): Promise<unknown> {
    const text = await response.text();
    let document: unknown = undefined;
    if (text) {
      try {
        document = JSON.parse(text);
      } catch {
        throw new CharterError(response.status, "internal", "BAD_RESPONSE", `the server answered ${response.status} with a body that is not JSON`);
      }
    }
    if (response.status >= 400) throw CharterClient.failure(response.status, document);
    return document;
  }

  private static failure(status: number, document: unknown): CharterError {
    const problem = (typeof document === "object" && document !== null ? document : {}) as JsonObject;
    const error = (problem["error"] ?? problem) as JsonObject;
    const code = String(error["code"] ?? problem["code"] ?? "internal");
    const reason = String(error["reason"] ?? problem["reason"] ?? `HTTP_${status}`);
    const message = String(error["message"] ?? problem["detail"] ?? problem["title"] ?? `HTTP ${status}`);
    return new CharterError(status, code, reason, message, problem);
  }

  // -- operations ----------------------------------------------------------------------

  health(): Promise<Health> {
    return this.request("GET /healthz");
  }

  /** Readiness: resolves for 200 and for 503 (`status: "not_ready"` with the checks). */
  async ready(): Promise<Ready> {
    const response = await this.send(this.url("/readyz"), { headers: this.headers(), signal: AbortSignal.timeout(this.timeoutMs) });
    const document = JSON.parse(await response.text()) as Ready;
    if (response.status !== 200 && response.status !== 503) throw CharterClient.failure(response.status, document);
    return document;
  }

  resolveContext(request: ContextRequest, format: "charter" | "openai" | "anthropic" | "mcp" = "charter"): Promise<Context> {
    return this.request("POST /v1/contexts", { body: request, query: { format } });
  }

  getContext(contextId: string, format: "charter" | "openai" | "anthropic" | "mcp" = "charter"): Promise<Context> {
    return this.request("GET /v1/contexts/{context_id}", { path: { context_id: contextId }, query: { format } });
  }

  /** A governed call. Resolves with the envelope whatever the outcome (`status` says it);
   * rejects only when the request itself is refused (auth, malformed, unknown context). */
  call(contextId: string, tool: string, callId: string, args: JsonObject, options: { approvalId?: string } = {}): Promise<Envelope> {
    return this.request("POST /v1/contexts/{context_id}/calls", {
      path: { context_id: contextId },
      body: { tool, call_id: callId, arguments: args, approval_id: options.approvalId ?? null },
    });
  }

  getCall(contextId: string, callId: string): Promise<JsonObject> {
    return this.request("GET /v1/calls/{context_id}/{call_id}", { path: { context_id: contextId, call_id: callId } });
  }

  approvals(options: operations["GET /v1/approvals"]["query"] = {}): Promise<JsonObject[]> {
    return this.request("GET /v1/approvals", { query: options });
  }

  /** One approval; `{ full: true }` adds its whole redacted arguments (operators only). */
  getApproval(approvalId: string, options: operations["GET /v1/approvals/{approval_id}"]["query"] = {}): Promise<JsonObject> {
    return this.request("GET /v1/approvals/{approval_id}", { path: { approval_id: approvalId }, query: options });
  }

  approve(approvalId: string, options: { reason?: string } = {}): Promise<JsonObject> {
    return this.request("POST /v1/approvals/{approval_id}/approve", { path: { approval_id: approvalId }, body: { reason: options.reason ?? null } });
  }

  reject(approvalId: string, options: { reason?: string } = {}): Promise<JsonObject> {
    return this.request("POST /v1/approvals/{approval_id}/reject", { path: { approval_id: approvalId }, body: { reason: options.reason ?? null } });
  }

  createRun(options: { sessionId?: string; workflow?: string } = {}): Promise<JsonObject> {
    const body: JsonObject = {};
    if (options.sessionId !== undefined) body["session_id"] = options.sessionId;
    if (options.workflow !== undefined) body["workflow"] = options.workflow;
    return this.request("POST /v1/runs", { body: body as operations["POST /v1/runs"]["body"] });
  }

  runs(options: { limit?: number } = {}): Promise<JsonObject[]> {
    return this.request("GET /v1/runs", { query: options });
  }

  getRun(runId: string): Promise<JsonObject> {
    return this.request("GET /v1/runs/{run_id}", { path: { run_id: runId } });
  }

  verifyRun(runId: string): Promise<Verification> {
    return this.request("GET /v1/runs/{run_id}/verify", { path: { run_id: runId } });
  }

  /** One page of the run's events after `after` (JSON, not a stream). */
  events(runId: string, options: { after?: number; limit?: number } = {}): Promise<EventsPage> {
    return this.request("GET /v1/runs/{run_id}/events", { path: { run_id: runId }, query: options });
  }

  /**
   * Follow the run's events over server-sent events. A dropped connection is resumed with
   * `Last-Event-ID` (the last sequence received), so no event is missed or repeated. Ends
   * when the server ends the stream (the run reached a terminal status) or `signal` aborts.
   */
  async *streamEvents(runId: string, options: StreamOptions = {}): AsyncGenerator<RunEvent> {
    let last = options.after ?? 0;
    let failures = 0;
    const maxReconnects = options.maxReconnects ?? 5;
    while (true) {
      // One connection per attempt, aborted when the caller stops iterating or aborts.
      const connection = new AbortController();
      const stop = (): void => connection.abort();
      options.signal?.addEventListener("abort", stop);
      let ended = false;
      try {
        let response: Response;
        try {
          response = await this.fetcher(this.url("/v1/runs/{run_id}/events", { run_id: runId }), {
            headers: this.headers({ Accept: "text/event-stream", "Last-Event-ID": String(last) }),
            signal: connection.signal,
          });
        } catch (cause) {
          if (options.signal?.aborted) return;
          if (++failures > maxReconnects) {
            throw new CharterError(0, "transient_external", "SERVER_UNREACHABLE", `event stream lost: ${String(cause)}`);
          }
          await new Promise((resolve) => setTimeout(resolve, options.retryMs ?? 200));
          continue;
        }
        if (response.status >= 400) throw CharterClient.failure(response.status, await response.json().catch(() => undefined));
        try {
          for await (const frame of sseFrames(response)) {
            if (frame.event === "error") {
              const detail = JSON.parse(frame.data) as JsonObject;
              throw new CharterError(200, "internal", String(detail["reason"] ?? "LEDGER_INVALID"), String(detail["message"] ?? "the ledger failed its check"), detail);
            }
            if (frame.id === undefined || frame.data === "") continue;
            const event = JSON.parse(frame.data) as RunEvent;
            last = event.seq;
            failures = 0;
            yield event;
          }
          ended = true;
        } catch (cause) {
          if (cause instanceof CharterError) throw cause;
          if (options.signal?.aborted) return;
          if (++failures > maxReconnects) {
            throw new CharterError(0, "transient_external", "STREAM_LOST", `event stream lost: ${String(cause)}`);
          }
          await new Promise((resolve) => setTimeout(resolve, options.retryMs ?? 200));
        }
      } finally {
        options.signal?.removeEventListener("abort", stop);
        connection.abort();
      }
      if (ended) return;
    }
  }

  proposals(options: operations["GET /v1/proposals"]["query"] = {}): Promise<JsonObject[]> {
    return this.request("GET /v1/proposals", { query: options });
  }

  getProposal(proposalId: string): Promise<JsonObject> {
    return this.request("GET /v1/proposals/{proposal_id}", { path: { proposal_id: proposalId } });
  }

  approveProposal(proposalId: string, options: { reason?: string } = {}): Promise<JsonObject> {
    return this.request("POST /v1/proposals/{proposal_id}/approve", { path: { proposal_id: proposalId }, body: { reason: options.reason ?? null } as operations["POST /v1/proposals/{proposal_id}/approve"]["body"] });
  }

  rejectProposal(proposalId: string, options: { reason?: string } = {}): Promise<JsonObject> {
    return this.request("POST /v1/proposals/{proposal_id}/reject", { path: { proposal_id: proposalId }, body: { reason: options.reason ?? null } as operations["POST /v1/proposals/{proposal_id}/reject"]["body"] });
  }

  applyProposal(proposalId: string): Promise<JsonObject> {
    return this.request("POST /v1/proposals/{proposal_id}/apply", { path: { proposal_id: proposalId } });
  }

  listArtifacts(runId: string): Promise<JsonObject[]> {
    return this.request("GET /v1/runs/{run_id}/artifacts", { path: { run_id: runId } });
  }

  /** Upload bytes as `name` into the run (a taken name gets `-vN`). */
  async uploadArtifact(runId: string, data: Uint8Array, name: string, mediaType?: string): Promise<JsonObject> {
    const query: Record<string, unknown> = { name };
    if (mediaType !== undefined) query["media_type"] = mediaType;
    const response = await this.send(this.url("/v1/runs/{run_id}/artifacts", { run_id: runId }, query), {
      method: "POST",
      headers: this.headers({ "Content-Type": "application/octet-stream" }),
      body: data,
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    return (await this.decode(response)) as JsonObject;
  }

  async downloadArtifact(runId: string, artifactId: string): Promise<Uint8Array> {
    const response = await this.send(this.url("/v1/runs/{run_id}/artifacts/{artifact_id}", { run_id: runId, artifact_id: artifactId }), {
      headers: this.headers({ Accept: "*/*" }),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    if (response.status >= 400) throw CharterClient.failure(response.status, await response.json().catch(() => undefined));
    return new Uint8Array(await response.arrayBuffer());
  }
}

interface Frame {
  id: string | undefined;
  event: string;
  data: string;
}

/** The frames of a `text/event-stream` body (the WHATWG parsing rules: fields, comments,
 * multi-line data, CR/LF/CRLF line ends). */
export async function* sseFrames(response: Response): AsyncGenerator<Frame> {
  if (response.body === null) return;
  const decoder = new TextDecoder();
  let buffer = "";
  let frame: Frame = { id: undefined, event: "message", data: "" };
  let data: string[] = [];
  const reader = response.body.getReader();
  try {
    while (true) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let match: RegExpExecArray | null;
      const lineEnd = /\r\n|\r|\n/;
      while ((match = lineEnd.exec(buffer)) !== null) {
        const line = buffer.slice(0, match.index);
        buffer = buffer.slice(match.index + match[0].length);
        if (line === "") {
          if (data.length > 0 || frame.id !== undefined) {
            yield { ...frame, data: data.join("\n") };
          }
          frame = { id: undefined, event: "message", data: "" };
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        let value = colon === -1 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") data.push(value);
        else if (field === "event") frame.event = value;
        else if (field === "id") frame.id = value;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
