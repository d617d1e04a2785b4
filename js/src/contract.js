// The manifest contract: every rule the host checks before it trusts a manifest.
//
// A manifest is input anyone can hand a host, so nothing in it is trusted. These are the rules
// of docs/hosts.md, in the order and with the codes of mimir/runtime/contract.py and the C
// hosts (examples/hosts/common/manifest.c), so one hostile manifest gets the same code from
// every host:
// - parseManifest(bytes): at most 1 MiB of UTF-8 JSON, nested at most 32 deep, unique keys, no
//   U+0000 and no lone surrogate in a string (MAN001);
// - checkManifest(manifest, backend): the schema's types and sets, identifiers, plain kernel
//   file names, dim expressions over declared dims, bindings unique and in range, a uniform
//   block of at most 4 KiB (MAN002 to MAN009);
// - at a run, with the dims bound: bufferExtent and launchCounts compute every size exactly
//   (BigInt) and refuse what is negative, over 2^32 - 1 elements or over the device's limits.

import { DimExprError, evaluateBig, names, parse } from './dimexpr.js';
import { ManifestError } from './errors.js';

export const FORMAT = 'mimir-manifest/1';
export const U32_MAX = 2 ** 32 - 1;
export const MAX_MANIFEST_BYTES = 1 << 20;
export const MAX_KERNEL_FILE_BYTES = 16 << 20;
export const MAX_JSON_DEPTH = 32;
const MAX_EXACT = 2 ** 53 - 1;
const MAX_NAME_LENGTH = 128;
const MAX_DIMS = 64;
const MAX_BUFFERS = 256;
const MAX_KERNELS = 256;
const MAX_RANK = 8;
const MAX_BINDINGS = 32;
const MAX_GROUP = 3;
const MAX_BINDING = 31;
const MAX_UNIFORM_FIELDS = 1024;
const MAX_WORKGROUP_SIZE = [1024, 1024, 64];
const MAX_WORKGROUP_THREADS = 1024;

export const BACKENDS = ['msl', 'wgsl', 'ptx', 'spirv'];
const SUFFIX = { msl: '.metal', wgsl: '.wgsl', ptx: '.ptx', spirv: '.spv' };
const ROLES = ['input', 'output', 'inout', 'scratch'];
const UPLOADED = ['input', 'inout'];
export const DTYPE_SIZES = { float32: 4, float16: 2, bfloat16: 2, int32: 4, uint32: 4, bool_: 4 };
const ACCESS = ['read', 'read_write'];
const UNIFORM_TYPES = ['u32', 'i32', 'f32'];

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const FILE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
// What a kernel may require of the device beyond its backend's baseline, by backend: the
// requirements a host knows how to check. Any other is refused before anything is allocated.
export const REQUIREMENTS = {
  msl: ['simdgroup-32', 'msl-3.2', 'simdgroup-matrix'],
  ptx: ['sm_90a'],
  wgsl: [],
  spirv: [],
};
const MAX_REQUIREMENTS = 16;
const MAX_REQUIREMENT_LENGTH = 64;
const REQUIREMENT = /^[a-z0-9][a-z0-9_.-]*$/;
const has = (object, key) => Object.prototype.hasOwnProperty.call(object, key);
const get = (object, key) => (has(object, key) ? object[key] : undefined);

// ------------------------------------------------------------------ stage 1: bytes to JSON

const unreadable = (why) => new ManifestError(`the manifest ${why}`, 'MAN001');

/** The JSON value of `data` (a Uint8Array or ArrayBuffer) under the contract's JSON rules. */
export function parseManifest(data) {
  const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
  if (bytes.length > MAX_MANIFEST_BYTES) {
    throw unreadable(`is ${bytes.length} bytes, over the limit of ${MAX_MANIFEST_BYTES}`);
  }
  let text;
  try {
    // ignoreBOM keeps a byte order mark in the text, where JSON.parse refuses it as the others do
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw unreadable('is not UTF-8');
  }
  screen(text);
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw unreadable(`is not JSON: ${err.message}`);
  }
  checkStrings(value);
  return value;
}

/**
 * Before JSON.parse: the nesting depth (strings skipped) and each object's keys, decoded, unique
 * (JSON.parse keeps the last of two, where another host would keep the first).
 */
