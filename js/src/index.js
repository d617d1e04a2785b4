// Run the WGSL kernels of a Mimir manifest on WebGPU, in a browser or in Node.
//
//   import { load } from 'mimir-host';
//   const mlp = await load('kernels/mlp.manifest.json');
//   const { out } = await mlp.run({ x, w1, b1, w2, b2 }, { N: 37, H: 16 });
//
// A manifest is untrusted input: load() reads it and its kernel files under the contract of
// docs/hosts.md (src/contract.js: strict JSON, identifiers, plain kernel file names read as
// regular files of at most 16 MiB, unique bindings...), and every run computes each size and
// workgroup count exactly and checks it against the device's limits before anything is
// allocated; a refusal is a ManifestError with the contract's code and the field at fault.
//
// What a run does, in the manifest's terms: check the dims against their constraints, the
// inputs against their dtypes and shapes, and every value of an input with a `range` (GPU043:
// the kernel's bounds proofs assume lo <= value < hi); pack the uniform block (dims, then
// scalar parameters, 4 bytes each, padded to 16); upload the inputs (`input` and `inout`
// buffers); zero the outputs and scratch buffers; dispatch every kernel in order with the
// evaluated workgroup counts; read the outputs and the updated `inout` buffers back as typed
// arrays, by name (the caller's arrays are not modified). Pipelines are made once per program;
// buffers grow as needed and are kept for the next call; calls on one program run one after
// another.

import {
  MAX_KERNEL_FILE_BYTES, MAX_MANIFEST_BYTES, bufferExtent, checkManifest, launchCounts, parseManifest, rangeBounds,
} from './contract.js';
import { DimExprError, evaluate, names as exprNames } from './dimexpr.js';
import { ManifestError } from './errors.js';
import { RESULTS, UPLOADED, checkDims, checkRange, decode, encode, numel, packUniform } from './layout.js';

export { evaluate, DimExprError } from './dimexpr.js';
export { checkManifest, parseManifest } from './contract.js';
export {
  FORMAT, ManifestError, bufferShape, checkDims, checkRange, decode, elementSize, encode, fromHalfBits,
  numel, packUniform, toBfloat16Bits, toHalfBits, workgroupCounts,
} from './layout.js';

// GPUBufferUsage / GPUShaderStage / GPUMapMode values, from the WebGPU specification (so that
// this module works where those globals are not installed, e.g. Node with an injected device).
const USAGE = { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };
const COMPUTE = 0x4;
const MAP_READ = 0x1;

const WANTED_LIMITS = [
  'maxStorageBufferBindingSize', 'maxBufferSize', 'maxStorageBuffersPerShaderStage',
  'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX', 'maxComputeWorkgroupSizeY',
  'maxComputeWorkgroupSizeZ', 'maxComputeWorkgroupStorageSize', 'maxComputeWorkgroupsPerDimension',
];

/**
 * Load a manifest (a URL, a file path in Node, or the parsed object) and make its pipelines.
 *
 * @param {string | URL | object} source
 * @param {object} [options]
 * @param {GPUDevice} [options.device] the device to run on (default: one from `options.gpu`)
 * @param {GPU} [options.gpu] where to ask for an adapter (default: `navigator.gpu`; in Node, the
 *   `webgpu` package's, and where it finds no adapter, a software Vulkan driver on the machine)
 * @param {Record<string, string>} [options.files] kernel sources by file name (instead of fetching)
 * @param {string | URL} [options.baseUrl] where the manifest's kernel files live, for an object source
 * @returns {Promise<Program>}
 */
