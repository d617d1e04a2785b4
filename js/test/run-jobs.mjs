// Test driver: run jobs through the host in Node on Dawn (the `webgpu` package) and print JSON.
//
//   node test/run-jobs.mjs JOBS.json
//
// JOBS.json: {"jobs": [{"manifest": PATH, "inputs": {NAME: [numbers]}, "sizes": {NAME: number},
//   "typed": true, "repeat": 0}]}. With "typed", each input becomes the typed array of its dtype
// (float16: Float32Array); without, it is passed as the plain array. Prints {"results": [...]},
// one {"outputs": {NAME: [numbers]}, "stats": {...}} or {"error": NAME, "message": TEXT} per job.
import { readFileSync } from 'node:fs';
import { create, globals } from 'webgpu';
import { load } from '../src/index.js';

Object.assign(globalThis, globals);
const gpu = create([]);
const adapter = await gpu.requestAdapter();
if (!adapter) {
  console.error('no WebGPU adapter (Dawn); on Linux without a GPU point VK_ICD_FILENAMES at a Vulkan ICD Dawn accepts');
  process.exit(3);
}
const device = await adapter.requestDevice({
  requiredFeatures: adapter.features.has('shader-f16') ? ['shader-f16'] : [],
});

const TYPED = { float32: Float32Array, float16: Float32Array, int32: Int32Array, uint32: Uint32Array, bool_: Uint32Array };
const { jobs } = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const programs = new Map();
const results = [];
for (const job of jobs) {
  try {
    let program = programs.get(job.manifest);
    if (!program) {
      program = await load(job.manifest, { device });
      programs.set(job.manifest, program);
    }
    const dtypes = Object.fromEntries(program.manifest.buffers.map((b) => [b.name, b.dtype]));
    const inputs = {};
    for (const [name, values] of Object.entries(job.inputs)) {
      const T = TYPED[dtypes[name]];
      inputs[name] = job.typed && T ? T.from(values, (v) => (typeof v === 'boolean' ? Number(v) : v)) : values;
    }
    let outputs;
    let kernels;
    if (job.repeat) ({ outputs, kernels } = await program.profile(inputs, job.sizes ?? {}, { repeat: job.repeat }));
    else outputs = await program.run(inputs, job.sizes ?? {});
    const plain = Object.fromEntries(Object.entries(outputs).map(([k, v]) => [k, Array.from(v, (x) => (Number.isNaN(x) ? 'nan' : x === Infinity ? 'inf' : x === -Infinity ? '-inf' : x))]));
    results.push({ outputs: plain, types: Object.fromEntries(Object.entries(outputs).map(([k, v]) => [k, v.constructor.name])), stats: { ...program.stats }, kernels });
  } catch (err) {
    results.push({ error: err.name, message: err.message });
  }
}
for (const p of programs.values()) p.destroy();
const text = JSON.stringify({ results, adapter: { vendor: adapter.info.vendor, architecture: adapter.info.architecture, description: adapter.info.description } });
// Exit only once stdout is flushed (a pipe takes 64 KiB at a time); Dawn keeps node alive otherwise.
process.stdout.write(`${text}\n`, () => process.exit(0));
