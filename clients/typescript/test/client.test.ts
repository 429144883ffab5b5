// The TypeScript client against a live `charter serve` this test starts on a fresh example
// project: the generated types match the live OpenAPI document, an approval round trip, a
// refused approval, and an event stream that resumes with Last-Event-ID after a dropped
// connection. CHARTER_BIN names the `charter` executable (default: the repository's .venv).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { CharterClient, CharterError, type RunEvent } from "../src/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const packageRoot = resolve(here, "..", "..");
const charterBin = process.env["CHARTER_BIN"] ?? resolve(packageRoot, "..", "..", ".venv", "bin", "charter");
const python = join(dirname(charterBin), "python");

let server: ChildProcess | undefined;
let project = "";
let baseUrl = "";
let app: CharterClient;
let alice: CharterClient;
let log = "";

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      probe.close(() => resolvePort(port));
    });
  });
}

before(async () => {
  project = mkdtempSync(join(tmpdir(), "charter-ts-"));
  const init = spawnSync(charterBin, ["init", "--example", "basic", join(project, "p")], { encoding: "utf8" });
  assert.equal(init.status, 0, `charter init failed: ${init.stderr}`);
  project = join(project, "p");
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("CHARTER_")));
  server = spawn(charterBin, ["serve", "--project", project, "--port", String(port), "--log-level", "warning"], { env, cwd: project });
  server.stdout?.on("data", (chunk: Buffer) => (log += chunk.toString()));
  server.stderr?.on("data", (chunk: Buffer) => (log += chunk.toString()));
  const key = (name: string): string => readFileSync(join(project, ".charter", "secrets", `${name}.key`), "utf8").trim();
  app = new CharterClient({ baseUrl, apiKey: key("app") });
  alice = new CharterClient({ baseUrl, apiKey: key("alice") });
  const deadline = Date.now() + 60_000;
  while (true) {
    try {
      if ((await app.health()).status === "ok") break;
    } catch {
      if (server.exitCode !== null) throw new Error(`charter serve exited: ${log}`);
      if (Date.now() > deadline) throw new Error(`charter serve did not start: ${log}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
});

after(() => {
  server?.kill("SIGTERM");
  rmSync(dirname(project), { recursive: true, force: true });
});

test("the generated types match the live server's OpenAPI document", () => {
  const check = spawnSync(python, [join(packageRoot, "generate_types.py"), `${baseUrl}/openapi.json`, "--check", join(packageRoot, "src", "openapi.ts")], { encoding: "utf8" });
  assert.equal(check.status, 0, check.stderr);
});

test("health names the server's version; readiness is typed", async () => {
  const health = await app.health();
  assert.equal(health.status, "ok");
  assert.match(health.version, /^\d+\.\d+\.\d+/);
  assert.equal((await app.ready()).status, "ready");
});

test("an approval round trip: pending, refused for an application, approved by an operator, runs once", async () => {
  const ctx = await app.resolveContext({ profile: "editor" });
  assert.ok(ctx.tools.some((t) => t.id === "notes.add"));
  const note = { title: "from TypeScript", body: "typed all the way" };
  const pending = await app.call(ctx.context_id, "notes.add", "ts-1", note);
  assert.equal(pending.status, "pending_approval");
  const approvalId = String((pending.approval as { id: string }).id);

  await assert.rejects(app.approve(approvalId), (error: unknown) => {
    assert.ok(error instanceof CharterError);
    assert.equal(error.code, "permission_denied");
    assert.equal(error.reason, "APPROVER_NOT_HUMAN");
    return true;
  });
  const listed = await alice.approvals({ status: "pending" });
  assert.ok(listed.some((a) => a["approval_id"] === approvalId || a["id"] === approvalId));
  assert.equal((await alice.approve(approvalId, { reason: "looks right" }))["status"], "approved");

  const done = await app.call(ctx.context_id, "notes.add", "ts-1", note);
  assert.equal(done.status, "succeeded");
  const again = await app.call(ctx.context_id, "notes.add", "ts-1", note);
  assert.equal(again.status, "succeeded");
  assert.equal((again.metrics as { cached: boolean }).cached, true);
  assert.equal((await app.getCall(ctx.context_id, "ts-1"))["state"], "succeeded");
  assert.equal((await app.verifyRun(ctx.run_id)).ok, true);
});

test("an unknown context is a CharterError with the problem's code and reason", async () => {
  await assert.rejects(app.call("ctx-nope", "notes.search", "x1", { query: "" }), (error: unknown) => {
    assert.ok(error instanceof CharterError);
    assert.ok(error.status >= 400);
    assert.equal(error.code, "permission_denied");
    return true;
  });
});

test("the event stream resumes with Last-Event-ID after a dropped connection: every event once", async () => {
  const ctx = await app.resolveContext({ profile: "reader" });
  for (let i = 0; i < 3; i++) await app.call(ctx.context_id, "notes.search", `ts-s${i}`, { query: "" });
  const expected = (await app.events(ctx.run_id)).events.map((e) => Number(e["seq"]));
  assert.ok(expected.length >= 6);

  // A fetch that cuts the first event-stream connection after two events.
  const lastEventIds: string[] = [];
  const cutting: typeof fetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    const answer = await fetch(input, init);
    if (headers.get("Accept") !== "text/event-stream" || answer.body === null) return answer;
    lastEventIds.push(headers.get("Last-Event-ID") ?? "");
    if (lastEventIds.length > 1) return answer;
    // Forward the bytes up to the end of the second event frame, then fail the body.
    const reader = answer.body.getReader();
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    let text = "";
    const cut = new ReadableStream<Uint8Array>({
      async pull(controller) {
        // Read until two whole frames are in (a pull that enqueues nothing is not called
        // again: the stream would stall when the server sends fewer than two per chunk).
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return controller.close();
          text += decoder.decode(value, { stream: true });
          const frames = [...text.matchAll(/^id: .*\n(?:.*\n)*?\n/gm)];
          if (frames.length < 2) continue;
          const end = frames[1]!.index! + frames[1]![0].length;
          controller.enqueue(encoder.encode(text.slice(0, end)));
          await reader.cancel();
          controller.error(new Error("connection dropped"));
          return;
        }
      },
    });
    return new Response(cut, { status: answer.status, headers: answer.headers });
  };
  const streaming = new CharterClient({ baseUrl, apiKey: (app as unknown as { apiKey: string }).apiKey, fetch: cutting });
  const seen: RunEvent[] = [];
  for await (const event of streaming.streamEvents(ctx.run_id, { retryMs: 10 })) {
    seen.push(event);
    if (seen.length === expected.length) break;
  }
  assert.deepEqual(seen.map((e) => e.seq), expected);
  assert.ok(lastEventIds.length >= 2, "the stream reconnected");
  assert.equal(lastEventIds[0], "0");
  assert.equal(Number(lastEventIds[1]), seen[1]!.seq, "resumed after the last event received");
});