export async function load(source, options = {}) {
  let manifest;
  let base = options.baseUrl;
  if (typeof source === 'string' || source instanceof URL) {
    const url = toUrl(source);
    manifest = parseManifest(await readBytes(url, MAX_MANIFEST_BYTES, 'MAN001'));
    base = base ?? url;
  } else {
    manifest = source;
  }
  checkManifest(manifest, 'wgsl');
  const sources = new Map();
  for (const [k, kernel] of manifest.kernels.entries()) {
    const file = kernel.file;
    const field = `kernels[${k}].file`;
    if (sources.has(file)) continue;
    if (options.files && Object.prototype.hasOwnProperty.call(options.files, file)) {
      sources.set(file, options.files[file]);
    } else if (base !== undefined) {
      // `file` is a plain name (checked), so the URL stays in the manifest's folder
      const bytes = await readBytes(new URL(file, toUrl(base)), MAX_KERNEL_FILE_BYTES, 'MAN004', field);
      try {
        sources.set(file, new TextDecoder('utf-8', { fatal: true }).decode(bytes));
      } catch {
        throw new ManifestError(`kernel file \`${file}\` is not UTF-8 text`, 'MAN004', field);
      }
    } else {
      throw new ManifestError(`no source for kernel file ${file}: pass a manifest URL, options.baseUrl or options.files`, 'MAN004', field);
    }
  }
  let device = options.device;
  let owners = [];
  if (!device) ({ device, owners } = await requestDevice(manifest, options.gpu));
  const program = new Program(manifest, device, sources);
  // Dawn in Node tears the device down when its GPU object is collected: keep them alive.
  program._owners = owners;
  await program.ready;
  return program;
}

function toUrl(source) {
  if (source instanceof URL) return source;
  if (/^[A-Za-z][A-Za-z0-9+.-]*:/.test(source) && !/^[A-Za-z]:[\\/]/.test(source)) return new URL(source);
  if (globalThis.location) return new URL(source, globalThis.location.href);
  // Node: a file path, relative to the working directory.
  const cwd = globalThis.process.cwd().replace(/\\/g, '/');
  return new URL(source.replace(/\\/g, '/'), `file://${cwd.startsWith('/') ? '' : '/'}${cwd}/`);
}

/**
 * At most `limit` bytes of `url`, refused with `code` otherwise. A file: URL must name a regular
 * file (a FIFO or a device such as /dev/zero is refused before a byte is read), and a kernel file
 * (`field` given) not a symbolic link; a fetched body is read no further than the limit.
 */
