// Unit tests without a GPU (node --test test/unit.test.mjs): dim expressions, float16, uniform
// bytes, and what load()/run() record on a fake device (launch order, bindings, uniform, reuse).
// Executing kernels on WebGPU, and agreement with Mimir's Python runtime, are tested from pytest
// (tests/test_js_host.py, tests/test_js_browser.py).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readFileSync } from 'node:fs';
import { checkManifest } from '../src/contract.js';
import { evaluate, fromHalfBits, load, packUniform, toHalfBits, ManifestError } from '../src/index.js';

test('dim expressions follow Python: floor division, modulo, cdiv, precedence', () => {
  assert.equal(evaluate('cdiv(N * M, 256)', { N: 7, M: 131 }), 4);
  assert.equal(evaluate('-N // 4', { N: 7 }), -2);
  assert.equal(evaluate('-N % 4', { N: 7 }), 1);
  assert.equal(evaluate('N % -3', { N: 7 }), -2);
  assert.equal(evaluate('2 * -N + 1', { N: 3 }), -5);
  assert.equal(evaluate('(K + 3) // 4', { K: 13 }), 4);
  assert.equal(evaluate(12, {}), 12);
  assert.throws(() => evaluate('N / 2', { N: 4 }), /malformed/);
  assert.throws(() => evaluate('max(N, 2)', { N: 4 }), /only `cdiv\(a, b\)` may be called/);
  assert.throws(() => evaluate('cdiv(N, 0)', { N: 4 }), /non-positive divisor/);
  assert.throws(() => evaluate('N // 0', { N: 4 }), /division by zero/);
  assert.throws(() => evaluate('Q + 1', { N: 4 }), /dim `Q` has no value/);
});

test('float16 rounds to nearest even and refuses what would overflow', () => {
  assert.equal(toHalfBits(1), 0x3c00);
  assert.equal(toHalfBits(-2.5), 0xc100);
  assert.equal(toHalfBits(1 + 2 ** -11), 0x3c00); // a tie goes to the even significand
  assert.equal(toHalfBits(1 + 3 * 2 ** -11), 0x3c02);
  assert.equal(toHalfBits(2 ** -24), 0x0001);
  assert.equal(toHalfBits(2 ** -25), 0x0000);
  assert.equal(toHalfBits(65519), 0x7bff);
  assert.throws(() => toHalfBits(65520), RangeError);
  assert.equal(toHalfBits(-Infinity), 0xfc00);
  assert.equal(fromHalfBits(0x7bff), 65504);
  assert.ok(Number.isNaN(fromHalfBits(toHalfBits(NaN))));
});

test('the uniform block: fields 4 bytes each in order, padded to 16', () => {
  const manifest = { uniform: { fields: [{ name: 'N', type: 'u32' }, { name: 'k', type: 'i32' }, { name: 's', type: 'f32' }] } };
  const bytes = new DataView(packUniform(manifest, { N: 5 }, { k: -2, s: 0.5 }));
  assert.equal(bytes.byteLength, 16);
  assert.deepEqual([bytes.getUint32(0, true), bytes.getInt32(4, true), bytes.getFloat32(8, true), bytes.getUint32(12, true)], [5, -2, 0.5, 0]);
  assert.equal(packUniform({ uniform: null }, {}, {}), null);
  assert.throws(() => packUniform(manifest, { N: -1 }, { k: 0, s: 0 }), /does not fit u32/);
});

// ---------------------------------------------------------------- a fake device