function screen(text) {
  const stack = [];
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      let j = i + 1;
      while (j < text.length) {
        const d = text.charCodeAt(j);
        if (d === 0x5c) j += 2;
        else if (d === 0x22) break;
        else j += 1;
      }
      if (j >= text.length) return; // unterminated: JSON.parse says so
      const top = stack[stack.length - 1];
      if (top && top.keys && top.expectKey) {
        let key;
        try {
          key = JSON.parse(text.slice(i, j + 1));
        } catch {
          return; // a malformed string: JSON.parse says so
        }
        if (top.keys.has(key)) throw unreadable(`has the key ${JSON.stringify(key).slice(0, 60)} twice in one object`);
        top.keys.add(key);
        top.expectKey = false;
      }
      i = j;
    } else if (c === 0x7b || c === 0x5b) {
      stack.push({ keys: c === 0x7b ? new Set() : null, expectKey: c === 0x7b });
      if (stack.length > MAX_JSON_DEPTH) throw unreadable(`nests deeper than ${MAX_JSON_DEPTH} levels`);
    } else if (c === 0x7d || c === 0x5d) {
      stack.pop();
    } else if (c === 0x2c) {
      const top = stack[stack.length - 1];
      if (top && top.keys) top.expectKey = true;
    }
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function checkString(text) {
  if (text.includes('\u0000')) throw unreadable('holds a string with U+0000 in it');
  if (LONE_SURROGATE.test(text)) throw unreadable('holds a string with a lone UTF-16 surrogate in it');
}

/** No string (key or value) holds U+0000 or a lone surrogate: not every host can. */
function checkStrings(value) {
  const stack = [value];
  while (stack.length) {
    const item = stack.pop();
    if (typeof item === 'string') checkString(item);
    else if (Array.isArray(item)) stack.push(...item);
    else if (item !== null && typeof item === 'object') {
      for (const [key, member] of Object.entries(item)) {
        checkString(key);
        stack.push(member);
      }
    }
  }
}

// ------------------------------------------------------------------ stage 2: the fields

/**
 * Throw ManifestError unless every field of `manifest` follows the contract; `backend` is what
 * this host runs (a name or a list; undefined: any). The order of the checks is the contract's.
 */
export function checkManifest(manifest, backend) {
  const root = object(manifest, '(manifest)');
  if (get(root, 'format') !== FORMAT) {
    throw new ManifestError(`unsupported manifest format ${show(get(root, 'format'))}; expected "${FORMAT}"`, 'MAN002', 'format');
  }
  identifier(get(root, 'function'), 'function');
  checkBackend(get(root, 'backend'), backend);
  const dims = checkDimList(get(root, 'dims'));
  const buffers = checkBuffers(get(root, 'buffers'), dims);
  checkSolves(root.dims, dims, buffers);
  const hasUniform = checkUniform(get(root, 'uniform'));
  const kernels = list(get(root, 'kernels'), 'kernels', MAX_KERNELS);
  kernels.forEach((kernel, k) => checkKernel(kernel, `kernels[${k}]`, root.backend, dims, buffers, hasUniform));
}

function checkBackend(value, wanted) {
  if (!BACKENDS.includes(value)) {
    throw new ManifestError(`unknown backend ${show(value)}; expected one of ${BACKENDS.join(', ')}`, 'MAN002', 'backend');
  }
  const allowed = typeof wanted === 'string' ? [wanted] : wanted;
  if (allowed !== undefined && !allowed.includes(value)) {
    throw new ManifestError(`this host runs ${allowed.join(' or ')}, not ${value}`, 'MAN002', 'backend');
  }
}

function checkDimList(value) {
  const seen = new Set();
  list(value, 'dims', MAX_DIMS).forEach((entry, i) => {
    const where = `dims[${i}]`;
    const dim = object(entry, where);
    const name = identifier(get(dim, 'name'), `${where}.name`);
    if (seen.has(name)) throw new ManifestError(`dim \`${name}\` is declared twice`, 'MAN003', `${where}.name`);
    seen.add(name);
    for (const [key, low] of [['min', 0], ['max', 0], ['multiple_of', 1]]) {
      if (get(dim, key) != null && !(key !== 'multiple_of' && typeof dim[key] === 'string')) {
        integer(dim[key], `${where}.${key}`, low, U32_MAX, 'MAN002');
      }
    }
  });
  // a relation with other dims (`max: "MAXT"`), once every dim is named
  value.forEach((dim, i) => {
    for (const key of ['min', 'max']) {
      if (typeof dim[key] === 'string') expression(dim[key], `dims[${i}].${key}`, seen);
    }
  });
  return seen;
}