async function readBytes(url, limit, code, field) {
  const what = field ? `kernel file \`${url.pathname.split('/').pop()}\`` : 'the manifest';
  if (url.protocol === 'file:') {
    const fs = await import('node:fs/promises');
    const { constants } = await import('node:fs');
    let handle;
    try {
      const flags = constants.O_RDONLY | constants.O_NONBLOCK | (field ? constants.O_NOFOLLOW : 0);
      handle = await fs.open(url, flags);
    } catch (err) {
      const why = err.code === 'ENOENT' ? 'does not exist' : err.code === 'ELOOP' ? 'is a symbolic link' : `cannot be opened (${err.code})`;
      throw new ManifestError(`${what} ${why}`, code, field);
    }
    try {
      const info = await handle.stat();
      if (!info.isFile()) throw new ManifestError(`${what} is not a regular file`, code, field);
      if (info.size > limit) throw new ManifestError(`${what} is ${info.size} bytes, over the limit of ${limit}`, code, field);
      const buffer = new Uint8Array(limit + 1);
      let used = 0;
      for (;;) {
        const { bytesRead } = await handle.read(buffer, used, buffer.length - used, null);
        if (bytesRead === 0 || used + bytesRead > limit) {
          used += bytesRead;
          break;
        }
        used += bytesRead;
      }
      if (used > limit) throw new ManifestError(`${what} grew past the limit of ${limit} bytes`, code, field);
      return buffer.slice(0, used);
    } finally {
      await handle.close();
    }
  }
  let response;
  try {
    response = await fetch(url);
  } catch (err) {
    throw new ManifestError(`cannot fetch ${what}: ${err.message}`, code, field);
  }
  if (!response.ok) throw new ManifestError(`cannot fetch ${what}: ${response.status} ${response.statusText}`, code, field);
  const chunks = [];
  let used = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    used += value.length;
    if (used > limit) {
      await reader.cancel();
      throw new ManifestError(`${what} is over the limit of ${limit} bytes`, code, field);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(used);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

// Software Vulkan drivers Dawn (the `webgpu` package) can run on where no GPU driver works:
// SwiftShader, as Chromium ships it. (Debian 12's Mesa lavapipe is refused by Dawn.)
const SOFTWARE_ICDS = [
  '/usr/lib/chromium/vk_swiftshader_icd.json',
  '/usr/lib/chromium-browser/vk_swiftshader_icd.json',
  '/usr/lib64/chromium-browser/vk_swiftshader_icd.json',
  '/opt/google/chrome/vk_swiftshader_icd.json',
];

const inNode = () => typeof globalThis.process?.versions?.node === 'string';

/** Node without a `gpu`: the `webgpu` package's, when it is installed. */
// a name in a variable: bundlers leave this Node-only, optional import alone
const WEBGPU_PACKAGE = 'webgpu';

async function nodeGpu() {
  if (!inNode()) return undefined;
  try {
    const { create } = await import(/* webpackIgnore: true */ /* @vite-ignore */ WEBGPU_PACKAGE);
    return create([]);
  } catch {
    return undefined;
  }
}

/**
 * Node, no adapter, and no Vulkan driver chosen (`VK_ICD_FILENAMES`): try a software driver
 * found on the machine, and say so on stderr. Returns {gpu, adapter} or undefined.
 */
async function softwareAdapter() {
  if (!inNode()) return undefined;
  const env = globalThis.process.env;
  if (env.VK_ICD_FILENAMES || env.VK_DRIVER_FILES) return undefined;
  const { existsSync } = await import('node:fs');
  const icd = SOFTWARE_ICDS.find((file) => existsSync(file));
  if (!icd) return undefined;
  let create;
  try {
    ({ create } = await import(/* webpackIgnore: true */ /* @vite-ignore */ WEBGPU_PACKAGE));
  } catch {
    return undefined;
  }
  env.VK_ICD_FILENAMES = icd; // read by the Vulkan loader when the new instance starts
  const gpu = create([]);
  const adapter = await gpu.requestAdapter();
  if (!adapter) {
    delete env.VK_ICD_FILENAMES;
    return undefined;
  }
  console.warn(
    `mimir-host: no WebGPU adapter on this machine's drivers; running on the software Vulkan ` +
    `driver ${icd} (VK_ICD_FILENAMES is now set to it; set it yourself to choose another)`,
  );
  return { gpu, adapter };
}

/** Why there is no adapter, and what to do, for the place this runs in. */
function noAdapter() {
  if (inNode()) {
    return 'WebGPU found no adapter: no GPU driver here that WebGPU can use, and no software ' +
      'Vulkan driver was found. Install one and point VK_ICD_FILENAMES at its ICD file (Debian: ' +
      '`apt-get install chromium`, which ships SwiftShader, then ' +
      'VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json)';
  }
  return 'WebGPU found no adapter: WebGPU is off in this browser or has no GPU to use. ' +
    'Chrome or Chromium: enable chrome://flags/#enable-unsafe-webgpu (on Linux also ' +
    'chrome://flags/#enable-vulkan), or start it with --enable-unsafe-webgpu ' +
    '--enable-features=Vulkan; Firefox: set dom.webgpu.enabled in about:config; Safari: ' +
    'Develop > Feature Flags > WebGPU';
}

async function requestDevice(manifest, gpu) {
  gpu = gpu ?? globalThis.navigator?.gpu ?? (await nodeGpu());
  if (!gpu) {
    throw new ManifestError(
      inNode()
        ? 'WebGPU is not available here: install the `webgpu` package (npm install webgpu), or pass options.gpu or options.device'
        : 'WebGPU is not available in this browser (no navigator.gpu). ' + noAdapter().split(': ').slice(1).join(': '),
    );
  }
  let adapter = await gpu.requestAdapter();
  if (!adapter) {
    const software = await softwareAdapter();
    if (software) ({ gpu, adapter } = software);
  }
  if (!adapter) throw new ManifestError(noAdapter());
  const features = [];
  if (needsF16(manifest)) {
    if (!adapter.features.has('shader-f16')) {
      throw new ManifestError(
        `\`${manifest.function}\` stores float16, which needs the WebGPU feature shader-f16; this adapter lacks it`,
      );
    }
    features.push('shader-f16');
  }
  const requiredLimits = {};
  for (const name of WANTED_LIMITS) if (adapter.limits[name] !== undefined) requiredLimits[name] = adapter.limits[name];
  const device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits });
  return { device, owners: [gpu, adapter] };
}