function fakeDevice() {
  const log = [];
  let id = 0;
  const buffer = (d) => {
    const b = {
      id: id++, size: d.size, label: d.label, data: new Uint8Array(d.size), destroy() {},
      async mapAsync() {}, getMappedRange: (o, n) => b.data.buffer.slice(o, o + n), unmap() {},
    };
    log.push(['buffer', d.label, d.size]);
    return b;
  };
  const device = {
    log,
    features: new Set(),
    limits: { maxComputeWorkgroupsPerDimension: 65535 },
    createShaderModule: (d) => ({ label: d.label, getCompilationInfo: async () => ({ messages: [] }) }),
    createBindGroupLayout: (d) => ({ entries: d.entries }),
    createPipelineLayout: (d) => d,
    createComputePipelineAsync: async (d) => {
      log.push(['pipeline', d.compute.entryPoint]);
      return { entryPoint: d.compute.entryPoint };
    },
    createBindGroup: (d) => ({ entries: d.entries }),
    createBuffer: buffer,
    createCommandEncoder: () => ({
      clearBuffer: (b) => b.data.fill(0),
      beginComputePass: () => {
        let pipeline;
        let groups = [];
        return {
          setPipeline: (p) => { pipeline = p; },
          setBindGroup: (i, g) => { groups[i] = g; },
          dispatchWorkgroups: (...c) => log.push(['dispatch', pipeline.entryPoint, c, groups.map((g) => g.entries.map((e) => e.binding))]),
          end() {},
        };
      },
      copyBufferToBuffer: (src, so, dst, d, n) => dst.data.set(src.data.subarray(so, so + n), d),
      finish: () => ({}),
    }),
    queue: {
      writeBuffer: (b, o, data) => {
        b.data.set(new Uint8Array(data), o);
        if (b.label === 'uniform') log.push(['uniform', Array.from(new Uint32Array(data))]);
      },
      submit() {},
      onSubmittedWorkDone: async () => {},
    },
    pushErrorScope() {},
    popErrorScope: async () => null,
  };
  return device;
}

const MANIFEST = {
  format: 'mimir-manifest/1', function: 'two', source: 'two.py', backend: 'wgsl',
  dims: [{ name: 'N', min: 1, max: null, multiple_of: 2 }],
  buffers: [
    { name: 'x', role: 'input', dtype: 'float32', shape: ['N', 3] },
    { name: 'out', role: 'output', dtype: 'int32', shape: ['N'] },
    { name: 'scratch0', role: 'scratch', dtype: 'float16', shape: ['N + 1'] },
  ],
  uniform: { fields: [{ name: 'N', type: 'u32' }, { name: 'alpha', type: 'f32' }] },
  kernels: [
    { file: 'a.wgsl', entry_point: 'first', workgroup_size: [64, 1, 1], workgroups: ['cdiv(N, 64)', 1, 1],
      bindings: [{ buffer: 'x', group: 0, binding: 0, access: 'read' }, { buffer: 'scratch0', group: 0, binding: 1, access: 'read_write' }],
      uniform_binding: { group: 0, binding: 2 } },
    { file: 'a.wgsl', entry_point: 'second', workgroup_size: [64, 1, 1], workgroups: ['N // 2', 1, 1],
      bindings: [{ buffer: 'scratch0', group: 0, binding: 0, access: 'read' }, { buffer: 'out', group: 0, binding: 1, access: 'read_write' }],
      uniform_binding: null },
  ],
};

test('load and run on a fake device: pipelines once, launches in order, buffers reused', async () => {
  const device = fakeDevice();
  device.features.add('shader-f16');
  const program = await load(MANIFEST, { device, files: { 'a.wgsl': '' } });
  const result = await program.run({ x: new Float32Array(12) }, { alpha: 0.25 });
  assert.ok(result.out instanceof Int32Array);
  assert.equal(result.out.length, 4);
  const dispatches = device.log.filter((e) => e[0] === 'dispatch');
  assert.deepEqual(dispatches, [['dispatch', 'first', [1, 1, 1], [[0, 1, 2]]], ['dispatch', 'second', [2, 1, 1], [[0, 1]]]]);
  const uniform = device.log.find((e) => e[0] === 'uniform')[1];
  assert.deepEqual(uniform, [4, 0x3e800000, 0, 0]); // N=4, 0.25f, padding
  // scratch0 holds N+1 = 5 halves: 10 bytes, padded to 12.
  assert.ok(device.log.some((e) => e[0] === 'buffer' && e[1] === 'scratch0' && e[2] === 12));
  const allocated = program.stats.buffers;
  await program.run({ x: new Float32Array(6) }, { N: 2, alpha: 1 });
  assert.equal(program.stats.buffers, allocated);
  assert.equal(program.stats.pipelines, 2);
});

