// Test driver: the hostile-manifest corpus (tests/hostile_corpus.py) through the host, in Node on
// Dawn (the `webgpu` package).
//
//   node test/corpus.mjs CASES.json
//
// CASES.json: {"cases": [{"name": N, "manifest": PATH, "inputs": {NAME: COUNT}, "sizes": {...}}]}.
// Each case is loaded from its file and run on float32 zeros. Prints {"results": {NAME: R}}, R one
// of {"code", "field", "message"} (a ManifestError), {"ran": {OUTPUT: LENGTH}}, or
// {"error": NAME, "message"} for anything else (which the test counts as a failure).
import { readFileSync } from 'node:fs';
import { create, globals } from 'webgpu';
import { load, ManifestError } from '../src/index.js';

Object.assign(globalThis, globals);
const gpu = create([]);
const adapter = await gpu.requestAdapter();
if (!adapter) {
  console.error('no WebGPU adapter (Dawn)');
  process.exit(3);
}
const wanted = ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupsPerDimension'];
const requiredLimits = Object.fromEntries(wanted.filter((k) => adapter.limits[k] !== undefined).map((k) => [k, adapter.limits[k]]));
const device = await adapter.requestDevice({ requiredLimits });

const { cases } = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const results = {};
for (const c of cases) {
  try {
    const program = await load(c.manifest, { device });
    const inputs = Object.fromEntries(Object.entries(c.inputs).map(([name, count]) => [name, new Float32Array(count)]));
    const outputs = await program.run(inputs, c.sizes);
    program.destroy();
    results[c.name] = { ran: Object.fromEntries(Object.entries(outputs).map(([k, v]) => [k, v.length])) };
  } catch (err) {
    results[c.name] = err instanceof ManifestError
      ? { code: err.code ?? null, field: err.field ?? null, message: err.message }
      : { error: err.name, message: String(err.message).slice(0, 2000) };
  }
}
console.log(JSON.stringify({ results }));
process.exit(0);