function checkBuffers(value, dims) {
  const out = new Map();
  list(value, 'buffers', MAX_BUFFERS).forEach((entry, i) => {
    const where = `buffers[${i}]`;
    const buf = object(entry, where);
    const name = identifier(get(buf, 'name'), `${where}.name`);
    if (out.has(name)) throw new ManifestError(`buffer \`${name}\` is declared twice`, 'MAN003', `${where}.name`);
    const role = choice(get(buf, 'role'), ROLES, `${where}.role`);
    const dtype = choice(get(buf, 'dtype'), Object.keys(DTYPE_SIZES), `${where}.dtype`);
    if (has(buf, 'element_size')) {
      const size = integer(buf.element_size, `${where}.element_size`, 1, 16, 'MAN002');
      if (size !== DTYPE_SIZES[dtype]) {
        throw new ManifestError(`element_size ${size} is not the ${DTYPE_SIZES[dtype]} bytes of ${dtype}`, 'MAN002', `${where}.element_size`);
      }
    }
    const shape = list(get(buf, 'shape'), `${where}.shape`, MAX_RANK);
    shape.forEach((size, a) => checkSize(size, `${where}.shape[${a}]`, dims, 'MAN006'));
    const bounds = get(buf, 'range');
    if (bounds != null) {
      if (!(Array.isArray(bounds) && bounds.length === 2 && UPLOADED.includes(role) && ['int32', 'uint32'].includes(dtype))) {
        throw new ManifestError('a range is two bounds on an integer input', 'MAN002', `${where}.range`);
      }
      bounds.forEach((bound, e) => {
        if (typeof bound === 'string') expression(bound, `${where}.range[${e}]`, dims);
        else integer(bound, `${where}.range[${e}]`, -MAX_EXACT, MAX_EXACT, 'MAN002');
      });
    }
    out.set(name, buf);
  });
  return out;
}

// Each dim's `solve` (after the buffers, which it names): an input buffer, one of its axes, a
// `scale` of at least 1 and an `offset`, each an int or an expression over dims.
function checkSolves(entries, dims, buffers) {
  entries.forEach((entry, i) => {
    if (get(entry, 'solve') == null) return;
    const where = `dims[${i}].solve`;
    const solve = object(entry.solve, where);
    const name = identifier(get(solve, 'buffer'), `${where}.buffer`);
    const buf = buffers.get(name);
    if (buf === undefined || !UPLOADED.includes(buf.role)) {
      throw new ManifestError(`\`${name}\` is not an input buffer`, 'MAN003', `${where}.buffer`);
    }
    integer(get(solve, 'axis'), `${where}.axis`, 0, buf.shape.length - 1, 'MAN002');
    for (const [key, low, high] of [['scale', 1, U32_MAX], ['offset', -MAX_EXACT, MAX_EXACT]]) {
      const value = get(solve, key);
      if (typeof value === 'string') expression(value, `${where}.${key}`, dims);
      else integer(value, `${where}.${key}`, low, high, 'MAN002');
    }
  });
}

function checkUniform(value) {
  if (value == null) return false;
  const uniform = object(value, 'uniform');
  const fields = get(uniform, 'fields');
  if (!Array.isArray(fields)) throw new ManifestError(`must be a list, got ${kind(fields)}`, 'MAN002', 'uniform.fields');
  if (fields.length > MAX_UNIFORM_FIELDS) {
    throw new ManifestError(
      `${fields.length} fields of 4 bytes are over the 4 KiB uniform block (at most ${MAX_UNIFORM_FIELDS})`, 'MAN009', 'uniform.fields',
    );
  }
  const seen = new Set();
  fields.forEach((entry, i) => {
    const where = `uniform.fields[${i}]`;
    const item = object(entry, where);
    const name = identifier(get(item, 'name'), `${where}.name`);
    if (seen.has(name)) {
      throw new ManifestError(`uniform field \`${name}\` is given twice (two values for one name)`, 'MAN009', `${where}.name`);
    }
    seen.add(name);
    choice(get(item, 'type'), UNIFORM_TYPES, `${where}.type`);
  });
  return true;
}