const needsF16 = (manifest) => manifest.buffers.some((b) => b.dtype === 'float16');

/** One loaded manifest: its pipelines, and the buffers of the last calls. */
export class Program {
  constructor(manifest, device, sources) {
    checkManifest(manifest, 'wgsl');
    this.manifest = manifest;
    this.device = device;
    /** Counters, for tests and curiosity: pipelines made, buffers allocated, runs. */
    this.stats = { pipelines: 0, buffers: 0, runs: 0 };
    this._buffers = new Map(); // name -> GPUBuffer (storage, grown as needed)
    this._staging = new Map(); // name -> GPUBuffer (map-read, for outputs)
    this._uniform = null;
    this._bindCache = new Map(); // dims key -> bind groups per kernel
    this._queue = Promise.resolve();
    this.ready = this._makePipelines(sources);
  }

  async _makePipelines(sources) {
    const { device, manifest } = this;
    if (needsF16(manifest) && !device.features.has('shader-f16')) {
      throw new ManifestError(
        `\`${manifest.function}\` stores float16, which needs the WebGPU feature shader-f16; this device lacks it`,
      );
    }
    const modules = new Map();
    for (const [file, code] of sources instanceof Map ? sources : Object.entries(sources)) {
      const module = device.createShaderModule({ code, label: file });
      const info = await module.getCompilationInfo();
      const errors = info.messages.filter((m) => m.type === 'error');
      if (errors.length) {
        const text = errors.map((m) => `${file}:${m.lineNum}:${m.linePos}: ${m.message}`).join('\n');
        throw new ManifestError(`WGSL does not compile on this device:\n${text}`);
      }
      modules.set(file, module);
    }
    this._kernels = [];
    for (const kernel of manifest.kernels) {
      const groups = new Map();
      for (const b of kernel.bindings) {
        const type = b.access === 'read' ? 'read-only-storage' : 'storage';
        entriesOf(groups, b.group).push({ binding: b.binding, visibility: COMPUTE, buffer: { type } });
      }
      const ub = kernel.uniform_binding;
      if (ub != null) entriesOf(groups, ub.group).push({ binding: ub.binding, visibility: COMPUTE, buffer: { type: 'uniform' } });
      const count = Math.max(-1, ...groups.keys()) + 1;
      const layouts = [];
      for (let g = 0; g < count; g += 1) layouts.push(device.createBindGroupLayout({ entries: groups.get(g) ?? [] }));
      let pipeline;
      try {
        pipeline = await device.createComputePipelineAsync({
          label: kernel.entry_point,
          layout: device.createPipelineLayout({ bindGroupLayouts: layouts }),
          compute: { module: modules.get(kernel.file), entryPoint: kernel.entry_point },
        });
      } catch (err) {
        throw new ManifestError(
          `kernel \`${kernel.entry_point}\` in ${kernel.file} does not match its manifest entry (bindings, access or entry point): ${err.message}`,
        );
      }
      this.stats.pipelines += 1;
      this._kernels.push({ kernel, pipeline, layouts });
    }
  }

