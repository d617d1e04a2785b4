// Test driver: load() given only a fresh GPU object (nothing else references it) must keep it
// alive; Dawn in Node tears the device down when the GPU object is collected. Run with
// --expose-gc; prints one JSON line with the outputs of three runs, collecting between them.
import { create, globals } from 'webgpu';
import { load } from '../src/index.js';

Object.assign(globalThis, globals);
const program = await load(process.argv[2], { gpu: create([]) });
const x = Float32Array.from({ length: 4 * 13 }, (_, i) => (i % 7) / 7);
const inputs = { x, w1: new Float32Array(13 * 5).fill(0.1), b1: new Float32Array(5), w2: new Float32Array(15).fill(0.2), b2: new Float32Array(3) };
const outs = [];
for (let i = 0; i < 3; i += 1) {
  globalThis.gc();
  await new Promise((resolve) => setTimeout(resolve, 50));
  globalThis.gc();
  outs.push(Array.from((await program.run(inputs, { H: 5 })).out));
}
process.stdout.write(`${JSON.stringify(outs)}\n`, () => process.exit(0));
