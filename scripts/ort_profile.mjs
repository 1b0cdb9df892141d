// ONNX Runtime's time per node, beside `epstack perf --profile` (EPSTACK_PROFILE_ALL=1 lists every step): where
// an engine loses is found node by node, not from the whole run's ratio, which this VM's drifting clock blurs.
//   node scripts/ort_profile.mjs MODEL [ITERS] [k=v ...]
//   e.g. node scripts/ort_profile.mjs build/shared-models/resnet50.onnx 40 N=1
// ITERS timed runs (default 40, after 5 warm-up runs), 2 intra-op threads, sequential, optimisation level all; k=v
// sizes symbolic input dims (default batch=1, seq=128, N=1, others 1). Inputs: floats sin(i)/2, integers i*37 mod 100
// (1 for an input whose name holds "mask"), booleans true. Prints, on stdout, one line per node
// "median_ms<TAB>op_type<TAB>node" (the median of its kernel time over the timed runs, costliest first), and on
// stderr the run median and each operator type's total per run. Node names are ONNX Runtime's after its
// optimisations (a node its NCHWc layout writes is named after its output, e.g. "/layer1.0.bn2/Relu_output_0_nchwc").
// onnxruntime-node comes from the peer folder scripts/bench_peer.sh sets up (PEER_DIR, default build/peer).
import { createRequire } from 'module';
import fs from 'fs';
import os from 'os';
import path from 'path';

const [model, itersArg, ...dimArgs] = process.argv.slice(2);
if (!model) {
  console.error('usage: node scripts/ort_profile.mjs MODEL [ITERS] [dim=value ...]');
  process.exit(2);
}
if (!fs.existsSync(model)) {
  console.error(`no model at '${model}'`);
  process.exit(2);
}
const iters = itersArg === undefined ? 40 : Number(itersArg);
if (!Number.isInteger(iters) || iters < 1) {
  console.error(`ITERS must be a positive integer, not '${itersArg}'`);
  process.exit(2);
}
const dims = { batch: 1, seq: 128, N: 1 };
for (const a of dimArgs) {
  const at = a.indexOf('=');
  const v = Number(a.slice(at + 1));
  if (at < 1 || !Number.isInteger(v) || v < 1) { console.error(`'${a}' is not dim=positive integer`); process.exit(2); }
  dims[a.slice(0, at)] = v;
}
const peer = path.resolve(process.env.PEER_DIR ?? 'build/peer') + '/';
const ort = createRequire(peer)('onnxruntime-node');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort_profile-'));
const session = await ort.InferenceSession.create(model, {
  executionProviders: ['cpu'], intraOpNumThreads: 2, interOpNumThreads: 1, graphOptimizationLevel: 'all',
  executionMode: 'sequential', enableProfiling: true, profileFilePrefix: path.join(dir, 'p'),
});
const feeds = {};
for (const meta of session.inputMetadata) {
  if (!meta.isTensor) { console.error(`input '${meta.name}' is not a tensor`); process.exit(1); }
  const shape = meta.shape.map((d) => (typeof d === 'number' && d > 0 ? d : dims[d] ?? 1));
  const n = shape.reduce((a, b) => a * b, 1);
  const mask = /mask/i.test(meta.name);
  let data;
  if (meta.type === 'float32') { data = new Float32Array(n); for (let i = 0; i < n; ++i) data[i] = Math.sin(i) * 0.5; }
  else if (meta.type === 'int64') { data = new BigInt64Array(n); for (let i = 0; i < n; ++i) data[i] = mask ? 1n : BigInt((i * 37) % 100); }
  else if (meta.type === 'int32') { data = new Int32Array(n); for (let i = 0; i < n; ++i) data[i] = mask ? 1 : (i * 37) % 100; }
  else if (meta.type === 'bool') { data = new Uint8Array(n).fill(1); }
  else { console.error(`input '${meta.name}': type ${meta.type} is not generated`); process.exit(1); }
  feeds[meta.name] = new ort.Tensor(meta.type, data, shape);
}
const warmup = 5;
const runs = [];
for (let i = 0; i < warmup + iters; ++i) {
  const t0 = process.hrtime.bigint();
  await session.run(feeds);
  if (i >= warmup) runs.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
session.endProfiling();
const file = fs.readdirSync(dir).find((f) => f.endsWith('.json'));
if (!file) { console.error(`ONNX Runtime wrote no profile in ${dir}`); process.exit(1); }
const events = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
fs.rmSync(dir, { recursive: true, force: true });
// Kernel times per node, in run order; the warm-up runs' calls are the first `warmup` of each node's.
const byNode = new Map();
for (const e of events) {
  if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
  const name = e.name.slice(0, -'_kernel_time'.length);
  if (!byNode.has(name)) byNode.set(name, { op: e.args?.op_name ?? '?', us: [] });
  byNode.get(name).us.push(e.dur);
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const rows = [];
const byOp = new Map();
for (const [name, { op, us }] of byNode) {
  const timed = us.length > warmup ? us.slice(warmup) : us;
  const ms = median(timed) / 1000;
  rows.push([ms, op, name]);
  byOp.set(op, (byOp.get(op) ?? 0) + timed.reduce((a, b) => a + b, 0) / 1000 / iters);
}
rows.sort((a, b) => b[0] - a[0]);
for (const [ms, op, name] of rows) console.log(`${ms.toFixed(3)}\t${op}\t${name}`);
console.error(`[ort_profile] ${path.basename(model)}: run median ${median(runs).toFixed(3)} ms over ${iters} runs ` +
              `(profiling on), ${rows.length} nodes`);
for (const [op, ms] of [...byOp].sort((a, b) => b[1] - a[1]))
  console.error(`  ${op.padEnd(40)} ${ms.toFixed(3).padStart(8)} ms/run`);
