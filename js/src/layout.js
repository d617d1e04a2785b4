// The manifest's layout contract (mimir-manifest/1), as mimir/runtime/manifest.py states it:
// buffers dense and row-major, elements little-endian (float32 4 bytes, float16 2, bfloat16 2 (the
// upper half of a float32; an odd count padded with one zero element to a whole 4-byte word),
// int32 and uint32 4, bool_ a 4-byte u32 holding 0 or 1), the uniform block's fields 4 bytes each
// in order (u32, i32, f32), zero-padded to a multiple of 16.

import { DTYPE_SIZES, FORMAT, U32_MAX } from './contract.js';
import { DimExprError, evaluate } from './dimexpr.js';
import { ManifestError } from './errors.js';

export { ManifestError } from './errors.js';
export { FORMAT } from './contract.js';
export const DTYPES = Object.keys(DTYPE_SIZES);
const SIZES = DTYPE_SIZES;

/** Roles whose buffer is filled from the caller's values / read back after the launches. */
export const UPLOADED = ['input', 'inout'];
export const RESULTS = ['output', 'inout'];

/** Bytes per element of `dtype`. */
export function elementSize(dtype) {
  const size = SIZES[dtype];
  if (size === undefined) {
    throw new ManifestError(`unknown dtype ${JSON.stringify(dtype)}; expected one of ${DTYPES.join(', ')}`);
  }
  return size;
}

/** `elementSize` of a manifest buffer entry (an `element_size` there must agree: the contract). */
export function bufferElementSize(buffer) {
  return elementSize(buffer.dtype);
}

/** The concrete shape of a manifest buffer entry under `dims`. */
export function bufferShape(buffer, dims) {
  const shape = buffer.shape.map((entry) => evaluate(entry, dims));
  if (shape.some((n) => n < 0)) {
    throw new ManifestError(`buffer \`${buffer.name}\` has a negative size: [${shape.join(', ')}]`, 'MAN006');
  }
  return shape;
}

export const numel = (shape) => shape.reduce((a, b) => a * b, 1);

/**
 * Throw ManifestError when a dim is missing (GPU035) or outside its stated constraints (GPU042).
 * The buffers' sizes are the contract's business (bufferExtent in contract.js).
 */
export function checkDims(manifest, dims) {
  for (const dim of manifest.dims ?? []) {
    const { name } = dim;
    if (!Object.prototype.hasOwnProperty.call(dims, name)) {
      throw new ManifestError(`no value given for dim \`${name}\``, 'GPU035');
    }
    const value = dims[name];
    if (typeof value !== 'number' || !Number.isInteger(value)) {
      throw new ManifestError(`dim \`${name}\` must be an integer, got ${String(value)}`, 'GPU042');
    }
    if (typeof dim.min === 'number' && value < dim.min) {
      throw new ManifestError(`dim \`${name}\`=${value} is below its minimum ${dim.min}`, 'GPU042');
    }
    if (typeof dim.max === 'number' && value > dim.max) {
      throw new ManifestError(`dim \`${name}\`=${value} is above its maximum ${dim.max}`, 'GPU042');
    }
    if (dim.multiple_of && value % dim.multiple_of) {
      throw new ManifestError(`dim \`${name}\`=${value} is not a multiple of ${dim.multiple_of}`, 'GPU042');
    }
    if (value > U32_MAX) {
      throw new ManifestError(`dim \`${name}\`=${value} does not fit its u32 uniform field`, 'GPU042');
    }
    if (value < 0) throw new ManifestError(`dim \`${name}\`=${value} is negative`, 'GPU042');
  }
  // relations with other dims (`max: "MAXT"`), once every dim is bound
  (manifest.dims ?? []).forEach((dim, i) => {
    for (const [key, which] of [['min', 'below its minimum'], ['max', 'above its maximum']]) {
      if (typeof dim[key] !== 'string') continue;
      let limit;
      try {
        limit = evaluate(dim[key], dims);
      } catch (err) {
        if (err instanceof DimExprError) throw new DimExprError(err.reason, `dims[${i}].${key}`);
        throw err;
      }
      const value = dims[dim.name];
      if (key === 'min' ? value < limit : value > limit) {
        throw new ManifestError(`dim \`${dim.name}\`=${value} is ${which} ${dim[key]}=${limit}`, 'GPU042');
      }
    }
  });
}

// ------------------------------------------------------------------ float16

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE binary16 bits of `value`, rounding to nearest even, as Python's struct 'e' does. */
export function toHalfBits(value) {
  if (Number.isNaN(value)) return 0x7e00;
  const sign = value < 0 || Object.is(value, -0) ? 0x8000 : 0;
  let x = Math.abs(value);
  if (x === Infinity) return sign | 0x7c00;
  // Exact rounding from the double: scale into the half's integer significand.
  if (x < 2 ** -14) {
    // subnormal (or zero): units of 2^-24
    const m = roundHalfEven(x * 2 ** 24);
    return sign | m; // m == 0x400 rolls into the smallest normal, which is the right bits
  }
  let e = Math.floor(Math.log2(x));
  if (2 ** e > x) e -= 1;
  if (2 ** (e + 1) <= x) e += 1;
  let m = roundHalfEven((x / 2 ** e - 1) * 1024);
  if (m === 1024) {
    m = 0;
    e += 1;
  }
  if (e > 15) throw new RangeError(`${value} is too large for float16`);
  return sign | ((e + 15) << 10) | m;
}

