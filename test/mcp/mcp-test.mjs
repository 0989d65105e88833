// make mcp-test: the official TypeScript MCP SDK drives `tt-device-queue
// mcp` over stdio, as Claude Code or Cursor would, against a real queued on
// two fake cards (TT_DEVICE_IDS, fake reset and health commands, a temp
// state directory; the CLI finds queued on its user-mode socket there).
// It checks the tools and their schemas (the SDK validates every
// structured result against the tool's output schema), runs a job,
// submits and waits, reads logs, kills, resets, and checks progress
// notifications and a cancellation that ends the wait, not the job.
//
// Usage: node mcp-test.mjs BIN_DIR   (BIN_DIR holds queued and tt-device-queue)
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, existsSync, rmSync, chmodSync, openSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const bin = resolve(process.argv[2] || "../../bin");
const root = mkdtempSync(join(tmpdir(), "ttkit-mcp-test-"));
const state = join(root, "state"), home = join(root, "home"), work = join(root, "work");
for (const d of [state, home, work]) mkdirSync(d, { recursive: true, mode: 0o700 });
const resetCmd = join(root, "reset.sh");
writeFileSync(resetCmd, "#!/bin/sh\necho fake reset of card \"$1\"\n");
chmodSync(resetCmd, 0o755);
const env = { PATH: process.env.PATH, HOME: home, TT_DEVICE_LOG_DIR: state };

const queued = spawn(join(bin, "queued"), ["--listen", "127.0.0.1:0"], {
  env: { ...env, TT_DEVICE_IDS: "0,1", TT_DEVICE_RESET_CMD: resetCmd, TT_DEVICE_HEALTH_CHECK_CMD: "true", TT_DEVICE_KILL_GRACE: "10" },
  stdio: ["ignore", openSync(join(root, "queued.log"), "w"), openSync(join(root, "queued.log"), "a")],
});
let failed = false;
const stopQueued = () => { try { queued.kill("SIGTERM"); } catch { /* gone */ } };
process.on("exit", () => { stopQueued(); rmSync(root, { recursive: true, force: true }); });