function checkKernel(value, where, backend, dims, buffers, hasUniform) {
  const kernel = object(value, where);
  const file = get(kernel, 'file');
  if (typeof file !== 'string') throw new ManifestError('must be a file name', 'MAN002', `${where}.file`);
  checkFileName(file, `${where}.file`, backend);
  identifier(get(kernel, 'entry_point'), `${where}.entry_point`);
  const size = get(kernel, 'workgroup_size');
  if (!Array.isArray(size) || size.length !== 3) {
    throw new ManifestError('must be a list of 3 integers', 'MAN002', `${where}.workgroup_size`);
  }
  let threads = 1;
  size.forEach((n, axis) => {
    const field = `${where}.workgroup_size[${axis}]`;
    const count = integer(n, field, 1, U32_MAX, 'MAN007');
    if (count > MAX_WORKGROUP_SIZE[axis]) {
      throw new ManifestError(`${count} threads is over the limit of ${MAX_WORKGROUP_SIZE[axis]}`, 'MAN007', field);
    }
    threads *= count;
  });
  if (threads > MAX_WORKGROUP_THREADS) {
    throw new ManifestError(
      `${threads} threads per workgroup is over the limit of ${MAX_WORKGROUP_THREADS}`, 'MAN007', `${where}.workgroup_size`,
    );
  }
  const groups = get(kernel, 'workgroups');
  if (!Array.isArray(groups) || groups.length !== 3) {
    throw new ManifestError('must be a list of 3 sizes', 'MAN002', `${where}.workgroups`);
  }
  groups.forEach((count, axis) => checkSize(count, `${where}.workgroups[${axis}]`, dims, 'MAN007'));
  const bindings = list(get(kernel, 'bindings'), `${where}.bindings`, MAX_BINDINGS);
  const places = new Map();
  const bound = new Set();
  bindings.forEach((entry, i) => {
    const at = `${where}.bindings[${i}]`;
    const binding = object(entry, at);
    const name = identifier(get(binding, 'buffer'), `${at}.buffer`);
    if (!buffers.has(name)) throw new ManifestError(`names no buffer of the manifest: \`${name}\``, 'MAN003', `${at}.buffer`);
    const [group, number] = place(binding, at);
    choice(get(binding, 'access'), ACCESS, `${at}.access`);
    const key = `${group}/${number}`;
    if (places.has(key)) {
      throw new ManifestError(`\`${name}\` and ${places.get(key)} are both at group ${group}, binding ${number}`, 'MAN008', at);
    }
    if (bound.has(name)) throw new ManifestError(`buffer \`${name}\` is bound twice by one kernel`, 'MAN008', at);
    places.set(key, `\`${name}\``);
    bound.add(name);
  });
  const ub = get(kernel, 'uniform_binding');
  if (ub != null) {
    const at = `${where}.uniform_binding`;
    const [group, number] = place(object(ub, at), at);
    if (!hasUniform) throw new ManifestError('the manifest has no uniform to bind', 'MAN009', at);
    const key = `${group}/${number}`;
    if (places.has(key)) {
      throw new ManifestError(`the uniform and ${places.get(key)} are both at group ${group}, binding ${number}`, 'MAN008', at);
    }
    places.set(key, 'the uniform');
  }
  const keys = [...places.keys()].map((k) => k.split('/').map(Number));
  if ((backend === 'ptx' || backend === 'msl') && keys.some(([group]) => group !== 0)) {
    throw new ManifestError(`${backend} binds everything in group 0`, 'MAN008', `${where}.bindings`);
  }
  if (backend === 'ptx') {
    const positions = keys.map(([, number]) => number).sort((a, b) => a - b);
    if (positions.some((p, i) => p !== i)) {
      throw new ManifestError(
        `PTX parameter positions must be 0 to ${positions.length - 1}, each once; got [${positions.join(', ')}]`, 'MAN008', `${where}.bindings`,
      );
    }
  }
  if (has(kernel, 'requires')) checkRequires(kernel.requires, `${where}.requires`, kernel.entry_point, backend);
}

