// Types of mimir-host (src/index.js). WebGPU types (GPUDevice, GPU) come from @webgpu/types or
// the DOM library; they are declared loosely here so that the package needs neither.

/** A manifest size: a non-negative int or a dim expression such as "cdiv(N * M, 256)". */
export type Size = number | string;
export type DType = 'float32' | 'float16' | 'bfloat16' | 'int32' | 'uint32' | 'bool_';

/** FUNCTION.manifest.json, format mimir-manifest/1 (mimir/codegen/schemas/manifest-v1.schema.json). */
export interface Manifest {
  format: 'mimir-manifest/1';
  function: string;
  source: string;
  backend: 'msl' | 'wgsl' | 'ptx' | 'spirv';
  dims: { name: string; min: number; max: number | null; multiple_of: number | null }[];
  /**
   * `input`: the caller's values; `output`: read back; `inout` (an `InOut[...]` parameter): both,
   * read back as the kernels left it; `scratch`: neither. `range` ([lo, hi), on an integer input
   * with `Range(lo, hi)`): every value must satisfy lo <= v < hi, checked before each launch.
   */
  buffers: {
    name: string;
    role: 'input' | 'output' | 'inout' | 'scratch';
    dtype: DType;
    shape: Size[];
    /** Redundant: when present it must equal the dtype's size (the contract refuses another). */
    element_size?: number;
    range?: [Size, Size];
  }[];
  uniform: { fields: { name: string; type: 'u32' | 'i32' | 'f32' }[] } | null;
  kernels: {
    file: string;
    entry_point: string;
    workgroup_size: [number, number, number];
    workgroups: [Size, Size, Size];
    bindings: { buffer: string; group: number; binding: number; access: 'read' | 'read_write' }[];
    uniform_binding: { group: number; binding: number } | null;
  }[];
}

/**
 * What an input buffer accepts, by dtype. float16 and bfloat16 take raw bits as a Uint16Array, a
 * Float32Array, or numbers (rounded to nearest even).
 */
export type InputArray =
  | Float32Array | Int32Array | Uint32Array | Uint16Array | Uint8Array
  | ArrayLike<number> | ArrayLike<boolean>;

/**
 * An output: Float32Array (float32, and float16 and bfloat16 widened), Int32Array, Uint32Array,
 * Uint8Array (bool_ as 0/1).
 */
export type OutputArray = Float32Array | Int32Array | Uint32Array | Uint8Array;

export interface LoadOptions {
  /** The device to run on; by default one is requested from `gpu`. */
  device?: any;
  /** Where to request an adapter (default `navigator.gpu`; in Node, `create([])` of the `webgpu` package, and a software Vulkan driver found on the machine when it has no adapter). */
  gpu?: any;
  /** Kernel sources by file name, instead of fetching them next to the manifest. */
  files?: Record<string, string>;
  /** Where the kernel files live when `source` is an object. */
  baseUrl?: string | URL;
}

export interface KernelTime {
  entryPoint: string;
  /** Median wall time of the launch submitted alone, in milliseconds (submission included). */
  ms: number;
}

export declare class Program {
  readonly manifest: Manifest;
  readonly device: any;
  /** Pipelines made, buffers allocated, runs done. */
  readonly stats: { pipelines: number; buffers: number; runs: number };
  /**
   * Run every kernel in order. `inputs` holds every `input` and `inout` buffer by name; the result
   * holds every `output` buffer and every `inout` buffer as the kernels left it (the arrays passed
   * in are not modified). `sizes` gives dims and scalar parameters by name; a dim that is the only
   * unknown entry of an input's shape may be left out (it is read from the length). A value
   * outside an input's `range` is refused (ManifestError, code GPU043) before any launch.
   */
  run(inputs: Record<string, InputArray>, sizes?: Record<string, number>): Promise<Record<string, OutputArray>>;
  /** Like `run`, and time each launch alone `repeat` times (default 5). */
  profile(
    inputs: Record<string, InputArray>,
    sizes?: Record<string, number>,
    options?: { repeat?: number },
  ): Promise<{ outputs: Record<string, OutputArray>; kernels: KernelTime[] }>;
  /** The dims the inputs' lengths determine, with those of `sizes`. */
  inferDims(inputs: Record<string, InputArray>, sizes?: Record<string, number>): Record<string, number>;
  /** Free the program's GPU buffers. */
  destroy(): void;
}

/**
 * Load a manifest (URL, Node file path, or object), fetch its kernels and make the pipelines. The
 * manifest and its kernel files are checked against the contract of docs/hosts.md first.
 */
export declare function load(source: string | URL | Manifest, options?: LoadOptions): Promise<Program>;

/**
 * A refused manifest (a MAN code of docs/hosts.md, the same every host gives), or values that do
 * not fit it (the checker's code: GPU035, GPU040 to GPU043); the message says which and why.
 */
export declare class ManifestError extends Error {
  /** MAN001..MAN009 for the manifest, GPU035/GPU040..GPU043 for a call's values. */
  readonly code?: string;
  /** The manifest field at fault, as a path: `kernels[0].file`, `buffers[2].shape[1]`. */
  readonly field?: string;
  /** The message without its code and field. */
  readonly reason: string;
}
/** A malformed or forbidden dim expression, or one that cannot be evaluated (code MAN005). */
export declare class DimExprError extends ManifestError {}

/** The JSON value of a manifest's bytes under the contract's JSON rules (MAN001 otherwise). */
export declare function parseManifest(data: Uint8Array | ArrayBuffer): unknown;
/** Throw ManifestError unless every field follows the contract; `backend`: what the host runs. */
export declare function checkManifest(manifest: unknown, backend?: string | string[]): asserts manifest is Manifest;

export declare const FORMAT: 'mimir-manifest/1';
/** The value of a manifest size under `env` (Python's // and %, cdiv; exact integers). */
export declare function evaluate(expr: Size, env: Record<string, number>): number;
export declare function elementSize(dtype: DType): number;
export declare function bufferShape(buffer: Manifest['buffers'][number], dims: Record<string, number>): number[];
export declare function numel(shape: number[]): number;
export declare function checkDims(manifest: Manifest, dims: Record<string, number>): void;
/** The uniform block's bytes (fields 4 bytes each, padded to 16), or null when there is none. */
export declare function packUniform(
  manifest: Pick<Manifest, 'uniform'>, dims: Record<string, number>, scalars?: Record<string, number>,
): ArrayBuffer | null;
/** Throw ManifestError GPU043 unless every value of an encoded int32/uint32 buffer lies in its `range`. */
export declare function checkRange(
  buffer: Manifest['buffers'][number], bytes: ArrayBuffer, dims: Record<string, number>,
): void;
export declare function workgroupCounts(kernel: Manifest['kernels'][number], dims: Record<string, number>): number[];
export declare function encode(name: string, values: InputArray, dtype: DType, count: number): ArrayBuffer;
export declare function decode(bytes: ArrayBuffer, dtype: DType, count: number): OutputArray;
/** bfloat16 bits of a number (the upper half of its float32), rounded to nearest even. */
export declare function toBfloat16Bits(value: number): number;
/** binary16 bits of a number, rounded to nearest even (RangeError past 65504's rounding range). */
export declare function toHalfBits(value: number): number;
export declare function fromHalfBits(bits: number): number;
