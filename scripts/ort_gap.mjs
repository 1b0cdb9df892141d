// ONNX Runtime beside `epstack perf --gap-ms`: ITERS runs of a model with one float input of the given shape, a pause
// of GAP ms after each, 2 intra-op threads; prints the median run time and the process's CPU time per run (every
// thread, waiting included), one JSON line. Extra arguments are ONNX Runtime session config entries.
//   node scripts/ort_gap.mjs MODEL SHAPE GAP ITERS [key=value ...]
//   e.g. node scripts/ort_gap.mjs build/shared-models/mlp_b1.onnx 1x1024 50 40 session.intra_op.allow_spinning=0
// onnxruntime-node comes from the peer folder scripts/bench_peer.sh sets up (PEER_DIR, default build/peer).
import { createRequire } from 'module';
import path from 'path';

const [model, shapeArg, gapArg, itersArg, ...entries] = process.argv.slice(2);
if (!model || !shapeArg || gapArg === undefined || !itersArg) {
  console.error('usage: node scripts/ort_gap.mjs MODEL SHAPE GAP ITERS [key=value ...]');
  process.exit(2);
}
const peer = path.resolve(process.env.PEER_DIR ?? 'build/peer') + '/';
const ort = createRequire(peer)('onnxruntime-node');
const dims = shapeArg.split('x').map(Number);
const gap = Number(gapArg), iters = Number(itersArg);
if (dims.some((d) => !Number.isInteger(d) || d < 1) || !(gap >= 0) || !(iters >= 1)) {
  console.error('SHAPE is positive integers joined by x (1x1024), GAP >= 0, ITERS >= 1');
  process.exit(2);
}
const extra = {};
for (const e of entries) {
  const at = e.indexOf('=');
  if (at < 1) { console.error(`config entry '${e}' is not key=value`); process.exit(2); }
  extra[e.slice(0, at)] = e.slice(at + 1);
}
const session = await ort.InferenceSession.create(model, {
  executionProviders: ['cpu'], intraOpNumThreads: 2, interOpNumThreads: 1, graphOptimizationLevel: 'all',
  executionMode: 'sequential', extra,
});
const n = dims.reduce((a, b) => a * b, 1);
const data = new Float32Array(n);
for (let i = 0; i < n; ++i) data[i] = Math.sin(i) * 0.5;
const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', data, dims) };
for (let i = 0; i < 5; ++i) await session.run(feeds);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const times = [];
const cpu0 = process.cpuUsage();
for (let i = 0; i < iters; ++i) {
  const t0 = process.hrtime.bigint();
  await session.run(feeds);
  times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  if (gap > 0) await sleep(gap);
}
const cpu = process.cpuUsage(cpu0);
times.sort((a, b) => a - b);
console.log(JSON.stringify({ engine: 'onnxruntime', model: path.basename(model), gap_ms: gap, config: extra,
  run_median_ms: times[Math.floor(times.length / 2)], cpu_ms_per_run: (cpu.user + cpu.system) / 1000 / iters }));
