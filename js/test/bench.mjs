// Benchmark driver (benchmarks/js_host.py runs it): the web demo's classifier in Node on Dawn.
//
//   node test/bench.mjs MANIFEST B1,B2,... REPEAT
//
// For each batch size B (H = 16): the wall time of program.run() (checks, uniform, upload,
// dispatch, read-back; median of REPEAT calls after a warm-up) and each launch alone
// (program.profile). Prints one JSON line.
import { create, globals } from 'webgpu';
import { load } from '../src/index.js';

Object.assign(globalThis, globals);
const [manifest, batches, repeatText] = process.argv.slice(2);
const repeat = Number(repeatText);
// Keep the GPU object referenced: Dawn tears its devices down when it is collected.
const gpu = create([]);
const adapter = await gpu.requestAdapter();
const device = await adapter.requestDevice();
const program = await load(manifest, { device });
const H = 16;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = [];
for (const B of batches.split(',').map(Number)) {
  const fill = (n, seed) => Float32Array.from({ length: n }, (_, i) => Math.sin(seed + i) * 0.5);
  const inputs = { x: fill(B * 64, 1), w1: fill(64 * H, 2), b1: fill(H, 3), w2: fill(H * 10, 4), b2: fill(10, 5) };
  await program.run(inputs, { H });
  const walls = [];
  for (let r = 0; r < repeat; r += 1) {
    const start = performance.now();
    await program.run(inputs, { H });
    walls.push(performance.now() - start);
  }
  const { kernels } = await program.profile(inputs, { H }, { repeat });
  rows.push({ B, run_ms: median(walls), kernels });
}
const text = JSON.stringify({ adapter: `${adapter.info.vendor} ${adapter.info.architecture} ${adapter.info.description}`.trim(), rows, stats: program.stats });
process.stdout.write(`${text}\n`, () => process.exit(0));