function roundHalfEven(x) {
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** The number that binary16 `bits` holds. */
export function fromHalfBits(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const e = (bits >> 10) & 0x1f;
  const m = bits & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 31) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

// ------------------------------------------------------------------ buffers

/** The upper 16 bits of `value` as a float32, rounded to nearest even (NaN kept quiet). */
export function toBfloat16Bits(value) {
  if (Number.isNaN(value)) return 0x7fc0;
  f32[0] = value; // a finite value past float32's range becomes an infinity, as in Python
  const bits = u32[0];
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

const TYPED = {
  float32: [Float32Array],
  float16: [Uint16Array, Float32Array, globalThis.Float16Array].filter(Boolean),
  bfloat16: [Uint16Array, Float32Array],
  int32: [Int32Array],
  uint32: [Uint32Array],
  bool_: [Uint32Array, Uint8Array, Int32Array],
};
const RANGES = { int32: [-(2 ** 31), 2 ** 31 - 1], uint32: [0, U32_MAX] };

/**
 * Little-endian bytes of one input buffer, from a typed array or a plain array of numbers
 * (booleans for bool_). float16 takes a Uint16Array of raw half bits, a Float16Array, a
 * Float32Array or numbers (rounded to nearest even).
 */
export function encode(name, values, dtype, count) {
  const where = `input \`${name}\` (${dtype})`;
  const isTyped = ArrayBuffer.isView(values) && !(values instanceof DataView);
  if (!isTyped && !Array.isArray(values)) {
    throw new ManifestError(`${where} must be a typed array or an array of numbers, got ${describe(values)}`, 'GPU040');
  }
  if (isTyped && !TYPED[dtype].some((T) => values instanceof T)) {
    const ok = TYPED[dtype].map((T) => T.name).join(' or ');
    throw new ManifestError(`${where} must be a ${ok}, got ${values.constructor.name}`, 'GPU041');
  }
  if (values.length !== count) {
    throw new ManifestError(`${where} has ${values.length} values; its shape needs ${count}`, 'GPU040');
  }
  const padded = dtype === 'bfloat16' ? count + (count % 2) : count; // whole 4-byte words
  const out = new ArrayBuffer(padded * elementSize(dtype));
  const view = new DataView(out);
  if (dtype === 'bfloat16') {
    for (let i = 0; i < count; i += 1) {
      const bits = values instanceof Uint16Array ? values[i] : toBfloat16Bits(checkNumber(where, values[i], i));
      view.setUint16(2 * i, bits, true);
    }
    return out;
  }
  if (dtype === 'float16') {
    for (let i = 0; i < count; i += 1) {
      let bits;
      if (values instanceof Uint16Array) bits = values[i];
      else {
        const v = checkNumber(where, values[i], i);
        try {
          bits = toHalfBits(v);
        } catch (err) {
          throw new ManifestError(`${where}[${i}] = ${v} does not fit float16`, 'GPU041');
        }
      }
      view.setUint16(2 * i, bits, true);
    }
    return out;
  }
  for (let i = 0; i < count; i += 1) {
    let v = values[i];
    if (dtype === 'bool_') {
      if (typeof v === 'boolean') v = v ? 1 : 0;
      else if (v !== 0 && v !== 1) throw new ManifestError(`${where}[${i}] must be 0, 1, true or false, got ${v}`, 'GPU041');
      view.setUint32(4 * i, v, true);
    } else if (dtype === 'float32') {
      v = checkNumber(where, v, i);
      if (!isTyped && Number.isFinite(v) && !Number.isFinite(Math.fround(v))) {
        throw new ManifestError(`${where}[${i}] = ${v} does not fit float32`, 'GPU041');
      }
      view.setFloat32(4 * i, v, true);
    } else {
      v = checkNumber(where, v, i);
      const [lo, hi] = RANGES[dtype];
      if (!Number.isInteger(v) || v < lo || v > hi) {
        throw new ManifestError(`${where}[${i}] = ${v} is not an integer in [${lo}, ${hi}]`, 'GPU041');
      }
      if (dtype === 'int32') view.setInt32(4 * i, v, true);
      else view.setUint32(4 * i, v, true);
    }
  }
  return out;
}

function checkNumber(where, v, i) {
  if (typeof v !== 'number') throw new ManifestError(`${where}[${i}] must be a number, got ${describe(v)}`, 'GPU041');
  return v;
}

function describe(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return v.constructor ? v.constructor.name : 'an object';
  return `${typeof v} ${String(v)}`;
}

/**
 * Typed array of `count` elements of `dtype` from little-endian bytes: Float32Array for float32
 * and float16 (widened), Int32Array, Uint32Array, and Uint8Array of 0/1 for bool_.
 */
export function decode(bytes, dtype, count) {
  const view = new DataView(bytes.buffer ?? bytes, bytes.byteOffset ?? 0);
  switch (dtype) {
    case 'float32': return new Float32Array(bytes.slice(0, 4 * count));
    case 'int32': return new Int32Array(bytes.slice(0, 4 * count));
    case 'uint32': return new Uint32Array(bytes.slice(0, 4 * count));
    case 'float16': {
      const out = new Float32Array(count);
      for (let i = 0; i < count; i += 1) out[i] = fromHalfBits(view.getUint16(2 * i, true));
      return out;
    }
    case 'bfloat16': {
      const out = new Float32Array(count);
      const word = new Uint32Array(out.buffer);
      for (let i = 0; i < count; i += 1) word[i] = view.getUint16(2 * i, true) << 16;
      return out;
    }
    case 'bool_': {
      const out = new Uint8Array(count);
      for (let i = 0; i < count; i += 1) out[i] = view.getUint32(4 * i, true) !== 0 ? 1 : 0;
      return out;
    }
    default: throw new ManifestError(`unknown dtype ${JSON.stringify(dtype)}`);
  }
}

// ------------------------------------------------------------------ uniform

/**
 * The uniform block's bytes (null when the manifest has none). Each field takes its value from
 * `dims` first, then `scalars`; i32/u32 fields need integers in range, f32 any finite-in-f32 number.
 */
export function packUniform(manifest, dims, scalars = {}) {
  if (!manifest.uniform) return null;
  const fields = manifest.uniform.fields;
  const size = Math.max(16, Math.ceil((4 * fields.length) / 16) * 16);
  const out = new ArrayBuffer(size);
  const view = new DataView(out);
  fields.forEach((field, i) => {
    const { name, type } = field;
    let value;
    if (Object.prototype.hasOwnProperty.call(dims, name)) value = dims[name];
    else if (Object.prototype.hasOwnProperty.call(scalars, name)) value = scalars[name];
    else throw new ManifestError(`no value for uniform field \`${name}\` (neither a dim nor a scalar)`, 'GPU040');
    if (typeof value === 'boolean' || typeof value !== 'number') {
      throw new ManifestError(`uniform field \`${name}\` (${type}) must be a number, got ${describe(value)}`, 'GPU041');
    }
    if (type === 'f32') {
      if (Number.isFinite(value) && !Number.isFinite(Math.fround(value))) {
        throw new ManifestError(`uniform field \`${name}\`=${value} does not fit f32`, 'GPU041');
      }
      view.setFloat32(4 * i, value, true);
      return;
    }
    const [lo, hi] = type === 'i32' ? RANGES.int32 : type === 'u32' ? RANGES.uint32 : [];
    if (lo === undefined) throw new ManifestError(`uniform field \`${name}\` has unknown type ${JSON.stringify(type)}`, 'MAN002');
    if (!Number.isInteger(value) || value < lo || value > hi) {
      throw new ManifestError(`uniform field \`${name}\`=${value} does not fit ${type} (an integer in [${lo}, ${hi}])`, 'GPU041');
    }
    if (type === 'i32') view.setInt32(4 * i, value, true);
    else view.setUint32(4 * i, value, true);
  });
  return out;
}

/** The evaluated `workgroups` of one kernel entry. */
export function workgroupCounts(kernel, dims) {
  const counts = kernel.workgroups.map((e) => evaluate(e, dims));
  if (counts.length !== 3) throw new ManifestError(`kernel \`${kernel.entry_point}\` needs 3 workgroup counts`);
  if (counts.some((c) => c < 0)) {
    throw new ManifestError(`kernel \`${kernel.entry_point}\` has a negative workgroup count [${counts.join(', ')}]`, 'MAN007');
  }
  return counts;
}

/**
 * Throw ManifestError GPU043 unless every value of the encoded int32/uint32 buffer `bytes` of
 * manifest buffer `buffer` lies in its `range` [lo, hi) under `dims` (the kernel's bounds proofs
 * assume it); the message names the buffer, the first value outside and its index.
 */
export function checkRange(buffer, bytes, dims) {
  if (buffer.range == null) return;
  const [lo, hi] = buffer.range.map((e) => evaluate(e, dims)); // checked by the contract first
  const view = new DataView(bytes);
  const signed = buffer.dtype === 'int32';
  const count = bytes.byteLength / 4;
  for (let i = 0; i < count; i += 1) {
    const v = signed ? view.getInt32(4 * i, true) : view.getUint32(4 * i, true);
    if (v >= lo && v < hi) continue;
    const shape = bufferShape(buffer, dims);
    const index = [];
    let rest = i;
    for (let a = shape.length - 1; a >= 0; a -= 1) {
      index.unshift(rest % shape[a]);
      rest = Math.floor(rest / shape[a]);
    }
    throw new ManifestError(
      `input \`${buffer.name}\` holds ${v} at index [${index.join(', ')}], outside its range [${buffer.range.join(', ')}) = [${lo}, ${hi}) (the kernel's bounds proofs assume every value lies in it)`,
      'GPU043',
    );
  }
}