test('run() refuses bad calls with the reason', async () => {
  const device = fakeDevice();
  device.features.add('shader-f16');
  const program = await load(MANIFEST, { device, files: { 'a.wgsl': '' } });
  await assert.rejects(program.run({ x: new Float32Array(9) }, { alpha: 1 }), /dim `N`=3 is not a multiple of 2/);
  await assert.rejects(program.run({ x: new Float32Array(12) }, {}), /no value for uniform field `alpha`/);
  await assert.rejects(program.run({ x: new Int32Array(12) }, { alpha: 1 }), /input `x` \(float32\) must be a Float32Array, got Int32Array/);
  await assert.rejects(program.run({ x: new Float32Array(12), y: [] }, { alpha: 1 }), /unknown input buffers: y/);
});

test('load() refuses what WebGPU cannot run', async () => {
  const device = fakeDevice();
  await assert.rejects(load({ ...MANIFEST, backend: 'spirv' }, { device }), /\[MAN002\] backend: this host runs wgsl, not spirv/);
  await assert.rejects(load(MANIFEST, { device, files: { 'a.wgsl': '' } }), /needs the WebGPU feature shader-f16; this device lacks it/);
  await assert.rejects(load({ ...MANIFEST, format: 'x' }, { device }), ManifestError);
  await assert.rejects(load(MANIFEST, { device }), /no source for kernel file a.wgsl/);
});

const INOUT = {
  format: 'mimir-manifest/1', function: 'step', source: 'step.py', backend: 'wgsl',
  dims: [{ name: 'N', min: 1, max: null, multiple_of: null }, { name: 'V', min: 1, max: null, multiple_of: null }],
  buffers: [
    { name: 'p', role: 'inout', dtype: 'float32', shape: ['N'] },
    { name: 'ids', role: 'input', dtype: 'int32', shape: ['N', 1], range: [0, 'V'] },
    { name: 'table', role: 'input', dtype: 'float32', shape: ['V'] },
  ],
  uniform: { fields: [{ name: 'N', type: 'u32' }, { name: 'V', type: 'u32' }] },
  kernels: [
    { file: 'a.wgsl', entry_point: 'only', workgroup_size: [64, 1, 1], workgroups: ['cdiv(N, 64)', 1, 1],
      bindings: [{ buffer: 'p', group: 0, binding: 0, access: 'read_write' }, { buffer: 'ids', group: 0, binding: 1, access: 'read' },
        { buffer: 'table', group: 0, binding: 2, access: 'read' }],
      uniform_binding: { group: 0, binding: 3 } },
  ],
};

test('an inout buffer is uploaded, not cleared, and read back under its name', async () => {
  const device = fakeDevice(); // its launches compute nothing: `p` comes back as uploaded
  const program = await load(INOUT, { device, files: { 'a.wgsl': '' } });
  const p = new Float32Array([1.5, -2, 3]);
  const result = await program.run({ p, ids: new Int32Array([0, 3, 1]), table: new Float32Array(4) });
  assert.deepEqual(Object.keys(result), ['p']);
  assert.deepEqual(Array.from(result.p), [1.5, -2, 3]);
  assert.notEqual(result.p, p); // a new array; the caller's is left as it was
  const profiled = await program.profile({ p, ids: [0, 0, 0], table: [0, 0, 0, 0] }, {}, { repeat: 2 });
  assert.deepEqual(Array.from(profiled.outputs.p), [1.5, -2, 3]);
  await assert.rejects(program.run({ ids: [0, 0, 0], table: [0, 0, 0, 0] }, { N: 3 }), /no values given for input buffer `p`/);
});