// Each requirement a short lowercase word, and one this host knows for the manifest's
// backend: an unknown one, or another backend's, is refused rather than left to the driver.
function checkRequires(value, field, entryPoint, backend) {
  list(value, field, MAX_REQUIREMENTS).forEach((requirement, i) => {
    const at = `${field}[${i}]`;
    if (typeof requirement !== 'string' || requirement.length > MAX_REQUIREMENT_LENGTH || !REQUIREMENT.test(requirement)) {
      throw new ManifestError(
        `${show(requirement)} is not a requirement ([a-z0-9][a-z0-9_.-]*, at most ${MAX_REQUIREMENT_LENGTH} characters)`, 'MAN002', at,
      );
    }
    if (REQUIREMENTS[backend].includes(requirement)) return;
    const owner = Object.keys(REQUIREMENTS).find((b) => REQUIREMENTS[b].includes(requirement));
    const why = owner === undefined
      ? `kernel \`${entryPoint}\` requires \`${requirement}\`, which this host does not know`
      : `kernel \`${entryPoint}\` requires \`${requirement}\`, which is for ${owner} kernels, not ${backend}`;
    throw new ManifestError(why, 'MAN002', at);
  });
}

function place(binding, at) {
  const group = integer(get(binding, 'group'), `${at}.group`, 0, MAX_GROUP, 'MAN008');
  const number = integer(get(binding, 'binding'), `${at}.binding`, 0, MAX_BINDING, 'MAN008');
  return [group, number];
}

/** A kernel file: a plain name in the manifest's folder with the backend's suffix (MAN004). */
export function checkFileName(name, field, backend) {
  if (!FILE_NAME.test(name) || name.length > 255) {
    throw new ManifestError(
      `${show(name)} is not a plain file name in the manifest's folder (letters, digits, \`_\`, \`.\`, \`-\`; no separator, no scheme)`,
      'MAN004', field,
    );
  }
  if (!name.endsWith(SUFFIX[backend])) {
    throw new ManifestError(`${show(name)} is not a ${backend} file (\`${SUFFIX[backend]}\`)`, 'MAN004', field);
  }
}

function checkSize(value, field, dims, code) {
  if (typeof value === 'string') expression(value, field, dims);
  else integer(value, field, 0, U32_MAX, code);
}

function expression(text, field, dims) {
  let unknown;
  try {
    parse(text);
    unknown = [...names(text)].filter((n) => !dims.has(n)).sort();
  } catch (err) {
    if (err instanceof DimExprError) throw new DimExprError(err.reason, field);
    throw err;
  }
  if (unknown.length) throw new DimExprError(`\`${unknown[0]}\` is not a dim of this manifest`, field);
}

function object(value, field) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ManifestError(`must be an object, got ${kind(value)}`, 'MAN002', field);
  }
  return value;
}

function list(value, field, limit) {
  if (!Array.isArray(value)) throw new ManifestError(`must be a list, got ${kind(value)}`, 'MAN002', field);
  if (value.length > limit) throw new ManifestError(`has ${value.length} entries, over the limit of ${limit}`, 'MAN002', field);
  return value;
}

function identifier(value, field) {
  if (typeof value !== 'string' || !IDENTIFIER.test(value) || value.length > MAX_NAME_LENGTH) {
    throw new ManifestError(
      `${show(value)} is not an identifier ([A-Za-z_][A-Za-z0-9_]*, at most ${MAX_NAME_LENGTH} characters)`, 'MAN003', field,
    );
  }
  return value;
}

function choice(value, choices, field) {
  if (typeof value !== 'string' || !choices.includes(value)) {
    throw new ManifestError(`${show(value)} is not one of ${choices.join(', ')}`, 'MAN002', field);
  }
  return value;
}

/** An integer-valued JSON number (1 and 1.0 alike) in [low, high] (else `code`). */
function integer(value, field, low, high, code) {
  if (typeof value !== 'number') throw new ManifestError(`must be an integer, got ${kind(value)}`, 'MAN002', field);
  if (!Number.isInteger(value)) throw new ManifestError(`must be an integer, got ${value}`, 'MAN002', field);
  if (value < low || value > high) throw new ManifestError(`${value} is outside ${low}..${high}`, code, field);
  return value;
}

function kind(value) {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return 'a list';
  return { boolean: 'a boolean', number: 'a number', string: 'a string', object: 'an object' }[typeof value] ?? typeof value;
}