// poll waits for cond with a generous deadline (a loaded 2-core machine).
async function poll(what, cond, ms = 60000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > end) throw new Error("timed out waiting for " + what);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function text(r) { return (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join(""); }

let step = "";
async function check(name, fn) {
  step = name;
  const t0 = Date.now();
  await fn();
  console.log(`ok   ${name} (${Date.now() - t0} ms)`);
}

try {
  await poll("queued's socket", () => existsSync(join(state, "queued.sock")));
  const transport = new StdioClientTransport({ command: join(bin, "tt-device-queue"), args: ["mcp"], env, cwd: work, stderr: "inherit" });
  const client = new Client({ name: "ttkit-node-test", version: "1.0.0" });
  await client.connect(transport);
  const call = (name, args, opts) => client.callTool({ name, arguments: args }, undefined, { timeout: 120000, ...opts });

  await check("initialize: server info and tools capability", async () => {
    assert.equal(client.getServerVersion().name, "tt-device-queue");
    assert.ok(client.getServerCapabilities().tools);
  });

  await check("tools/list: the nine tools, each with input and output schemas", async () => {
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    for (const n of ["tt_run", "tt_submit", "tt_wait", "tt_job", "tt_logs", "tt_kill", "tt_status", "tt_list", "tt_reset"]) {
      const t = byName[n];
      assert.ok(t, "no tool " + n);
      assert.equal(t.inputSchema.type, "object", n + " input schema");
      assert.equal(t.outputSchema?.type, "object", n + " output schema");
      assert.ok(t.description.length > 20, n + " description");
    }
    const run = byName.tt_run.inputSchema;
    for (const f of ["command", "device", "cwd", "timeout_sec", "repeat", "env", "wait_timeout_sec", "output_limit"]) {
      assert.ok(run.properties[f], "tt_run input lacks " + f);
    }
    assert.deepEqual(run.required, ["command"]);
  });

  await check("tt_run: exit status, outcome, output, the agent's name on the job", async () => {
    const r = await call("tt_run", { command: 'echo "agent=$TT_QUEUE_AGENT in $(pwd)"; exit 3', device: "1" });
    assert.ok(!r.isError, text(r));
    const s = r.structuredContent;
    assert.equal(s.job.exit_code, 3);
    assert.equal(s.job.outcome, "failure");
    assert.equal(s.job.agent, "ttkit-node-test");
    assert.equal(s.output, `agent=ttkit-node-test in ${work}\n`);
    assert.match(text(r), /exit status 3/);
  });

  await check("tt_run: output bounded by output_limit, head and tail, the cut said", async () => {
    const r = await call("tt_run", { command: "seq 1 100000", output_limit: 2000 });
    const s = r.structuredContent;
    assert.ok(s.output.length < 2200, "output " + s.output.length + " bytes");
    assert.ok(s.output.startsWith("1\n2\n3\n") && s.output.endsWith("99999\n100000\n"));
    assert.match(s.output_cut, /left out/);
  });

  let jobId;
  await check("tt_submit, tt_wait bounded by wait_timeout_sec, tt_logs, tt_list, tt_status", async () => {
    const gate = join(root, "gate1");
    let r = await call("tt_submit", { command: `echo started; while [ ! -e ${gate} ]; do sleep 0.05; done; echo finished` });
    assert.ok(!r.isError, text(r));
    jobId = r.structuredContent.job_id;
    assert.ok(r.structuredContent.position >= 0);
    r = await call("tt_wait", { job_id: jobId, wait_timeout_sec: 1 });
    assert.ok(r.structuredContent.wait_ended, "the wait should have ended: " + text(r));
    assert.notEqual(r.structuredContent.job.state, "done");
    await poll("tt_logs to show the output", async () =>
      (await call("tt_logs", { job_id: jobId })).structuredContent.content.includes("started"));
    r = await call("tt_list", {});
    assert.equal(r.structuredContent.jobs[0].job_id, jobId);
    r = await call("tt_status", {});
    const card0 = r.structuredContent.cards.find((c) => c.device === "0");
    assert.equal(card0.running.job_id, jobId);
    assert.equal(card0.running.agent, "ttkit-node-test");
    writeFileSync(gate, "");
    r = await call("tt_wait", { job_id: jobId });
    assert.equal(r.structuredContent.job.outcome, "success");
    assert.equal(r.structuredContent.output, "started\nfinished\n");
  });

  await check("tt_kill stops a running job", async () => {
    let r = await call("tt_submit", { command: "echo up; sleep 600", device: "1" });
    const id = r.structuredContent.job_id;
    await poll("the job to run", async () => (await call("tt_job", { job_id: id })).structuredContent.state === "running");
    r = await call("tt_kill", { job_id: id });
    assert.ok(!r.isError, text(r));
    r = await call("tt_wait", { job_id: id });
    assert.equal(r.structuredContent.job.outcome, "killed");
  });

  await check("tt_reset: a card reset, then refused input named", async () => {
    let r = await call("tt_reset", { device: "1" });
    assert.ok(!r.isError, text(r));
    const id = r.structuredContent.resets[0].reset_job_id;
    r = await call("tt_wait", { job_id: id });
    assert.equal(r.structuredContent.job.outcome, "success");
    r = await call("tt_reset", {});
    assert.ok(r.isError && /device or job_id/.test(text(r)), text(r));
  });

  await check("progress notifications while queued and running; cancellation ends the wait, not the job", async () => {
    const gate = join(root, "gate2");
    const seen = [];
    const ac = new AbortController();
    const p = call("tt_run", { command: `echo working; while [ ! -e ${gate} ]; do sleep 0.05; done` },
      { signal: ac.signal, onprogress: (n) => seen.push(n.message || "") });
    await poll("a progress notification saying the job runs", () => seen.some((m) => m.includes("running")), 90000);
    ac.abort();
    await assert.rejects(p);
    const r = await call("tt_list", { state: "running" });
    assert.equal(r.structuredContent.jobs.length, 1, "the job should go on: " + text(r));
    writeFileSync(gate, "");
    const w = await call("tt_wait", { job_id: r.structuredContent.jobs[0].job_id });
    assert.equal(w.structuredContent.job.outcome, "success");
  });

  await check("errors are tool errors naming the field", async () => {
    for (const [tool, args, want] of [
      ["tt_run", { command: "true", device: "7" }, /device/],
      ["tt_submit", { command: "" }, /command/],
      ["tt_submit", { command: "true", env: { TT_QUEUE_JOB_ID: "x" } }, /env/],
      ["tt_logs", { job_id: "abcdef", limit: -1 }, /limit/],
      ["tt_job", { job_id: "ffffffffffff" }, /queued refused the request/],
    ]) {
      const r = await call(tool, args);
      assert.ok(r.isError && want.test(text(r)), `${tool} ${JSON.stringify(args)}: ${text(r)}`);
    }
  });

  await check("queued not running: the CLI's words on how to start it", async () => {
    stopQueued();
    await poll("queued to stop", () => queued.exitCode !== null || queued.signalCode !== null);
    const r = await call("tt_status", {});
    assert.ok(r.isError && /start queued/.test(text(r)), text(r));
  });
  await client.close();
} catch (e) {
  failed = true;
  console.error(`FAIL ${step}: ${e.stack || e}`);
  console.error("queued's log:\n" + readFileSync(join(root, "queued.log"), "utf8"));
}
process.exitCode = failed ? 1 : 0;