  /**
   * Infer the dims that the inputs' lengths determine and that `sizes` does not give: a dim
   * that is the only unknown entry of some input's shape. Returns a new object of dims.
   */
  inferDims(inputs, sizes = {}) {
    const dims = {};
    const declared = this.manifest.dims.map((d) => d.name);
    for (const name of declared) if (sizes[name] !== undefined) dims[name] = sizes[name];
    let progress = true;
    while (progress) {
      progress = false;
      for (const [i, b] of this.manifest.buffers.entries()) {
        if (!UPLOADED.includes(b.role) || !inputs[b.name] || typeof inputs[b.name].length !== 'number') continue;
        const unknown = b.shape.filter((e) => typeof e === 'string' && [...exprNames(e)].some((n) => dims[n] === undefined));
        if (unknown.length !== 1 || !/^\s*[A-Za-z_][A-Za-z0-9_]*\s*$/.test(unknown[0])) continue;
        const known = numel(b.shape.map((e, a) => [e, a]).filter(([e]) => e !== unknown[0]).map(([e, a]) => {
          try {
            return evaluate(e, dims);
          } catch (err) {
            if (err instanceof DimExprError) throw new DimExprError(err.reason, `buffers[${i}].shape[${a}]`);
            throw err;
          }
        }));
        const name = unknown[0].trim();
        if (b.shape.filter((e) => e === unknown[0]).length !== 1 || known === 0) continue;
        const length = inputs[b.name].length;
        if (length % known) {
          throw new ManifestError(
            `input \`${b.name}\` has ${length} values, not a multiple of ${known}, so no \`${name}\` fits its shape [${b.shape.join(', ')}]`,
            'GPU040',
          );
        }
        dims[name] = length / known;
        progress = true;
      }
    }
    return dims;
  }

  /**
   * Run every kernel in order; resolves to the output buffers, and the `inout` buffers as the
   * kernels left them, by name, as typed arrays (the arrays passed in are not modified).
   *
   * @param {Record<string, ArrayLike<number|boolean>>} inputs one entry per input and inout buffer,
   *   flat row-major
   * @param {Record<string, number>} [sizes] dims and scalar parameters by name (dims that the inputs'
   *   lengths determine may be left out)
   */
  run(inputs, sizes = {}) {
    const result = this._queue.then(() => this._run(inputs, sizes));
    this._queue = result.catch(() => {});
    return result;
  }

  /**
   * Time each kernel: `repeat` times, every launch submitted alone and waited for; resolves to
   * [{entryPoint, ms}] (the median wall time per launch, submission included) and the outputs.
   */
  profile(inputs, sizes = {}, { repeat = 5 } = {}) {
    const result = this._queue.then(() => this._run(inputs, sizes, repeat));
    this._queue = result.catch(() => {});
    return result;
  }

  async _run(inputs, sizes, repeat = 0) {
    // WebGPU reports a bad bind group or an allocation failure asynchronously; catch them here
    // so that a run fails with the reason instead of returning zeros.
    const { device } = this;
    device.pushErrorScope('out-of-memory');
    device.pushErrorScope('validation');
    let result;
    let failure;
    try {
      result = await this._runScoped(inputs, sizes, repeat);
    } catch (err) {
      failure = err;
    }
    const invalid = await device.popErrorScope();
    const oom = await device.popErrorScope();
    if (invalid) throw new ManifestError(`WebGPU refused a launch of \`${this.manifest.function}\`: ${invalid.message}`);
    if (oom) throw new ManifestError(`out of GPU memory running \`${this.manifest.function}\`: ${oom.message}`);
    if (failure) throw failure;
    return result;
  }