function show(value) {
  const text = typeof value === 'string' || typeof value === 'number' ? JSON.stringify(value) : kind(value);
  return text.length <= 60 ? text : `${text.slice(0, 57)}...`;
}

// ------------------------------------------------------------------ stage 3: at a run

function at(expr, dims, field) {
  try {
    return evaluateBig(expr, dims);
  } catch (err) {
    if (err instanceof DimExprError) throw new DimExprError(err.reason, field);
    throw err;
  }
}

/**
 * [shape, elements, bytes] of buffer `index` under `dims`, each checked: every axis and the
 * element count in 0..2^32 - 1, the bytes within `maxBytes` (MAN006). Numbers, exact.
 */
export function bufferExtent(manifest, index, dims, maxBytes) {
  const buf = manifest.buffers[index];
  const where = `buffers[${index}].shape`;
  const shape = buf.shape.map((entry, a) => {
    const n = at(entry, dims, `${where}[${a}]`);
    if (n < 0n || n > BigInt(U32_MAX)) {
      throw new ManifestError(`buffer \`${buf.name}\` would have ${n} elements along axis ${a}`, 'MAN006', `${where}[${a}]`);
    }
    return n;
  });
  const count = shape.reduce((a, b) => a * b, 1n);
  if (count > BigInt(U32_MAX)) {
    throw new ManifestError(
      `buffer \`${buf.name}\` would have ${count} elements; kernels index with 32-bit integers, so at most 2^32 - 1`, 'MAN006', where,
    );
  }
  let bytes = count * BigInt(DTYPE_SIZES[buf.dtype]);
  if (buf.dtype === 'bfloat16') bytes += bytes % 4n;
  if (maxBytes != null && bytes > BigInt(maxBytes)) {
    throw new ManifestError(
      `buffer \`${buf.name}\` would be ${bytes} bytes, over this device's limit of ${maxBytes} for one binding`, 'MAN006', where,
    );
  }
  return [shape.map(Number), Number(count), Number(bytes)];
}

/** The workgroup counts of kernel `index` under `dims`, each in 0..limits[axis] (MAN007). */
export function launchCounts(manifest, index, dims, limits = [U32_MAX, U32_MAX, U32_MAX]) {
  const kernel = manifest.kernels[index];
  return kernel.workgroups.map((entry, axis) => {
    const field = `kernels[${index}].workgroups[${axis}]`;
    const n = at(entry, dims, field);
    if (n < 0n || n > BigInt(limits[axis])) {
      throw new ManifestError(
        `kernel \`${kernel.entry_point}\` would launch ${n} workgroups along ${'xyz'[axis]}; this device takes 0 to ${limits[axis]}`,
        'MAN007', field,
      );
    }
    return Number(n);
  });
}

/** The evaluated `range` [lo, hi) of buffer `index` (MAN005 when a bound fails). */
export function rangeBounds(manifest, index, dims) {
  const [lo, hi] = manifest.buffers[index].range;
  return [at(lo, dims, `buffers[${index}].range[0]`), at(hi, dims, `buffers[${index}].range[1]`)];
}

/**
 * The value of dim `index` (one with a `solve`) when its buffer's axis has `size` elements:
 * (size - offset) / scale, exactly (GPU040 when the scale does not divide it; MAN005 for a
 * scale below 1). The dims its scale and offset name must be in `dims`.
 */
export function solveDim(manifest, index, dims, size) {
  const dim = manifest.dims[index];
  const where = `dims[${index}].solve`;
  const scale = at(dim.solve.scale, dims, `${where}.scale`);
  const offset = at(dim.solve.offset, dims, `${where}.offset`);
  if (scale < 1n) throw new DimExprError(`scale ${scale} of dim \`${dim.name}\` is below 1`, `${where}.scale`);
  const rest = BigInt(size) - offset;
  if (rest % scale !== 0n) {
    const left = offset === 0n ? `${size}` : `${size} - ${offset}`;
    throw new ManifestError(
      `argument \`${dim.solve.buffer}\` has size ${size} on axis ${dim.solve.axis}, which fits no \`${dim.name}\` (${left} is not a multiple of ${scale})`,
      'GPU040',
    );
  }
  return Number(rest / scale);
}