test('a value outside an input\'s range is refused before any launch (GPU043)', async () => {
  const device = fakeDevice();
  const program = await load(INOUT, { device, files: { 'a.wgsl': '' } });
  const p = new Float32Array(3);
  const run = (ids) => program.run({ p, ids: new Int32Array(ids), table: new Float32Array(4) });
  await assert.rejects(run([0, 4, 1]), (err) => {
    assert.ok(err instanceof ManifestError);
    assert.equal(err.code, 'GPU043');
    assert.match(err.message, /^\[GPU043\] input `ids` holds 4 at index \[1, 0\], outside its range \[0, V\) = \[0, 4\)/);
    return true;
  });
  await assert.rejects(run([-1, 0, 0]), /holds -1 at index \[0, 0\]/);
  assert.equal(device.log.filter((e) => e[0] === 'dispatch').length, 0);
  await run([3, 0, 2]);
  assert.equal(device.log.filter((e) => e[0] === 'dispatch').length, 1);
  await assert.rejects(load({ ...INOUT, buffers: [{ ...INOUT.buffers[0], role: 'both' }, ...INOUT.buffers.slice(1)] }, { device }), /\[MAN002\] buffers\[0\]\.role: "both" is not one of input/);
});

test('no adapter in Node: the error says how to get a software driver', async () => {
  const saved = process.env.VK_ICD_FILENAMES;
  process.env.VK_ICD_FILENAMES = '/nonexistent/icd.json'; // a driver chosen: no fallback tried
  try {
    const gpu = { requestAdapter: async () => null };
    await assert.rejects(load(MANIFEST, { gpu, files: { 'a.wgsl': '' } }), (err) => {
      assert.ok(err instanceof ManifestError);
      assert.match(err.message, /^WebGPU found no adapter/);
      assert.match(err.message, /VK_ICD_FILENAMES=\/usr\/lib\/chromium\/vk_swiftshader_icd\.json/);
      assert.match(err.message, /apt-get install chromium/);
      return true;
    });
  } finally {
    if (saved === undefined) delete process.env.VK_ICD_FILENAMES;
    else process.env.VK_ICD_FILENAMES = saved;
  }
});

// `x: Tensor[float32, B, 3 * C]` alone fixes C by an equation: the manifest's `solve` says how.
const SOLVED = {
  format: 'mimir-manifest/1', function: 'thirds', source: 'thirds.py', backend: 'wgsl',
  dims: [{ name: 'B', min: 1, max: null, multiple_of: null },
    { name: 'C', min: 1, max: null, multiple_of: null, solve: { buffer: 'x', axis: 1, scale: 3, offset: 'B - B' } }],
  buffers: [
    { name: 'x', role: 'input', dtype: 'float32', shape: ['B', '3*C'] },
    { name: 'out', role: 'output', dtype: 'float32', shape: ['B', 'C'] },
  ],
  uniform: { fields: [{ name: 'B', type: 'u32' }, { name: 'C', type: 'u32' }] },
  kernels: [
    { file: 'a.wgsl', entry_point: 'only', workgroup_size: [64, 1, 1], workgroups: ['cdiv(B * C, 64)', 1, 1],
      bindings: [{ buffer: 'x', group: 0, binding: 0, access: 'read' }, { buffer: 'out', group: 0, binding: 1, access: 'read_write' }],
      uniform_binding: { group: 0, binding: 2 } },
  ],
};

test('a dim only an equation fixes is solved from its input (`solve`), exactly', async () => {
  const device = fakeDevice();
  const program = await load(SOLVED, { device, files: { 'a.wgsl': '' } });
  const result = await program.run({ x: new Float32Array(12) }, { B: 2 });
  assert.equal(result.out.length, 4); // C = 6 / 3
  assert.deepEqual(device.log.find((e) => e[0] === 'uniform')[1], [2, 2, 0, 0]);
  await assert.rejects(program.run({ x: new Float32Array(14) }, { B: 2 }), /\[GPU040\] argument `x` has size 7 on axis 1, which fits no `C` \(7 is not a multiple of 3\)/);
  await assert.rejects(program.run({ x: new Float32Array(12) }, {}), /no value|dim `B`/);
  const bad = (solve) => load({ ...SOLVED, dims: [SOLVED.dims[0], { ...SOLVED.dims[1], solve }] }, { device, files: { 'a.wgsl': '' } });
  await assert.rejects(bad({ ...SOLVED.dims[1].solve, buffer: 'out' }), /\[MAN003\] dims\[1\]\.solve\.buffer: `out` is not an input buffer/);
  await assert.rejects(bad({ ...SOLVED.dims[1].solve, axis: 2 }), /\[MAN002\] dims\[1\]\.solve\.axis/);
  await assert.rejects(bad({ ...SOLVED.dims[1].solve, scale: 0 }), /\[MAN002\] dims\[1\]\.solve\.scale/);
  await assert.rejects(bad({ ...SOLVED.dims[1].solve, offset: 'Q' }), /\[MAN005\] dims\[1\]\.solve\.offset/);
  await assert.rejects(bad(7), /\[MAN002\] dims\[1\]\.solve: must be an object/);
});