  async _runScoped(inputs, sizes, repeat) {
    const { device, manifest } = this;
    const plan = this._plan(inputs, sizes);
    const encoder = device.createCommandEncoder();
    // outputs and scratch start at zero on every run: a `zero` buffer (a one-launch reduction's
    // counter, which the kernel itself returns to zero) is among them
    for (const b of manifest.buffers) {
      if (!UPLOADED.includes(b.role)) encoder.clearBuffer(this._buffers.get(b.name), 0, plan.bytes[b.name]);
    }
    for (const [name, data] of Object.entries(plan.data)) device.queue.writeBuffer(this._buffers.get(name), 0, data);
    if (plan.uniform) device.queue.writeBuffer(this._uniform, 0, plan.uniform);
    let times = null;
    if (repeat > 0) {
      device.queue.submit([encoder.finish()]);
      times = plan.launches.map(() => []);
      for (let r = 0; r < repeat; r += 1) {
        for (let i = 0; i < plan.launches.length; i += 1) {
          const one = device.createCommandEncoder();
          this._encode(one, [plan.launches[i]]);
          const start = performance.now();
          device.queue.submit([one.finish()]);
          await device.queue.onSubmittedWorkDone();
          times[i].push(performance.now() - start);
        }
      }
      // The outputs come from one clean run after the timing repeats (the repeats changed the
      // inout buffers: they start again from the caller's values).
      const again = device.createCommandEncoder();
      for (const b of manifest.buffers) {
        if (!UPLOADED.includes(b.role)) again.clearBuffer(this._buffers.get(b.name), 0, plan.bytes[b.name]);
        else if (b.role === 'inout') device.queue.writeBuffer(this._buffers.get(b.name), 0, plan.data[b.name]);
      }
      this._finish(again, plan);
    } else {
      this._finish(encoder, plan);
    }
    const outputs = {};
    const reads = manifest.buffers.filter((b) => RESULTS.includes(b.role)).map(async (b) => {
      const staging = this._staging.get(b.name);
      await staging.mapAsync(MAP_READ, 0, plan.bytes[b.name]);
      const bytes = staging.getMappedRange(0, plan.bytes[b.name]).slice(0);
      staging.unmap();
      outputs[b.name] = decode(bytes, b.dtype, plan.counts[b.name]);
    });
    await Promise.all(reads);
    this.stats.runs += 1;
    if (times === null) return outputs;
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const kernels = plan.launches.map((l, i) => ({ entryPoint: l.kernel.entry_point, ms: median(times[i]) }));
    return { outputs, kernels };
  }

  _finish(encoder, plan) {
    this._encode(encoder, plan.launches);
    for (const b of this.manifest.buffers) {
      if (RESULTS.includes(b.role)) {
        encoder.copyBufferToBuffer(this._buffers.get(b.name), 0, this._staging.get(b.name), 0, plan.bytes[b.name]);
      }
    }
    this.device.queue.submit([encoder.finish()]);
  }

  _encode(encoder, launches) {
    for (const { pipeline, bindGroups, counts } of launches) {
      const pass = encoder.beginComputePass();
      pass.setPipeline(pipeline);
      bindGroups.forEach((g, i) => pass.setBindGroup(i, g));
      pass.dispatchWorkgroups(...counts);
      pass.end();
    }
  }