// `Dim("T", max=MAXT)`: the kernel's proofs assume T <= MAXT, so the manifest says `max: "MAXT"`.
const RELATED = {
  format: 'mimir-manifest/1', function: 'encoder', source: 'encoder.py', backend: 'wgsl',
  dims: [{ name: 'T', min: 1, max: 'MAXT', multiple_of: null }, { name: 'MAXT', min: 1, max: null, multiple_of: null }],
  buffers: [
    { name: 'x', role: 'input', dtype: 'float32', shape: ['T'] },
    { name: 'wpe', role: 'input', dtype: 'float32', shape: ['MAXT'] },
    { name: 'out', role: 'output', dtype: 'float32', shape: ['T'] },
  ],
  uniform: { fields: [{ name: 'T', type: 'u32' }, { name: 'MAXT', type: 'u32' }] },
  kernels: [
    { file: 'a.wgsl', entry_point: 'only', workgroup_size: [64, 1, 1], workgroups: ['cdiv(T, 64)', 1, 1],
      bindings: [{ buffer: 'x', group: 0, binding: 0, access: 'read' }, { buffer: 'wpe', group: 0, binding: 1, access: 'read' },
        { buffer: 'out', group: 0, binding: 2, access: 'read_write' }],
      uniform_binding: { group: 0, binding: 3 } },
  ],
};

test('a dim bounded by another (`max: "MAXT"`) is refused past it (GPU042)', async () => {
  const device = fakeDevice();
  const program = await load(RELATED, { device, files: { 'a.wgsl': '' } });
  assert.equal((await program.run({ x: new Float32Array(8), wpe: new Float32Array(8) })).out.length, 8);
  await assert.rejects(program.run({ x: new Float32Array(9), wpe: new Float32Array(8) }), /\[GPU042\] dim `T`=9 is above its maximum MAXT=8/);
  const bad = (max) => load({ ...RELATED, dims: [{ ...RELATED.dims[0], max }, RELATED.dims[1]] }, { device, files: { 'a.wgsl': '' } });
  await assert.rejects(bad('Q'), /\[MAN005\] dims\[0\]\.max: `Q` is not a dim of this manifest/);
  await assert.rejects(bad('MAXT +'), /\[MAN005\] dims\[0\]\.max/);
  await assert.rejects(bad(true), /\[MAN002\] dims\[0\]\.max/);
});

test('a kernel that requires what this host does not know for its backend is refused', () => {
  const base = JSON.parse(readFileSync(new URL('../../tests/kernels/out/wgsl/linear/linear_relu.manifest.json', import.meta.url)));
  const refusal = (requires) => {
    const manifest = structuredClone(base);
    manifest.kernels[0].requires = requires;
    try {
      checkManifest(manifest, 'wgsl');
    } catch (err) {
      assert.ok(err instanceof ManifestError, err);
      return `${err.code} ${err.field}: ${err.message}`;
    }
    return null;
  };
  assert.equal(refusal([]), null);
  assert.match(refusal(['tensor-memory']), /^MAN002 kernels\[0\]\.requires\[0\]: .*kernel `linear_relu_0_matmul` requires `tensor-memory`, which this host does not know/);
  assert.match(refusal(['sm_90a']), /^MAN002 kernels\[0\]\.requires\[0\]: .*`sm_90a`, which is for ptx kernels, not wgsl/);
  assert.match(refusal(['SM_90A']), /^MAN002 kernels\[0\]\.requires\[0\]: .*is not a requirement/);
  assert.match(refusal('sm_90a'), /^MAN002 kernels\[0\]\.requires: /);
});