  /** Validate the call and get everything ready: bytes, buffers, bind groups, launches. */
  _plan(inputs, sizes) {
    const { manifest, device } = this;
    if (inputs === null || typeof inputs !== 'object') throw new ManifestError('run() takes an object of inputs by name');
    const dimNames = new Set(manifest.dims.map((d) => d.name));
    const fieldNames = new Set((manifest.uniform?.fields ?? []).map((f) => f.name));
    for (const key of Object.keys(sizes)) {
      if (!dimNames.has(key) && !fieldNames.has(key)) {
        const known = [...dimNames, ...[...fieldNames].filter((f) => !dimNames.has(f))];
        throw new ManifestError(`\`${key}\` is neither a dim nor a scalar parameter of \`${manifest.function}\` (those are: ${known.join(', ') || 'none'})`, 'GPU040');
      }
    }
    const inputNames = manifest.buffers.filter((b) => UPLOADED.includes(b.role)).map((b) => b.name);
    const extra = Object.keys(inputs).filter((k) => !inputNames.includes(k));
    if (extra.length) throw new ManifestError(`values given for unknown input buffers: ${extra.join(', ')} (the inputs are: ${inputNames.join(', ')})`, 'GPU040');
    for (const name of inputNames) {
      if (inputs[name] === undefined) throw new ManifestError(`no values given for input buffer \`${name}\``, 'GPU040');
    }
    const dims = this.inferDims(inputs, sizes);
    checkDims(manifest, dims);
    const scalars = {};
    for (const key of fieldNames) if (!dimNames.has(key) && sizes[key] !== undefined) scalars[key] = sizes[key];
    const uniform = packUniform(manifest, dims, scalars);

    // Every size and launch computed exactly and checked against this device's limits first.
    const maxBytes = device.limits.maxStorageBufferBindingSize ?? 134217728;
    const maxGroups = device.limits.maxComputeWorkgroupsPerDimension ?? 65535;
    const counts = {};
    const bytes = {};
    const data = {};
    const shapes = {};
    manifest.buffers.forEach((b, i) => {
      const [shape, count, n] = bufferExtent(manifest, i, dims, maxBytes);
      shapes[b.name] = shape;
      counts[b.name] = count;
      bytes[b.name] = Math.max(4, n + ((4 - (n % 4)) % 4));
    });
    const launchCounts_ = this._kernels.map((_, i) => launchCounts(manifest, i, dims, [maxGroups, maxGroups, maxGroups]));
    manifest.buffers.forEach((b, i) => {
      if (!UPLOADED.includes(b.role)) return;
      try {
        data[b.name] = encode(b.name, inputs[b.name], b.dtype, counts[b.name]);
      } catch (err) {
        if (err instanceof ManifestError && /has \d+ values; its shape needs/.test(err.message)) {
          throw new ManifestError(`${err.reason} (shape [${b.shape.join(', ')}] = [${shapes[b.name].join(', ')}] for ${showDims(dims)})`, 'GPU040');
        }
        throw err;
      }
      if (b.range != null) rangeBounds(manifest, i, dims);
      checkRange(b, data[b.name], dims); // before anything is written to the device
    });

    // Buffers: grow-only, per name; growing one drops every cached bind group.
    for (const b of manifest.buffers) {
      const need = bytes[b.name];
      const have = this._buffers.get(b.name);
      if (!have || have.size < need) {
        have?.destroy();
        this._buffers.set(b.name, this._create(need, USAGE.STORAGE | USAGE.COPY_SRC | USAGE.COPY_DST, b.name));
        this._bindCache.clear();
      }
      if (RESULTS.includes(b.role)) {
        const staging = this._staging.get(b.name);
        if (!staging || staging.size < need) {
          staging?.destroy();
          this._staging.set(b.name, this._create(need, USAGE.MAP_READ | USAGE.COPY_DST, `${b.name} (read back)`));
        }
      }
    }
    if (uniform && !this._uniform) this._uniform = this._create(uniform.byteLength, USAGE.UNIFORM | USAGE.COPY_DST, 'uniform');

    const key = JSON.stringify(manifest.buffers.map((b) => bytes[b.name]));
    let bindGroups = this._bindCache.get(key);
    if (!bindGroups) {
      bindGroups = this._kernels.map(({ kernel, layouts }) => layouts.map((layout, g) => {
        const entries = kernel.bindings.filter((b) => b.group === g).map((b) => ({
          binding: b.binding,
          resource: { buffer: this._buffers.get(b.buffer), offset: 0, size: bytes[b.buffer] },
        }));
        const ub = kernel.uniform_binding;
        if (ub != null && ub.group === g) entries.push({ binding: ub.binding, resource: { buffer: this._uniform } });
        return device.createBindGroup({ layout, entries });
      }));
      if (this._bindCache.size >= 16) this._bindCache.clear();
      this._bindCache.set(key, bindGroups);
    }
    const launches = [];
    this._kernels.forEach(({ kernel, pipeline }, i) => {
      if (launchCounts_[i].includes(0)) return; // nothing to launch (an empty tensor)
      launches.push({ kernel, pipeline, bindGroups: bindGroups[i], counts: launchCounts_[i] });
    });
    return { dims, counts, bytes, data, uniform, launches };
  }

  _create(size, usage, label) {
    this.stats.buffers += 1;
    return this.device.createBuffer({ size, usage, label });
  }

  /** Free the GPU buffers this program holds (the device stays). */
  destroy() {
    for (const b of [...this._buffers.values(), ...this._staging.values()]) b.destroy();
    this._uniform?.destroy();
    this._buffers.clear();
    this._staging.clear();
    this._bindCache.clear();
    this._uniform = null;
  }
}

function entriesOf(groups, g) {
  if (!groups.has(g)) groups.set(g, []);
  return groups.get(g);
}

const showDims = (dims) => Object.entries(dims).map(([k, v]) => `${k}=${v}`).join(', ') || 'no dims';
